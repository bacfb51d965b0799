"""Work handed to a helper thread while the caller does its own, taken back when the helper has
not begun it by the time the caller needs it (pure: the standard library's threads).

A search of a large store makes two HNSW searches that do not depend on each other: the served
keys' (`ranking.Snapshot.ranked`) and the stored tasks' (`cover.Evidence.lookup`). faiss lets go
of the GIL while it searches, so on two cores they run at once. The caller never waits for the
helper to start: work it has not begun is run by the caller itself (`Pending.result`), so a
busy machine, whose helper waits for a core, costs at most what running it in turn costs.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["QUEUED_MAX", "Beside", "Pending", "ahead", "drain"]

T = TypeVar("T")

QUEUED_MAX = 4
"""Work waiting for the helper past which more is run by its callers in turn (a helper behind
many concurrent searches would only add the handoff to each)."""

_QUEUED, _TAKEN, _DONE = 0, 1, 2


class Pending(Generic[T]):
    """Work handed to a `Beside`, run once: by the helper if it begins it first, else by the
    caller of `result`."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._work: Callable[[], T] | None = work
        self._lock = threading.Lock()
        self._state = _QUEUED
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    def _take(self) -> bool:
        """Whether this call is the one that runs the work (nobody has begun it)."""
        with self._lock:
            if self._state != _QUEUED:
                return False
            self._state = _TAKEN
            return True

    def _run(self) -> None:
        work, self._work = self._work, None
        try:
            assert work is not None
            self._value = work()
        except BaseException as err:  # handed to the caller of `result`
            self._error = err
        finally:
            self._state = _DONE
            self._done.set()

    @property
    def begun(self) -> bool:
        """Whether the work has been begun (by the helper, or by a caller)."""
        return self._state != _QUEUED

    def result(self) -> T:
        """The work's value (or its exception, raised here): run here when the helper has not
        begun it, else waited for."""
        if self._take():
            self._run()
        else:
            self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def cancel(self) -> None:
        """Not wanted: dropped when nobody has begun it, else waited for (so that no work is
        left running in faiss when its caller has gone)."""
        if not self.leave():
            self._done.wait()

    def leave(self) -> bool:
        """Not wanted, and not waited for: dropped when nobody has begun it (True), else left
        to the helper to finish alone (False; `drain` waits for it at exit)."""
        if not self._take():
            return False
        self._work, self._state = None, _DONE
        self._done.set()
        return True


def ahead(work: Callable[[], T], name: str) -> Pending[T]:
    """`work` begun at once in a daemon thread of its own (named `name`), its caller collecting
    it with `Pending.result` (run there when the thread has not begun it yet) or dropping it with
    `cancel`: for work that reads (a store's rows) beside the caller's own reading. Not waited
    for at exit (`drain`): it never runs faiss."""
    pending: Pending[T] = Pending(work)

    def begin() -> None:
        if pending._take():
            pending._run()

    threading.Thread(target=begin, name=name, daemon=True).start()
    return pending


class Beside:
    """One helper thread, started with the first work handed to it (a daemon, named `name`).
    A process forked from one that had it starts its own."""

    def __init__(self, name: str = "flowmem-beside") -> None:
        self.name = name
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: deque[Pending[object]] = deque()
        self._thread: threading.Thread | None = None
        self.handed = 0
        """How much work was handed to the helper (some of it run by callers)."""
        self._running: Pending[object] | None = None

    def run(self, work: Callable[[], T]) -> Pending[T]:
        """`work` handed to the helper; its caller collects it with `Pending.result` (or drops
        it with `cancel` or `leave`)."""
        pending: Pending[T] = Pending(work)
        self._hand(pending)  # type: ignore[arg-type]
        return pending

    def later(self, work: Callable[[], object]) -> bool:
        """`work` handed to the helper with no caller to collect it (its value dropped, its
        error too): False when not handed (the helper's queue is full, or the process is
        exiting), and then not run."""
        return self._hand(Pending(work))

    def _hand(self, pending: Pending[object]) -> bool:
        """Queue `pending` for the helper (started with the first); False: not queued, its
        caller runs it (the queue is full, or the process is exiting)."""
        if os.getpid() != self._pid:  # a forked child: no helper runs here
            self._lock = threading.Lock()
            self._wake = threading.Condition(self._lock)
            self._queue, self._thread, self._pid = deque(), None, os.getpid()
        with self._lock:
            while self._queue and self._queue[0].begun:  # taken back by their callers
                self._queue.popleft()
            if len(self._queue) >= QUEUED_MAX or _closing.is_set():
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
                _register()
                _helpers.add(self)
            self._queue.append(pending)
            self.handed += 1
            self._wake.notify()
        return True

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    self._wake.wait()
                pending = self._queue.popleft()
                if _closing.is_set() or not pending._take():
                    continue  # taken back, or the process is exiting (its caller runs it)
                self._running = pending
            try:
                pending._run()
            finally:
                self._running = None


_closing = threading.Event()
_helpers: weakref.WeakSet[Beside] = weakref.WeakSet()


@functools.cache
def _register() -> None:
    """`drain` runs at exit: registered with the first helper, once."""
    atexit.register(drain)


def drain(timeout: float = 5.0) -> None:
    """At exit: no helper begins more work, and the work they are running is waited for (at
    most `timeout` seconds each), so that none is inside faiss when the interpreter finalizes
    (a daemon thread that comes back from C++ then aborts the process). Work a caller left
    (`Pending.leave`) is the only work a helper runs without its caller waiting."""
    _closing.set()
    for helper in list(_helpers):
        with helper._lock:  # a helper past this lock sees `_closing`, one inside it is running
            running = helper._running
        if running is not None:
            running._done.wait(timeout)
