"""Signals given to one thread of a child process, and waiting until its main thread sleeps:
what the shutdown and serve tests need to give a signal to a thread other than the main one
while the main one waits (`tgkill`, /proc's wchan)."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Collection
from pathlib import Path

import pytest

from tests.processes import READY_LIMIT

__all__ = ["IN_LOCK", "IN_POLL", "IN_SLEEP", "needs_tgkill", "tgkill", "wait_asleep", "wchan_shown"]

IN_SLEEP = frozenset({"hrtimer_nanosleep", "do_nanosleep"})
"""Where a thread in `time.sleep` waits (kernel function names, as /proc's wchan gives them;
they vary across kernel versions)."""
IN_LOCK = frozenset({"futex_wait_queue_me", "futex_wait_queue", "futex_do_wait", "futex_wait"})
"""Where a thread waiting for a lock waits."""
IN_POLL = frozenset({"do_epoll_wait", "ep_poll"})
"""Where an event loop's select waits."""

_tgkill = getattr(ctypes.CDLL(None, use_errno=True), "tgkill", None)


def tgkill(pid: int, tid: int, signum: int) -> None:
    """Give `signum` to thread `tid` of process `pid` (as the kernel may give a process's signal
    to any of its threads)."""
    assert _tgkill is not None
    assert _tgkill(pid, tid, signum) == 0, os.strerror(ctypes.get_errno())


def wchan_shown() -> bool:
    """Whether this kernel tells where a thread sleeps (/proc's wchan): a thread of ours, asleep."""
    sleeper = threading.Thread(target=time.sleep, args=(0.5,), daemon=True)
    sleeper.start()
    wchan = Path(f"/proc/self/task/{sleeper.native_id}/wchan")
    deadline = time.monotonic() + 0.4
    while time.monotonic() < deadline:
        if wchan.read_text() in IN_SLEEP:
            return True
        time.sleep(0.01)
    return False


needs_tgkill = pytest.mark.skipif(
    _tgkill is None or not wchan_shown(), reason="needs the C library's tgkill and /proc's wchan"
)


def wait_asleep(pid: int, places: Collection[str]) -> None:
    """Wait until the main thread of `pid` sleeps in one of `places`, unchanged for 0.2 s (not a
    moment's wait between two steps). A thread that runs shows no wchan ("0"): a signal then
    would be handled at its next step, woken or not."""
    wchan = Path(f"/proc/{pid}/task/{pid}/wchan")
    since, deadline = None, time.monotonic() + READY_LIMIT
    while time.monotonic() < deadline:
        now = time.monotonic()
        if wchan.read_text() not in places:
            since = None
        elif since is None:
            since = now
        elif now - since >= 0.2:
            return
        time.sleep(0.01)
    raise AssertionError(f"{pid}'s main thread did not wait in {sorted(places)}: {wchan.read_text()}")
