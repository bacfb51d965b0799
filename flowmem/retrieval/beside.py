"""Work handed to a helper thread while the caller does its own, taken back when the helper has
not begun it by the time the caller needs it (pure: the standard library's threads).

A search of a large store makes two HNSW searches that do not depend on each other: the served
keys' (`ranking.Snapshot.ranked`) and the stored tasks' (`cover.Evidence.lookup`). faiss lets go
of the GIL while it searches, so on two cores they run at once. The caller never waits for the
helper to start: work it has not begun is run by the caller itself (`Pending.result`), so a
busy machine, whose helper waits for a core, costs at most what running it in turn costs.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["QUEUED_MAX", "Beside", "Pending"]

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
        if self._take():
            self._work, self._state = None, _DONE
            self._done.set()
        else:
            self._done.wait()


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

    def run(self, work: Callable[[], T]) -> Pending[T]:
        """`work` handed to the helper; its caller collects it with `Pending.result` (or drops
        it with `cancel`)."""
        pending: Pending[T] = Pending(work)
        if os.getpid() != self._pid:  # a forked child: no helper runs here
            self._lock = threading.Lock()
            self._wake = threading.Condition(self._lock)
            self._queue, self._thread, self._pid = deque(), None, os.getpid()
        with self._lock:
            while self._queue and self._queue[0].begun:  # taken back by their callers
                self._queue.popleft()
            if len(self._queue) >= QUEUED_MAX:
                return pending  # the caller runs it
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            self._queue.append(pending)  # type: ignore[arg-type]
            self.handed += 1
            self._wake.notify()
        return pending

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._queue:
                    self._wake.wait()
                pending = self._queue.popleft()
            if pending._take():
                pending._run()
