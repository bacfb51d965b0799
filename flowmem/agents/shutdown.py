"""Storing every finished run when the process stops: at normal exit, on SIGTERM and on Ctrl-C,
whichever thread the kernel hands the signal to.

A process supervisor or container runtime stops a process with SIGTERM, whose default action
ends it at once, without `atexit`. The first `WorkflowMemory` opened in the main thread
installs a SIGTERM handler that closes every open memory (each stores what its writer still
holds, within its `flush_timeout` bound), then does what the previous handler would have
done: calls it if the application set one, ignores the signal if it was ignored, else ends
the process by the signal, as before. Ctrl-C (SIGINT) raises KeyboardInterrupt, and the exit
that follows runs `atexit`, which closes them too.

Python runs a signal's handler in the main thread, when that thread next runs Python code. The
kernel hands a signal sent to the process to any thread that does not block it (the writer's,
LanceDB's, the application's), and a main thread asleep in `time.sleep`, a lock or a select is
not woken by a signal another thread took: the handler would wait for the sleep to end. So the
memory also keeps a `_Waker`: every signal with a Python handler writes its number to a socket
(`signal.set_wakeup_fd`) that a thread of ours reads; on SIGTERM or SIGINT it interrupts the
main thread's wait with a signal of its own (a real-time one no one handles: its handler does
nothing), so Python runs the pending handler at once — once: the handler itself is never
signalled twice. A wakeup fd that was already set (an asyncio loop's, for its signal handlers)
is not taken over: every byte is passed on to it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import weakref
from types import FrameType
from typing import Any, Protocol

__all__ = ["track", "untrack"]

WOKEN_BY = (signal.SIGTERM, signal.SIGINT)
"""The signals after which the main thread is woken: the two that stop a process."""


class _Closeable(Protocol):
    def close(self, *, from_signal: bool = False) -> None: ...
    def opening(self) -> bool: ...


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
    interpreter finalizes (`storage.base.release_all`; a process that never built a store has
    no handle and does not import it). A process that Ctrl-C ends while a memory's writer still
    opens its store ends by SIGINT all the same (`_end_as_interrupted`)."""
    interrupted = isinstance(getattr(sys, "last_value", None), KeyboardInterrupt)
    opening = any(memory.opening() for memory in list(_open))
    _close_all()
    if (base := sys.modules.get("flowmem.storage.base")) is not None:
        base.release_all()
    if interrupted and opening:
        _end_as_interrupted()


def _end_as_interrupted() -> None:
    """End the process by SIGINT, as Python ends one that an unhandled KeyboardInterrupt
    stops. Python forgets that interrupt when a C extension is first imported after it, as
    Arrow's and LanceDB's are when the writer opens the store during the exit: it would end
    with status 1. Logging and the standard streams are flushed first; what exit handlers
    remain, those registered before flowmem was imported, do not run."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


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


def _nothing(signum: int, frame: FrameType | None) -> None:
    """The handler of the waker's own signal: its only use is to interrupt a wait."""


def _free_signal() -> int | None:
    """A real-time signal that nothing handles (none installed a handler, from Python or
    from C, and the main thread does not block it), from the highest down; None if none is."""
    low, high = getattr(signal, "SIGRTMIN", 0), getattr(signal, "SIGRTMAX", -1)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    for signum in range(high, low - 1, -1):
        if signal.getsignal(signum) == signal.SIG_DFL and signum not in blocked:
            return signum
    return None


def _identity(fd: int) -> tuple[int, int] | None:
    """What `fd` is open on (device, inode), to tell it from a later file given the same
    number; None if it is not open."""
    try:
        stat = os.fstat(fd)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class _Waker:
    """Wakes the main thread when SIGTERM or SIGINT reaches any thread (see the module's
    docstring). Made and connected from the main thread; its thread lives as long as the
    process."""

    def __init__(self, nudge: int) -> None:
        self.nudge = nudge
        """The signal that interrupts the main thread's wait (`_free_signal`)."""
        self.main = threading.get_ident()  # made from the main thread
        self.reader, self.writer = socket.socketpair()
        self.writer.setblocking(False)  # what set_wakeup_fd requires: a full socket drops bytes
        self.chained: tuple[int, tuple[int, int]] | None = None
        """The wakeup fd that was set before ours (and what it was open on): passed every byte."""
        signal.signal(nudge, _nothing)
        threading.Thread(target=self._watch, name="flowmem-signals", daemon=True).start()

    def connect(self) -> None:
        """Make our socket the wakeup fd again (from the main thread), chaining the one set
        since (an asyncio loop sets its own when it adds a signal handler)."""
        ours = self.writer.fileno()
        previous = signal.set_wakeup_fd(ours, warn_on_full_buffer=False)
        if previous != ours:
            identity = _identity(previous) if previous >= 0 else None
            self.chained = (previous, identity) if identity is not None else None

    def disconnect(self) -> None:
        """In a forked child (its only thread, the main one): give back the wakeup fd this one
        took, and close our ends of the sockets."""
        with contextlib.suppress(ValueError, OSError):
            current = signal.set_wakeup_fd(-1)
            if current != self.writer.fileno():
                signal.set_wakeup_fd(current)  # not ours any more: left as it is
            elif self.chained is not None and _identity(self.chained[0]) == self.chained[1]:
                signal.set_wakeup_fd(self.chained[0])
        self.reader.close()
        self.writer.close()

    def _watch(self) -> None:
        # Signals sent to the process go to another thread than this one, which has nothing to run.
        signal.pthread_sigmask(signal.SIG_BLOCK, WOKEN_BY)
        while numbers := self.reader.recv(64):
            self._pass_on(bytes(n for n in numbers if n != self.nudge))
            if any(n in WOKEN_BY for n in numbers):
                with contextlib.suppress(OSError):  # the main thread has ended
                    signal.pthread_kill(self.main, self.nudge)

    def _pass_on(self, numbers: bytes) -> None:
        """Write `numbers` to the wakeup fd set before ours, as Python would have (a full one
        drops them); forget it once it is closed or another file has its number."""
        chained = self.chained
        if chained is None or not numbers:
            return
        fd, identity = chained
        if _identity(fd) != identity:
            self.chained = None
            return
        with contextlib.suppress(OSError):
            os.write(fd, numbers)


_waker: _Waker | None = None
_forks_watched = False


def _forget_after_fork() -> None:
    """A forked child has no waker thread: it makes its own when it opens a memory."""
    global _waker
    if _waker is not None:
        _waker.disconnect()
        _waker = None


def _make_waker() -> _Waker | None:
    """The waker, made now; None where no real-time signal is free (or the system has none)."""
    global _forks_watched
    if (nudge := _free_signal()) is None:
        return None
    if not _forks_watched:  # once: a hook cannot be removed
        os.register_at_fork(after_in_child=_forget_after_fork)
        _forks_watched = True
    return _Waker(nudge)


def _install() -> None:
    """Install the handler once and (re)connect the waker, from the main thread (Python allows
    no other)."""
    global _installed, _previous, _waker
    with _lock:
        if threading.current_thread() is not threading.main_thread():
            return
        if not _installed:
            _previous = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, _on_sigterm)
            _installed = True
        if _waker is None:
            _waker = _make_waker()
        if _waker is not None:
            _waker.connect()


def track(memory: _Closeable) -> None:
    """Close `memory` at exit and on SIGTERM unless it was closed before."""
    _open.add(memory)
    _install()


def untrack(memory: _Closeable) -> None:
    """Forget a closed memory."""
    _open.discard(memory)
