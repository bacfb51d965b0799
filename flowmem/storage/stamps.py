"""Whether a local store's tables have moved on, told by a `stat` of each one's `_versions`
directory instead of by asking LanceDB.

A served index asks the store for its three table versions (`Store.served_version`) at most
every `check_every` seconds. Through LanceDB that is three `Table.version` calls: ~0.8 ms in
all when asked back to back, ~1.7 ms for an agent that searches seconds apart (its threads
have gone to sleep and its caches cold), against ~0.8 ms for the search itself. A Lance
commit (an append, a merge, a delete, a restore, a cleanup) adds or removes a manifest in the
table's `_versions` directory, which changes the directory's modification time and size; a
`stat` of the three directories costs ~6 µs. So when none of them changed since the versions
were last read, those versions still hold; each table is told apart, so that after an outcome
(a usage commit) only the usage table's version is asked of LanceDB.

It is trusted only where it cannot miss a commit:
- a local directory, on a file system whose kernel keeps directory times itself (Linux's
  /proc/self/mountinfo names it: `LOCAL_FILESYSTEMS`); not a network file system, whose
  client may answer a `stat` from a cache seconds old, nor object storage, nor a system
  without /proc (where every check asks LanceDB, as before);
- a directory last changed at least `SETTLED_NS` before it was looked at: a file system's
  clock ticks in steps (a few ms on Linux), so a commit in the same step as the look could
  leave the time as it was; a commit after a settled look cannot.
"""

from __future__ import annotations

import functools
import os
import re
import time
from pathlib import Path

from flowmem.storage.location import local_path

__all__ = ["LOCAL_FILESYSTEMS", "SETTLED_NS", "Stamp", "TableStamps", "local_directory", "parse_mounts"]

LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "jfs", "reiserfs", "bcachefs", "zfs"}
    | {"tmpfs", "ramfs", "overlay"}
)
"""File systems whose directory times the kernel itself keeps as entries change."""

SETTLED_NS = 2_000_000_000
"""A directory changed less than this before it was looked at is not trusted (2 s: above the
coarsest clock step of the file systems above)."""

Stamp = tuple[tuple[int, int, int], ...]
"""(inode, modification time in ns, size) of each table's `_versions` directory."""

_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """A mount point as mountinfo writes it (space, tab, newline and backslash in octal)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mounts(text: str) -> tuple[tuple[str, str], ...]:
    """(mount point, file system type) of each line of a /proc/<pid>/mountinfo, the longest
    mount point first."""
    found = []
    for line in text.splitlines():
        fields, _, after = line.partition(" - ")
        parts = fields.split()
        if len(parts) >= 5 and after.split():
            found.append((_unescape(parts[4]), after.split()[0]))
    return tuple(sorted(found, key=lambda m: len(m[0]), reverse=True))


@functools.cache
def _mounts() -> tuple[tuple[str, str], ...]:
    """The mounts this process sees (`parse_mounts`); none without /proc (not Linux)."""
    try:
        return parse_mounts(Path("/proc/self/mountinfo").read_text())
    except OSError:
        return ()


def local_directory(db: str) -> Path | None:
    """The store's directory when its table times can be trusted (a local path or `file://`
    URI on one of `LOCAL_FILESYSTEMS`), else None."""
    named = local_path(db)
    if named is None:
        return None
    path = Path(os.path.realpath(named))
    for point, kind in _mounts():
        if path == Path(point) or Path(point) in path.parents:
            return path if kind in LOCAL_FILESYSTEMS else None
    return None


class TableStamps:
    """Stamps of a store's tables (`Stamp`), where they can be trusted."""

    def __init__(self, root: Path | None, settled_ns: int = SETTLED_NS) -> None:
        self.root, self.settled_ns = root, settled_ns
        self._paths: dict[tuple[str, ...], list[str]] = {}

    def stamp(self, tables: tuple[str, ...]) -> Stamp | None:
        """These tables' stamp, or None when it cannot be trusted: not a local store, a table
        not there, or one changed less than `settled_ns` ago."""
        if self.root is None:
            return None
        paths = self._paths.get(tables)
        if paths is None:
            paths = self._paths[tables] = [str(self.root / f"{name}.lance" / "_versions") for name in tables]
        now = time.time_ns()
        found = []
        for path in paths:
            try:
                seen = os.stat(path)
            except OSError:
                return None
            if seen.st_mtime_ns > now - self.settled_ns:
                return None
            found.append((seen.st_ino, seen.st_mtime_ns, seen.st_size))
        return tuple(found)
