"""The unsaved-runs file, `<db>.unsaved.jsonl`: runs a `WorkflowMemory` could not store, kept
for the next one that can.

Any number of processes append to it, each holding an exclusive `flock` on the file while it
writes and fsync'ing before it lets go. The next memory that opens takes the file back: under
the same lock it renames it to a name of its own (`<spill>.<pid>-<ns>.taking`), so appenders
start a new file and nothing written after the rename is taken twice or lost; it stores the
runs and deletes its copy. A copy left by a taker that died (or could not store) is taken by
the next one; storing a run twice is harmless (stored ids are skipped).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from flowmem.interchange.jsonl import dump_record, fsync_dir, iter_lines
from flowmem.models import Trajectory
from flowmem.settings import Settings

__all__ = ["append", "claim", "read", "spill_path"]


def spill_path(settings: Settings) -> Path:
    """Where the runs a memory could not store go: next to the quarantine file."""
    quarantine = settings.quarantine_path
    return quarantine.with_name(quarantine.name.replace("quarantine", "unsaved"))


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is still the one at `path` (a taker may have moved it)."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def append(path: Path, trajectories: Sequence[Trajectory]) -> None:
    """Append runs to the unsaved-runs file and fsync them (and, for a new file, its
    directory). Raises `OSError` when the file cannot be written."""
    data = "".join(json.dumps(dump_record(t), ensure_ascii=False) + "\n" for t in trajectories).encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file where the directory should be: os.open says so
        pass
    while True:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if not _same_file(fd, path):  # taken back since we opened it: write to the new one
                continue
            new = os.fstat(fd).st_size == 0
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            if new:
                fsync_dir(path.parent)
            return
        finally:
            os.close(fd)  # releases the lock


def claim(path: Path) -> list[Path]:
    """Take the unsaved-runs file for this process: rename it under its lock to a name of
    this process's own. Returns that copy and the copies earlier takers left (dead processes,
    or this one); empty when there is nothing to take, or the directory cannot be written."""
    taken = [p for p in sorted(path.parent.glob(path.name + ".*.taking")) if not _owner_alive(p)]
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # none (the usual case), or unreadable: nothing to take
        return taken
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if _same_file(fd, path):
            mine = path.with_name(f"{path.name}.{os.getpid()}-{time.time_ns()}.taking")
            os.rename(path, mine)
            taken.append(mine)
    except OSError:  # a directory this process cannot write: leave it to one that can
        pass
    finally:
        os.close(fd)
    return taken


def read(path: Path) -> list[Trajectory]:
    """The runs in one copy of the file (the last line of an id wins; a torn line, whose
    appender died before its fsync returned, is skipped)."""
    runs: dict[tuple[str, str], Trajectory] = {}
    for _, line in iter_lines(path):
        try:  # written by flowmem from validated runs: no input limits to enforce
            run = Trajectory.model_validate_json(line)
        except ValidationError:
            continue
        runs[(run.namespace, run.id)] = run
    return list(runs.values())


def _owner_alive(copy: Path) -> bool:
    """Whether the process that took this copy is alive and not this one."""
    pid = copy.name.removesuffix(".taking").rsplit(".", 1)[-1].split("-", 1)[0]
    if not pid.isdigit() or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
