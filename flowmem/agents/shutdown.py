"""Storing every finished run when the process stops: at normal exit, and on SIGTERM.

A process supervisor or container runtime stops a process with SIGTERM, whose default action
ends it at once, without `atexit`. The first `WorkflowMemory` opened in the main thread
installs a SIGTERM handler that closes every open memory (each stores what its writer still
holds, within its `flush_timeout` bound), then does what the previous handler would have
done: calls it if the application set one, ignores the signal if it was ignored, else ends
the process by the signal, as before.
SIGINT needs nothing: it raises KeyboardInterrupt, and the exit that follows runs `atexit`.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import weakref
from types import FrameType
from typing import Any, Protocol

__all__ = ["track", "untrack"]


class _Closeable(Protocol):
    def close(self, *, from_signal: bool = False) -> None: ...


_open: weakref.WeakSet[Any] = weakref.WeakSet()
_previous: Any = None
_installed = False
_lock = threading.Lock()


def _close_all(*, from_signal: bool = False) -> None:
    for memory in list(_open):
        try:
            memory.close(from_signal=from_signal)
        except Exception as err:  # one memory's failure must not keep the others from closing
            logging.getLogger("flowmem.memory").error("flowmem: closing a memory failed: %s", err)


def _at_exit() -> None:
    """Store what every open memory holds, then let go of LanceDB's handles before the
    interpreter finalizes (`storage.base.release_all`)."""
    from flowmem.storage.base import release_all

    _close_all()
    release_all()


atexit.register(_at_exit)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # The handler runs in the main thread between two of its bytecodes, maybe inside a lock the
    # hooks hold (a run being handed to the writer): `close(from_signal=True)` stores from here.
    _close_all(from_signal=True)
    previous = _previous
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # the default: end the process by the signal, as before
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _install() -> None:
    """Install the handler once, from the main thread (Python allows no other)."""
    global _installed, _previous
    with _lock:
        if _installed or threading.current_thread() is not threading.main_thread():
            return
        _previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)
        _installed = True


def track(memory: _Closeable) -> None:
    """Close `memory` at exit and on SIGTERM unless it was closed before."""
    _open.add(memory)
    _install()


def untrack(memory: _Closeable) -> None:
    """Forget a closed memory."""
    _open.discard(memory)
