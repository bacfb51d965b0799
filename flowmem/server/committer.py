"""Group commit: trajectories that requests submit together are stored in one commit.

A LanceDB commit costs milliseconds and leaves a table version and a data file behind, so a
server that committed every request on its own would slow down with every write. Requests
hand their trajectories to one `GroupCommitter`; its thread takes everything queued (waiting
`linger` seconds for more, up to `max_records`), writes it once, and only then wakes each
request with the count of its own trajectories that were new (and, when the write tells,
those of its own that conflict with a stored version). If the write fails, every
request of that batch — and no other — gets the error. Every `compact_every` commits it
starts `compact` in a thread of its own (at most one at a time), so commits go on meanwhile;
when the last one is still running at its turn, the next starts at the first commit after it
ends, so the fragments left uncompacted stay about `compact_every` plus those of one
compaction's time (each of them costs the next appends ~2 µs, measured in LanceDB 0.40).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from flowmem.jobs.ingest import Conflict, Stored
from flowmem.models import Trajectory

__all__ = ["Committed", "GroupCommitter"]

log = logging.getLogger("flowmem.committer")


@dataclass
class Committed:
    """What one submission's trajectories became."""

    stored: int = 0
    """How many were new."""
    conflicts: dict[int, Conflict] = field(default_factory=dict)
    """Position in the submission -> conflict, for those not stored because their id is
    stored with other content."""


@dataclass
class _Request:
    trajectories: list[Trajectory]
    done: threading.Event = field(default_factory=threading.Event)
    result: Committed = field(default_factory=Committed)
    error: BaseException | None = None


class GroupCommitter:
    """Stores what concurrent callers submit, one write per batch, each caller told its own."""

    def __init__(
        self,
        write: Callable[[list[Trajectory]], Stored],
        *,
        linger: float = 0.002,
        max_records: int = 1_000,
        compact: Callable[[], None] | None = None,
        compact_every: int = 100,
        idle_exit: float = 5.0,
    ) -> None:
        """`write` stores a batch and tells what it stored (the keys that were new) and the
        conflicts by position in the batch (`jobs.ingest.store_trajectories`). The thread
        starts with the first submission and ends after `idle_exit` seconds without one."""
        self._write = write
        self.linger = linger
        self.max_records = max_records
        self._compact = compact
        self.compact_every = compact_every
        self.idle_exit = idle_exit
        self._queue: deque[_Request] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._compacting = threading.Lock()
        self._since_compaction = 0
        self.commits = 0
        """Batches written (successfully or not) since this committer was made."""
        self.requests = 0
        """Submissions those batches carried."""
        self.compactions = 0
        """Times `compact` ran."""

    def submit(self, trajectories: Sequence[Trajectory]) -> int:
        """Store trajectories with whatever else is being submitted; returns how many of
        these were new, once they are committed.

        Raises:
            Exception: whatever the write of this submission's batch raised.
        """
        return self.commit(trajectories).stored

    def commit(self, trajectories: Sequence[Trajectory]) -> Committed:
        """`submit`, telling also which of these conflict with a stored version.

        Raises:
            Exception: whatever the write of this submission's batch raised.
        """
        request = _Request(list(trajectories))
        if not request.trajectories:
            return request.result
        with self._cond:
            self._queue.append(request)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="flowmem-group-commit", daemon=True)
                self._thread.start()
            self._cond.notify()
        request.done.wait()
        if request.error is not None:
            raise request.error
        return request.result

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            self._commit(batch)
            self._since_compaction += 1
            if self._compact is None or self._since_compaction < self.compact_every:
                continue
            # One at a time; if one still runs, ask again at the next commit, not a round later.
            if self._compacting.acquire(blocking=False):
                self._since_compaction = 0
                threading.Thread(target=self._compaction, name="flowmem-compact", daemon=True).start()

    def _compaction(self) -> None:
        # Apart from the commits: a compaction (a LanceDB rewrite) and inserts commit side by
        # side, conflicts being resolved or retried by LanceDB and `retry_conflicts`.
        assert self._compact is not None
        try:
            self._compact()
            self.compactions += 1
        except Exception:  # the writes are committed; the next round compacts again
            log.exception("compaction after %d commits failed", self.commits)
        finally:
            self._compacting.release()

    def _take(self) -> list[_Request] | None:
        """The next batch: what is queued, plus what arrives within `linger`; None when
        nothing came for `idle_exit` seconds (the thread then ends)."""
        with self._cond:
            if not self._queue:
                self._cond.wait(timeout=self.idle_exit)
                if not self._queue:
                    self._thread = None
                    return None
            deadline = time.monotonic() + self.linger
            while sum(len(r.trajectories) for r in self._queue) < self.max_records:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(timeout=left)
            batch = [self._queue.popleft()]
            size = len(batch[0].trajectories)
            while self._queue and size + len(self._queue[0].trajectories) <= self.max_records:
                size += len(self._queue[0].trajectories)
                batch.append(self._queue.popleft())
            return batch

    def _commit(self, batch: list[_Request]) -> None:
        self.commits += 1
        self.requests += len(batch)
        try:
            written = self._write([t for r in batch for t in r.trajectories])
        except BaseException as err:  # the thread lives on: every request of the batch is told
            for request in batch:
                request.error = err
                request.done.set()
            return
        stored, conflicts = set(written.keys), written.conflicts
        # Of a key that two requests of the batch carry, the first one's copy was stored.
        start = 0
        for request in batch:
            mine = {(t.namespace, t.id) for t in request.trajectories} & stored
            request.result.stored = len(mine)
            stored -= mine
            end = start + len(request.trajectories)
            request.result.conflicts = {i - start: c for i, c in conflicts.items() if start <= i < end}
            start = end
        for request in batch:
            request.done.set()
