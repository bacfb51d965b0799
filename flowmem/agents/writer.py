"""The background writer of `WorkflowMemory`: stores finished runs in batches, never loses one."""

from __future__ import annotations

import logging
import threading
import time

from flowmem.agents.recording import Run
from flowmem.interchange import write_jsonl, write_spool_file
from flowmem.interchange.journal import Journal
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory
from flowmem.policy.scrub import scrub_trajectory
from flowmem.policy.usage import usage_from
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["Writer", "journal_run", "open_journal"]

log = logging.getLogger("flowmem.memory")


class Writer(threading.Thread):
    """Stores finished runs in batches; never loses one: on persistent failure, the runs go
    to a JSONL file next to the store that `flowmem ingest` takes back."""

    def __init__(self, store: Store, settings: Settings, *, journal: Journal | None = None) -> None:
        super().__init__(name="flowmem-writer", daemon=True)
        self.store, self.settings, self.journal = store, settings, journal
        self._cond = threading.Condition()
        self._queue: list[Run] = []
        self._pending = 0
        self._closing = False
        self._idle = threading.Event()  # clear while a batch taken from the queue is written
        self._idle.set()

    def submit(self, run: Run) -> None:
        with self._cond:
            if self._closing and not self.is_alive():
                raise RuntimeError("this WorkflowMemory is closed")
            self._queue.append(run)
            self._pending += 1
            if len(self._queue) >= self.settings.flush_batch:
                self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            while self._pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def drain(self, timeout: float = 60.0) -> None:
        """Store every queued run from the calling thread and close: for a signal handler,
        which may have interrupted that thread inside `submit` (holding this writer's lock,
        re-entrant). It waits only for the batch the writer thread is writing (up to
        `timeout`); holding the lock, it lets that thread take no other."""
        with self._cond:
            self._closing = True
            self._idle.wait(timeout)
            batch, self._queue = self._queue, []
            if batch:
                self._write(batch)
                self._pending -= len(batch)
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def run(self) -> None:
        while True:
            with self._cond:
                if not self._queue and not self._closing:
                    self._cond.wait(self.settings.flush_interval)
                batch = self._queue[: self.settings.flush_batch]
                del self._queue[: len(batch)]
                done = self._closing and not self._queue and not batch
                if batch:
                    self._idle.clear()
            if done:
                return
            if batch:
                try:
                    self._write(batch)
                finally:
                    self._idle.set()
                with self._cond:
                    self._pending -= len(batch)
                    self._cond.notify_all()

    def _write(self, batch: list[Run]) -> None:
        trajectories: list[Trajectory] = []
        for run in batch:
            try:
                trajectories.append(run.to_trajectory())
            except Exception:  # a bad record must not sink the batch
                log.exception("flowmem: run %s could not be turned into a trajectory", run.id)
        self.store_batch(trajectories)
        if self.journal is not None:  # stored, spooled or spilled: the journal may let go
            self.journal.done((run.namespace, run.id) for run in batch)

    def store_batch(self, trajectories: list[Trajectory]) -> None:
        """Store (or spool) trajectories, retrying; on persistent failure spill them to the
        unsaved-runs file. Returns once they are in one of those places."""
        for attempt in range(3):
            try:
                if self.settings.record_to == "spool":  # scrubbed before it touches the disk
                    write_spool_file(self.settings.spool_path, self._scrubbed(trajectories))
                else:
                    stored = store_trajectories(self.store, trajectories, self.settings.scrub)
                    if stored == len(trajectories):  # with duplicates, the learn flow recounts
                        self._count_outcomes(trajectories)
                return
            except Exception:
                log.exception("flowmem: storing %d runs failed (attempt %d)", len(trajectories), attempt + 1)
                time.sleep(0.2 * 2**attempt)
        self._spill(trajectories)

    def _count_outcomes(self, trajectories: list[Trajectory]) -> None:
        """Fold the new runs' outcomes into the served versions' stats now (best effort)."""
        by_namespace: dict[str, list[Trajectory]] = {}
        for t in trajectories:
            if t.workflows_used:
                by_namespace.setdefault(t.namespace, []).append(t)
        for namespace, runs in by_namespace.items():
            try:
                self.store.add_usage(usage_from(runs), namespace=namespace)
            except Exception:
                log.exception("flowmem: counting outcomes failed; the learn flow will count them")

    def _scrubbed(self, trajectories: list[Trajectory]) -> list[Trajectory]:
        kinds = self.settings.scrub
        return [scrub_trajectory(t, kinds) for t in trajectories] if kinds else trajectories

    def _spill(self, trajectories: list[Trajectory]) -> None:
        path = self.settings.quarantine_path.with_name(
            self.settings.quarantine_path.name.replace("quarantine", "unsaved")
        )
        write_jsonl(path, self._scrubbed(trajectories), append=True, durable=True)
        log.error("flowmem: %d runs written to %s; `flowmem ingest` it later", len(trajectories), path)


def open_journal(store: Store, settings: Settings) -> Journal:
    """Open this process's journal, first storing what killed processes left in theirs."""
    journal = Journal(settings.journal_path).open()
    replayer = Writer(store, settings)  # never started: its storing path, on this thread
    for lock, runs in journal.orphans():
        if runs:
            replayer.store_batch(runs)  # ids already stored are skipped
            log.warning("flowmem: %d runs replayed from the journal of a stopped process", len(runs))
        journal.forget(lock)
    return journal


def journal_run(journal: Journal, settings: Settings, run: Run) -> None:
    """Durable mode, on the agent's thread: the run, scrubbed, fsync'ed to the journal."""
    try:
        trajectory = run.to_trajectory()
    except Exception:  # the writer drops it too, and says so
        return
    journal.append(scrub_trajectory(trajectory, settings.scrub) if settings.scrub else trajectory)
