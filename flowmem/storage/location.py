"""What a store location may be, and what an operating-system error under the store means.

A store is a LanceDB database that `Store` opens several connections to (and Lance datasets
inside it, for compaction): it must outlive a connection, so `memory://` is no store, and
LanceDB Cloud (`db://`) offers no Lance datasets. Everything here is pure but for a `stat` of
a local path; `check_location` raises the error a store refuses a location with.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from flowmem.storage.errors import StoreLocationError

__all__ = [
    "ACCEPTED",
    "SCHEMES",
    "check_location",
    "local_path",
    "location_problem",
    "os_error",
    "os_error_line",
]

SCHEMES = ("file", "s3", "s3+ddb", "gs", "az", "abfss")
"""URI schemes of object stores LanceDB and Lance both open as a directory of datasets."""

ACCEPTED = (
    "a local directory path, or a URI of "
    + ", ".join(f"{s}://" for s in SCHEMES[:-1])
    + f" or {SCHEMES[-1]}://"
)
"""What a store location may be, as an error message says it."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_LANCE_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def location_problem(db: str) -> str | None:
    """Why `db` cannot be a store location, or None when it can be one.

    A local path is looked at (one `stat` per existing ancestor): it may be missing, but then
    its nearest existing ancestor must be a directory."""
    if not db.strip():
        return "it is empty"
    match = _SCHEME.match(db)
    if match:
        scheme = match.group(1).lower()
        if scheme in ("memory", "shared-memory"):
            return "an in-memory database is dropped with its last connection, and a store outlives them"
        if scheme not in SCHEMES:
            return f"{scheme}:// is not a scheme LanceDB can keep a store in"
    path = local_path(db)
    if path is None:
        return None
    if path.exists():
        return None if path.is_dir() else "it is a file, not a directory"
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else f"{parent} is a file, not a directory"
    return None


def local_path(db: str) -> Path | None:
    """The local directory a store location names (a path or a `file://` URI), or None for an
    object store's URI."""
    match = _SCHEME.match(db)
    if match:
        if match.group(1).lower() != "file":
            return None
        db = db[len("file://") :]
    return Path(db).expanduser()


def check_location(db: str) -> None:
    """Refuse a location that cannot be a store (`location_problem`).

    Raises:
        StoreLocationError: (a `ValueError`) saying why, and what a location may be.
    """
    if why := location_problem(db):
        raise StoreLocationError(f"{db!r} cannot be a store location: {why}; use {ACCEPTED}")


def os_error(err: BaseException) -> tuple[int, str] | None:
    """The operating-system error (errno, its text) behind an exception, or None.

    LanceDB reports one as a `RuntimeError`/`OSError` whose text holds `(os error N)` and a
    Rust source location; Python's own as an `OSError` with an errno. The causes are looked
    at too, outermost first."""
    for seen in _chain(err):
        if isinstance(seen, OSError) and seen.errno:
            return seen.errno, seen.strerror or os.strerror(seen.errno)
        found = _LANCE_OS_ERROR.search(str(seen))
        if found:
            code = int(found.group(1))
            return code, os.strerror(code)
    return None


_WRITABLE = "what writes (ingest, induce, recording hooks) needs a location this process may write"
_HINTS = {
    errno.EROFS: _WRITABLE,
    errno.EACCES: _WRITABLE,
    errno.EPERM: _WRITABLE,
    errno.ENOSPC: "free some space, or move the store",
    errno.EDQUOT: "free some space, or move the store",
}


def os_error_line(err: BaseException, where: str) -> str | None:
    """One line naming where an operating-system error happened and what it was (with what
    to do for the common ones), or None when `err` holds none.

    `where` is the store's location; an `OSError` that names a file outside it names that
    file instead (the quarantine file, a spool)."""
    found = os_error(err)
    if found is None:
        return None
    code, text = found
    filename = next(
        (e.filename for e in _chain(err) if isinstance(e, OSError) and isinstance(e.filename, str)), None
    )
    place = f"the store at {where}"
    if filename and not Path(os.path.abspath(filename)).is_relative_to(os.path.abspath(where)):
        place = filename
    hint = _HINTS.get(code)
    return f"{place}: {text} (errno {code})" + (f": {hint}" if hint else "")


def _chain(err: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    seen: BaseException | None = err
    while seen is not None and seen not in found:
        found.append(seen)
        seen = seen.__cause__ or seen.__context__
    return found
