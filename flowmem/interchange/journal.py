"""The durable hooks' journal: finished runs, fsync'ed to local JSONL files before `finish`
returns, until the background writer has stored them.

Each process writes its own segments, `<owner>.<seq>.jsonl`, in one directory and holds an
exclusive `flock` on `<owner>.lock` while it lives. Every time the writer reports a batch
stored a new segment begins, and a segment goes once every run in it is stored, so the
journal holds about what the writer has not stored yet. A process opening the journal
later finds the segments whose owner no longer holds its lock — a process that was killed —
and hands them back for replay; storing them again is harmless (stored ids are skipped).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from flowmem.interchange.jsonl import fsync_dir, iter_lines, write_jsonl
from flowmem.models import Trajectory

__all__ = ["Journal", "Key"]

Key = tuple[str, str]
"""(namespace, run id)."""


class Journal:
    """One process's journal in `directory`; `open` it, `append` runs, report them `done`."""

    def __init__(self, directory: Path, *, segment_bytes: int = 4 << 20) -> None:
        self.directory, self.segment_bytes = directory, segment_bytes
        self.owner = f"{os.getpid()}-{time.time_ns()}"
        self._lock = threading.RLock()  # re-entered by a SIGTERM handler (agents/shutdown.py)
        self._seq = 0
        self._keys: dict[int, set[Key]] = {}  # segment -> runs in it not yet stored
        self._where: dict[Key, set[int]] = {}  # run -> segments holding a line of it
        self._fd: int | None = None
        self._failed = 0  # appends that raised since `take_failures`
        self._failure = ""

    def open(self) -> Journal:
        """Create the directory and take this process's lock (released by the kernel on death)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.directory / f"{self.owner}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def _segment(self, seq: int) -> Path:
        return self.directory / f"{self.owner}.{seq}.jsonl"

    def append(self, trajectory: Trajectory) -> None:
        """Append one run and fsync it: when this returns, the run survives a kill -9."""
        key = (trajectory.namespace, trajectory.id)
        with self._lock:
            path = self._segment(self._seq)
            new = not path.exists()
            write_jsonl(path, [trajectory], append=True, durable=True)
            if new:  # the file's directory entry must be on disk too
                fsync_dir(self.directory)
            self._keys.setdefault(self._seq, set()).add(key)
            self._where.setdefault(key, set()).add(self._seq)
            if path.stat().st_size >= self.segment_bytes:
                self._seq += 1

    def done(self, keys: Iterable[Key]) -> None:
        """These runs are stored: delete the segments that hold nothing else, and start a new
        segment, so that one a writer's batch has emptied can go."""
        with self._lock:
            touched: set[int] = set()
            for key in keys:
                for seq in self._where.pop(key, ()):
                    self._keys[seq].discard(key)
                    touched.add(seq)
            for seq in touched:
                if not self._keys[seq]:
                    del self._keys[seq]
                    self._segment(seq).unlink(missing_ok=True)
            if self._segment(self._seq).exists():
                self._seq += 1

    def note_failure(self, why: str) -> None:
        """Count an append that failed (the caller went on without it), and the first reason."""
        with self._lock:
            self._failed += 1
            self._failure = self._failure or why

    def take_failures(self) -> tuple[int, str] | None:
        """The failed appends noted since the last call, and the first one's reason."""
        with self._lock:
            failed, why = self._failed, self._failure
            self._failed, self._failure = 0, ""
        return (failed, why) if failed else None

    @property
    def pending(self) -> int:
        """Runs journaled and not yet reported stored."""
        return len(self._where)

    def orphans(self) -> list[tuple[Path, list[Trajectory]]]:
        """Each dead owner's lock file and the runs its segments hold (the last line of a run
        wins; a torn last line, never acknowledged, is skipped). Call `forget` once stored."""
        found = []
        for lock in sorted(self.directory.glob("*.lock")):
            owner = lock.name.removesuffix(".lock")
            if owner == self.owner or not _dead(lock):
                continue
            runs: dict[Key, Trajectory] = {}
            for segment in sorted(self.directory.glob(f"{owner}.*.jsonl")):
                for _, line in iter_lines(segment):
                    try:  # the hook built it: no input limits, only a torn last line to skip
                        run = Trajectory.model_validate_json(line)
                    except ValidationError:
                        continue
                    runs[(run.namespace, run.id)] = run
            found.append((lock, list(runs.values())))
        return found

    def forget(self, lock: Path) -> None:
        """Delete a dead owner's segments and lock file (its runs are stored)."""
        owner = lock.name.removesuffix(".lock")
        for segment in self.directory.glob(f"{owner}.*.jsonl"):
            segment.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)

    def close(self) -> None:
        """Release the lock; delete this process's files when every run is stored (files that
        cannot be deleted stay: a later open finds their owner gone and replays them)."""
        with self._lock:
            if self._fd is None:
                return
            try:
                if not self._where:
                    for segment in self.directory.glob(f"{self.owner}.*.jsonl"):
                        segment.unlink(missing_ok=True)
                    (self.directory / f"{self.owner}.lock").unlink(missing_ok=True)
            except OSError:
                pass
            finally:
                os.close(self._fd)
                self._fd = None


def _dead(lock: Path) -> bool:
    """Whether nobody holds `lock` (its owner is gone: the kernel released its flock)."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # replaying twice is harmless: stored ids are skipped
    return True
