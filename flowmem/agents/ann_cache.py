"""The HNSW indexes search builds, kept on disk for the next process that opens the store.

A process that serves a store builds an HNSW of its keys and one of its stored tasks in the
background (`served_index`): at 100k of each, 20–50 s of both cores, during which its searches
score every key (~3–7 ms) and every stored run of a recurring task (~13–18 ms). Every agent
process did it again on the same vectors. Here a build is named by what it is built of
(`retrieval.ann.ann_identity`: a hash of the rows, their scale, the build's parameters and
faiss's version) and written once built; a process that needs the same one reads it
(~0.1–0.3 s at 100k) instead of building it.

A process that builds one first claims it (a marker file made only if none is there): another
process that needs the same index meanwhile, on this machine or one sharing the directory,
waits for it to be kept and reads it, instead of building it beside, as every process that
reloads after the same induction run would. A claim whose process is gone (its pid not running
on this host; from another host, older than `_STALE_CLAIM`) is taken over.

A file is written under a name of its own and renamed into place, so a reader never finds one
half written. A file read is marked used (its time set), and past `limit` bytes the least
recently used are removed. A file that cannot be read, or is not what its name says, is
logged, removed and built anew. Nothing here is needed: an error is logged and the index built
as without it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from flowmem.retrieval.ann import KeyANN, ann_available, ann_identity, build_ann
from flowmem.settings import Settings

__all__ = ["SUFFIX", "AnnCache", "built"]

logger = logging.getLogger(__name__)

SUFFIX = ".hnsw"
"""A kept index's file name: its identity, then this."""

_STALE_PART = 3600.0
"""Seconds after which a part-written file (a process that died while writing) is removed."""

_STALE_CLAIM = 3600.0
"""Seconds after which a claim is taken over whoever made it: another host's process cannot be
asked whether it runs, and a pid of this host may have been reused (a build at 1M keys takes
~4 min)."""

_STALE_WRITE = 10.0
"""Seconds after which a claim without its owner written in is taken over."""

_WAIT_STEP = 0.25
"""Seconds between two looks for an index another process is building."""

_CLAIMS = 3
"""Rounds of looking for one index, claiming it and waiting for another's build of it, before
building it here without a claim."""


@dataclass(frozen=True)
class AnnCache:
    """A directory of built HNSW indexes, by identity, at most `limit` bytes of them."""

    directory: Path
    limit: int
    """Bytes kept at most (the least recently used removed past it); one index is always kept."""

    @classmethod
    def of(cls, settings: Settings) -> AnnCache | None:
        """The settings' cache (`Settings.ann_cache_path`), or None when it keeps nothing."""
        if not settings.ann_cache_mb:
            return None
        return cls(settings.ann_cache_path, settings.ann_cache_mb * 1_000_000)

    def path(self, identity: str) -> Path:
        """Where the index of this identity is kept."""
        return self.directory / f"{identity}{SUFFIX}"

    def load(self, identity: str, rows: int, dim: int) -> KeyANN | None:
        """The index of this identity (of `rows` vectors of `dim`), if kept; None otherwise,
        and when the file cannot be read (logged, and removed)."""
        path = self.path(identity)
        if not path.exists():
            return None
        try:
            found = KeyANN.read(path, rows, dim)
        except Exception:  # torn or foreign: built anew, and written over
            if not path.exists():
                return None  # removed meanwhile (another process's eviction): a miss
            logger.warning("the kept HNSW %s could not be read; building it anew", path, exc_info=True)
            path.unlink(missing_ok=True)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used: the last to be removed
        return found

    def save(self, identity: str, ann: KeyANN) -> None:
        """Keep an index (written beside, then renamed into place), and remove the least
        recently used past `limit`. An error is logged: the index is served all the same."""
        path = self.path(identity)
        part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            ann.write(part)
            os.replace(part, path)
        except Exception:
            logger.warning("keeping the HNSW in %s failed", self.directory, exc_info=True)
            with contextlib.suppress(OSError):
                part.unlink(missing_ok=True)
            return
        self._evict(keep=path)

    def claim(self, identity: str) -> bool:
        """Whether this process may build the index of this identity: it made the claim (a
        claim whose process is gone taken over), or could not make one (it builds all the same).
        False: another process's claim stands (`wait` for it)."""
        marker = self._marker(identity)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if marker.exists() and not _claimed(marker):
                marker.unlink(missing_ok=True)
            made = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if marker.exists():
                return False
            logger.warning("claiming the HNSW build in %s failed", self.directory, exc_info=True)
            return True  # no directory there (a file in its place): built here all the same
        except OSError:
            logger.warning("claiming the HNSW build in %s failed", self.directory, exc_info=True)
            return True
        with os.fdopen(made, "w") as out:
            out.write(f"{socket.gethostname()} {os.getpid()}")
        return True

    def release(self, identity: str) -> None:
        """The claim of this identity removed (its index kept, or not to be)."""
        with contextlib.suppress(OSError):
            self._marker(identity).unlink(missing_ok=True)

    def wait(self, identity: str, rows: int, dim: int, stop: threading.Event | None) -> KeyANN | None:
        """The index another process claimed, once it keeps it; None once its claim is gone
        without it (its build stopped or failed, its process ended) or `stop` is set."""
        marker, pause = self._marker(identity), stop if stop is not None else threading.Event()
        while True:
            found = self.load(identity, rows, dim)
            if found is not None or not marker.exists() or not _claimed(marker):
                return found
            if pause.wait(_WAIT_STEP):  # stopped
                return None

    def _marker(self, identity: str) -> Path:
        return self.directory / f".{identity}.building"

    def _evict(self, keep: Path) -> None:
        """Remove the least recently used indexes past `limit` (never `keep`), part-written
        files older than `_STALE_PART` and claims that no longer stand."""
        now, kept = time.time(), []
        for entry in self.directory.iterdir():
            try:
                stat = entry.stat()
            except FileNotFoundError:  # removed meanwhile by another process
                continue
            if entry.name.endswith(".part") and now - stat.st_mtime > _STALE_PART:
                entry.unlink(missing_ok=True)
            elif entry.name.endswith(".building") and not _claimed(entry):
                entry.unlink(missing_ok=True)
            elif entry.name.endswith(SUFFIX):
                kept.append((entry == keep, stat.st_mtime, stat.st_size, entry))
        total = 0
        for is_kept, _, size, entry in sorted(kept, reverse=True):  # `keep` first, then the newest
            total += size
            if total > self.limit and not is_kept:
                entry.unlink(missing_ok=True)


def built(
    vectors: npt.NDArray[np.float32],
    scale: npt.NDArray[np.float64] | None,
    cache: AnnCache | None,
    stop: threading.Event | None = None,
) -> KeyANN | None:
    """The HNSW of these rows (scaled by `scale`) as `build_ann` builds it: read from `cache`
    when it holds one of the same identity; while another process builds it (its claim
    stands), waited for and read; else built here, claimed, and kept there."""
    if cache is None or not ann_available() or not len(vectors):
        return build_ann(vectors, scale=scale, stop=stop)
    identity, rows, dim = ann_identity(vectors, scale), len(vectors), vectors.shape[1]
    for _ in range(_CLAIMS):
        found = cache.load(identity, rows, dim)
        if found is not None:
            return found
        if cache.claim(identity):
            try:
                ann = build_ann(vectors, scale=scale, stop=stop)
                if ann is not None:
                    cache.save(identity, ann)
                return ann
            finally:
                cache.release(identity)
        found = cache.wait(identity, rows, dim, stop)
        if found is not None or (stop is not None and stop.is_set()):
            return found
    return build_ann(vectors, scale=scale, stop=stop)


def _claimed(marker: Path) -> bool:
    """Whether a build claim still stands: it is younger than `_STALE_CLAIM` and its process
    runs (on this host; of another host: assumed), or it was just made (its owner not yet
    written in)."""
    try:
        made, text = marker.stat().st_mtime, marker.read_text()
    except FileNotFoundError:
        return False
    except OSError:  # cannot be read: left to stand
        return True
    age, owner = time.time() - made, text.split()
    if len(owner) != 2 or not owner[1].isdigit():
        return age < _STALE_WRITE
    if owner[0] != socket.gethostname() or age >= _STALE_CLAIM:
        return age < _STALE_CLAIM
    try:
        os.kill(int(owner[1]), 0)  # signal 0: only whether it runs
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    return True
