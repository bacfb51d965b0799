"""The background writer of `WorkflowMemory`: stores finished runs in batches, never loses one
it can keep anywhere, and never makes the agent wait longer than `flush_timeout`.

A batch the store refuses (after retries) goes to the unsaved-runs file
(`flowmem.interchange.spill`), which the next memory that opens takes back. A batch that
cannot be written there either is counted, not raised: the writer thread never dies with runs
in its hands. `close` reports what was not stored, once, in one line per outcome.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (see `Writer`: lancedb imports it, maybe at exit)
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flowmem.agents.recording import Run
from flowmem.interchange import spill, write_spool_file
from flowmem.interchange.journal import Journal
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory
from flowmem.policy.scrub import scrub_trajectory
from flowmem.policy.usage import usage_from
from flowmem.settings import Settings

if TYPE_CHECKING:  # built on the writer's thread (`StoreSlot`): the agent's imports none of it
    from flowmem.storage import Store

__all__ = ["StoreSlot", "Writer", "journal_run", "open_journal", "take_back_spill"]

log = logging.getLogger("flowmem.memory")

OPEN_LIMIT = 60.0
"""Seconds `flush` and `close` wait at most for the writer to open the store before their own
`flush_timeout`: a bound for a store that never opens, not a budget (LanceDB's import and the
connection take 1–2 s on an idle 2-core machine, several times that on a loaded one). Past it
they go on as with a store that does not answer: `close` spills what the writer holds."""

ATTEMPTS = 3
"""Tries to store a batch before it is spilled (0.2 s, then 0.4 s apart)."""


def reason(err: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message, without
    the source location Lance appends."""
    if isinstance(err, OSError) and err.errno is not None and err.strerror:
        return f"[Errno {err.errno}] {err.strerror}"
    lines = str(err).strip().splitlines()
    text = f"{type(err).__name__}: {_RUST_LOCATION.sub('', lines[0])}" if lines else type(err).__name__
    return text if len(text) <= 200 else text[:199] + "…"


_RUST_LOCATION = re.compile(r",? /\S+\.rs:\d+:\d+")


class StoreSlot:
    """A store built once, on first use, by whichever thread asks first.

    A memory's writer asks first, on its own thread (`Writer.run`): building a store imports
    the store's modules and its embedder's (numpy among them), which the agent's thread then
    never imports; a search that comes before the writer has built it waits for the build. A
    build that failed raises its error again to every later asker (the writes say why and
    spill their runs)."""

    def __init__(self, build: Callable[[], Store]) -> None:
        self._build = build
        self._store: Store | None = None
        self._error: Exception | None = None
        self._lock = threading.Lock()

    @classmethod
    def holding(cls, store: Store) -> StoreSlot:
        """A slot with a store already built."""
        slot = cls(lambda: store)
        slot._store = store
        return slot

    def get(self) -> Store:
        """The store, built now if no thread has built it yet.

        Raises:
            Exception: whatever building it raised, this time and every later one.
        """
        if (store := self._store) is not None:
            return store
        with self._lock:
            if self._store is None:
                if self._error is not None:
                    raise self._error
                try:
                    self._store = self._build()
                except Exception as err:
                    self._error = err
                    raise
            return self._store


@dataclass
class Tally:
    """What a writer could not store, for the report at close."""

    spilled: int = 0
    """Runs written to the unsaved-runs file."""
    store_error: str = ""
    """Why the first of them was not stored."""
    lost: int = 0
    """Runs that could be written nowhere."""
    lost_error: str = ""
    """Why the first of them was not stored nor spilled."""
    retried: int = 0
    """Batches stored only after a failed attempt."""
    retry_error: str = ""
    """Why the first of those attempts failed."""


class Writer(threading.Thread):
    """Stores finished runs in batches from a daemon thread; every wait on it is bounded.

    Started when its memory opens, the thread first builds the store (`StoreSlot`) and opens
    it (`Store.prepare`: it imports LanceDB and Arrow, connects, creates the trajectories
    table) and takes back what earlier memories spilled, so the agent's thread imports none
    of that; `flush` and `close` wait for that too, up to `OPEN_LIMIT` (a process that exits
    at once still stores its runs). A run that arrives meanwhile waits in the queue. At
    interpreter exit Python refuses a module that registers a threading exit hook, as
    `concurrent.futures.thread` does when `lancedb` imports it: this module imports it first,
    so the import can finish there.
    """

    def __init__(
        self, store: Store | StoreSlot, settings: Settings, *, journal: Journal | None = None
    ) -> None:
        super().__init__(name="flowmem-writer", daemon=True)
        self.slot = store if isinstance(store, StoreSlot) else StoreSlot.holding(store)
        """The store it writes to, built on this thread when it starts."""
        self.settings, self.journal = settings, journal
        self.spill_path = spill.spill_path(settings)
        self.tally = Tally()
        self._tally_lock = threading.Lock()
        self._cond = threading.Condition()
        self._queue: list[Run] = []
        self._inflight: list[Run] = []  # the batch being written
        self._pending = 0
        self._closing = False
        self._idle = threading.Event()  # clear while a batch taken from the queue is written
        self._idle.set()
        self._opened = threading.Event()  # the store opened (or failed to), the spill taken back
        self._asked = False  # a flush came: no gathering left to do

    def submit(self, run: Run) -> None:
        with self._cond:
            if self._closing and not self.is_alive():
                raise RuntimeError("this WorkflowMemory is closed")
            self._queue.append(run)
            self._pending += 1
            if len(self._queue) >= self.settings.flush_batch:
                self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until every submitted run is stored, spilled or counted lost; False if
        `timeout` seconds passed first. The time the store takes to open (what opening the
        memory waited for before it opened the store in this thread) comes first, apart, up
        to `OPEN_LIMIT`."""
        if self.is_alive():
            self._opened.wait(max(timeout, OPEN_LIMIT))
        deadline = time.monotonic() + timeout
        with self._cond:
            self._asked = True
            self._cond.notify_all()
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout: float) -> None:
        """Flush (up to `timeout`), stop the thread and report. If the writer is still busy
        then — a store that does not answer — spill what it holds from a helper thread (up
        to `timeout` again) and return without it."""
        flushed = self.flush(timeout)
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            held: list[Run] = []
            if not flushed:  # take the queue; the stuck batch is spilled too (a copy: harmless)
                queued, self._queue = self._queue, []
                self._pending -= len(queued)
                held = self._inflight + queued
        if held:
            self._give_up(held, _no_answer(timeout), timeout)
        self.join(0 if held else timeout)
        self.report()

    def drain(self, timeout: float) -> None:
        """Store every queued run from the calling thread and close: for a signal handler,
        which may have interrupted that thread inside `submit` (holding this writer's lock,
        re-entrant). It waits up to `timeout` for the batch the writer thread is writing, and
        lets that thread take no other; the runs are built here (this thread may hold their
        locks) and stored by a helper thread, or spilled past `timeout`."""
        if self.is_alive():  # bounded here: this thread may hold a lock the opening needs
            self._opened.wait(timeout)
        deadline = time.monotonic() + timeout
        with self._cond:
            self._closing = True
            finished = self._idle.wait(max(deadline - time.monotonic(), 0.0))
            batch, self._queue = self._queue, []
            self._pending -= len(batch)
            if not finished:
                batch = self._inflight + batch
            if batch:
                trajectories = self._trajectories(batch)
                kept = _bounded(lambda: self.store_batch(trajectories), deadline - time.monotonic())
                if kept is None:
                    kept = self._spill_bounded(trajectories, _no_answer(timeout), timeout)
                if kept:
                    self._journal_done(batch)
            self._cond.notify_all()
        self.report()

    def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def start(self) -> None:
        self._idle.clear()  # opening the store is this thread's first batch (`drain` waits for it)
        super().start()

    @property
    def store(self) -> Store:
        """The store it writes to (built by the first thread that asks: `StoreSlot`)."""
        return self.slot.get()

    def _open(self) -> None:
        """Build and open the store and take back the spill file, on this thread (never
        raises: a store that cannot be built or opened fails the writes, which say why)."""
        try:
            store = self.store
        except Exception:
            log.debug("flowmem: building the store failed; the writes will say why", exc_info=True)
            return
        try:
            if self.settings.record_to == "store":
                store.prepare()
        except Exception:
            log.debug("flowmem: opening the store failed; the writes will say why", exc_info=True)
        take_back_spill(store, self.settings)

    @property
    def opened(self) -> bool:
        """Whether this thread has opened the store (or failed to) and taken back the spill."""
        return self._opened.is_set()

    def _first_wait(self, started: float) -> None:
        """What is left of the first `flush_interval` once the store is open: the runs that
        came meanwhile are gathered as if it had opened at once."""
        with self._cond:
            left = self.settings.flush_interval - (time.monotonic() - started)
            hurry = self._asked or self._closing or len(self._queue) >= self.settings.flush_batch
            if left > 0 and not hurry:
                self._cond.wait(left)

    def run(self) -> None:
        started = time.monotonic()
        try:
            self._open()
        finally:
            self._opened.set()
            self._idle.set()
        self._first_wait(started)
        while True:
            with self._cond:
                if not self._queue and not self._closing:
                    self._cond.wait(self.settings.flush_interval)
                batch = self._queue[: self.settings.flush_batch]
                del self._queue[: len(batch)]
                done = self._closing and not self._queue and not batch
                if batch:
                    self._inflight = batch
                    self._idle.clear()
            if done:
                return
            if batch:
                try:
                    self._write(batch)
                except Exception as err:  # never die with runs in hand: count them instead
                    log.debug("flowmem: writing a batch failed", exc_info=True)
                    self._count_lost(len(batch), f"writing them failed ({reason(err)})")
                finally:
                    self._idle.set()  # first: `drain` may hold the lock while it waits for this
                    with self._cond:
                        self._inflight = []
                        self._pending -= len(batch)
                        self._cond.notify_all()

    def _trajectories(self, batch: list[Run]) -> list[Trajectory]:
        trajectories: list[Trajectory] = []
        for run in batch:
            try:
                trajectories.append(run.to_trajectory())
            except Exception:  # a bad record must not sink the batch
                log.exception("flowmem: run %s could not be turned into a trajectory", run.id)
        return trajectories

    def _write(self, batch: list[Run]) -> None:
        if self.store_batch(self._trajectories(batch)):
            self._journal_done(batch)

    def _journal_done(self, batch: list[Run]) -> None:
        """Stored or spilled: the journal may let go (a lost run it holds stays, for replay)."""
        if self.journal is None:
            return
        try:
            self.journal.done((run.namespace, run.id) for run in batch)
        except OSError:  # its files stay; the next open replays them, stored ids are skipped
            log.debug("flowmem: the journal could not let go of stored runs", exc_info=True)

    def store_once(self, trajectories: list[Trajectory]) -> None:
        """Store (or spool) trajectories once; raises what the store raised."""
        if self.settings.record_to == "spool":  # scrubbed before it touches the disk
            write_spool_file(self.settings.spool_path, self._scrubbed(trajectories))
            return
        stored = store_trajectories(self.store, trajectories, self.settings.scrub).count
        if stored == len(trajectories):  # with duplicates, the learn flow recounts
            self._count_outcomes(trajectories)

    def store_batch(self, trajectories: list[Trajectory]) -> bool:
        """Store (or spool) trajectories, retrying; on persistent failure spill them to the
        unsaved-runs file. True once they are in one of those places; False (counted for the
        report) if they could be written nowhere. Never raises."""
        failure = ""
        for attempt in range(ATTEMPTS):
            try:
                self.store_once(trajectories)
            except Exception as err:
                n = len(trajectories)
                log.debug("flowmem: storing %d runs failed (attempt %d)", n, attempt + 1, exc_info=True)
                failure = reason(err)
            else:
                if attempt:
                    with self._tally_lock:
                        self.tally.retried += 1
                        self.tally.retry_error = self.tally.retry_error or failure
                return True
            if attempt + 1 < ATTEMPTS:
                time.sleep(0.2 * 2**attempt)
        return self._spill(trajectories, f"the store refused them ({failure})")

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

    def _spill(self, trajectories: list[Trajectory], store_error: str) -> bool:
        if not trajectories:
            return True
        try:
            spill.append(self.spill_path, self._scrubbed(trajectories))
        except Exception as err:
            log.debug("flowmem: spilling %d runs failed", len(trajectories), exc_info=True)
            why = f"{store_error}, and the spill file {self.spill_path} is not writable ({reason(err)})"
            self._count_lost(len(trajectories), why)
            return False
        with self._tally_lock:
            self.tally.spilled += len(trajectories)
            self.tally.store_error = self.tally.store_error or store_error
        return True

    def _spill_bounded(self, trajectories: list[Trajectory], store_error: str, timeout: float) -> bool:
        kept = _bounded(lambda: self._spill(trajectories, store_error), timeout)
        if kept is None:
            why = f"{store_error}, and the spill file {self.spill_path} took longer than {timeout:g} s"
            self._count_lost(len(trajectories), why)
        return bool(kept)

    def _give_up(self, runs: list[Run], store_error: str, timeout: float) -> None:
        if self._spill_bounded(self._trajectories(runs), store_error, timeout):
            self._journal_done(runs)

    def _count_lost(self, n: int, why: str) -> None:
        with self._tally_lock:
            self.tally.lost += n
            self.tally.lost_error = self.tally.lost_error or why

    def report(self) -> None:
        """Say once, one line each, what was not stored: runs lost (and why), runs spilled
        (and where they wait), batches that needed retries, runs the journal could not hold."""
        with self._tally_lock:
            tally, self.tally = self.tally, Tally()
        target = self.settings.spool_path if self.settings.record_to == "spool" else self.settings.db
        if tally.lost:
            log.error("flowmem: %s not saved, meant for %s: %s", _runs(tally.lost), target, tally.lost_error)
        if tally.spilled:
            log.warning(
                "flowmem: %s not stored in %s: %s; kept in %s for the next WorkflowMemory "
                "that can write there to take back",
                _runs(tally.spilled),
                target,
                tally.store_error,
                self.spill_path,
            )
        if tally.retried:
            log.warning(
                "flowmem: storing took more than one attempt %d time%s (first failure: %s)",
                tally.retried,
                "" if tally.retried == 1 else "s",
                tally.retry_error,
            )
        if self.journal is not None and (failed := self.journal.take_failures()):
            count, why = failed
            log.warning(
                "flowmem: %s not journaled in %s (%s): durable only once stored",
                _runs(count, "finished run"),
                self.journal.directory,
                why,
            )


def _runs(n: int, noun: str = "run") -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _no_answer(timeout: float) -> str:
    return f"the store did not answer within {timeout:g} s (FLOWMEM_FLUSH_TIMEOUT)"


def _bounded(fn: Callable[[], bool], timeout: float) -> bool | None:
    """`fn()` on a daemon thread: its result, or None if it has not returned within `timeout`."""
    result: list[bool] = []
    helper = threading.Thread(target=lambda: result.append(fn()), name="flowmem-writer-helper", daemon=True)
    helper.start()
    helper.join(max(timeout, 0.0))
    return result[0] if result else None


def take_back_spill(store: Store, settings: Settings) -> int:
    """Store what earlier memories spilled to the unsaved-runs file; how many runs. A copy
    this process cannot store stays for the next one (never raises)."""
    replayer = Writer(store, settings)  # never started: its storing path, on this thread
    taken = 0
    for copy in spill.claim(replayer.spill_path):
        try:
            runs = spill.read(copy)
            try:
                if runs:
                    replayer.store_once(runs)  # ids already stored are skipped
            except Exception:  # not this process either: back into the file, for the next one
                log.debug("flowmem: taking back %s failed", copy, exc_info=True)
                spill.append(replayer.spill_path, runs)
                runs = []
            copy.unlink()
        except OSError:  # the copy stays; the next process takes it
            log.debug("flowmem: putting back %s failed", copy, exc_info=True)
            continue
        taken += len(runs)
    if taken:
        log.info("flowmem: %d runs taken back from %s", taken, replayer.spill_path)
    return taken


def open_journal(store: Store | StoreSlot, settings: Settings) -> Journal:
    """Open this process's journal, first storing what killed processes left in theirs (the
    store is built for them only if there are any)."""
    journal = Journal(settings.journal_path).open()
    replayer = Writer(store, settings)  # never started: its storing path, on this thread
    for lock, runs in journal.orphans():
        if runs and not replayer.store_batch(runs):  # ids already stored are skipped
            continue  # kept nowhere else: its segments stay for a later open
        if runs:
            log.warning("flowmem: %d runs replayed from the journal of a stopped process", len(runs))
        journal.forget(lock)
    replayer.report()
    return journal


def journal_run(journal: Journal, settings: Settings, run: Run) -> None:
    """Durable mode, on the agent's thread: the run, scrubbed, fsync'ed to the journal. A
    journal that cannot be written is counted (reported at close), never raised."""
    try:
        trajectory = run.to_trajectory()
    except Exception:  # the writer drops it too, and says so
        return
    try:
        journal.append(scrub_trajectory(trajectory, settings.scrub) if settings.scrub else trajectory)
    except OSError as err:
        journal.note_failure(reason(err))
