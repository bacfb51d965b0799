"""`flowmem serve` and signals: the first SIGTERM or Ctrl-C stops it cleanly; a second one while
it stops ends it at once (a supervisor's or an operator's way out of a stop that hangs).

The real command runs in a child process with its real signal handling; only what would talk to
a Prefect server is replaced: the local server is a plain HTTP server answering its health
check, the runner waits instead of polling, and the pause is a print (that can be made to hang,
as against a server that no longer answers).
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.processes import READY_LIMIT
from tests.threads import IN_POLL, IN_SLEEP, needs_tgkill, tgkill, wait_asleep

STUCK_SECONDS = 3600
"""How long the stuck stop of SERVE lasts (its `time.sleep(3600)`)."""

SERVE = textwrap.dedent(
    """
    import asyncio, signal, sys, time, uuid
    from pathlib import Path
    from flowmem.flows import serve as served
    from flowmem.cli import main

    root, hang = Path(sys.argv[1]), sys.argv[2]  # hang: "runner", "pause" or "none"
    (root / "api").mkdir(parents=True)
    (root / "api" / "health").write_text("ok")  # what `local_server` polls: /api/health

    def server_command(port):
        http = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
        return [*http, "--directory", str(root)]

    class Runner(served._Runner):
        def add_deployment(self, deployment):
            return uuid.uuid4()

        async def start(self, run_once=False, webserver=None):
            signal.signal(signal.SIGTERM, self.handle_sigterm)  # as Prefect's Runner.start does
            print("running", flush=True)
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                print("runner stopping", flush=True)
                if hang == "runner":  # a flow run that will not end
                    time.sleep(3600)
                raise

    def pause(ids):
        print(f"pausing {len(ids)}", flush=True)
        if hang == "pause":  # a server that no longer answers
            time.sleep(3600)
        print("paused", flush=True)

    served._server_command, served._Runner, served._pause = server_command, Runner, pause
    sys.argv = ["flowmem", "serve", "--only", "collect"]
    main()
    """
)


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")  # a zombie has ended: nothing may be left to reap it here


class Serving:
    """The serving child, its stdout read line by line by a thread: waiting for a line that
    never comes fails at its bound instead of blocking the test in a read."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # the end of its output

    def read_until(self, line: str, *, timeout: float) -> list[str]:
        """The lines up to `line`, which must come within `timeout` seconds."""
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                got = self.lines.get(timeout=left)
            except queue.Empty:
                break
            assert got is not None, f"the child ended: {seen} {self._stderr()}"
            seen.append(got)
            if got == line:
                return seen
        raise AssertionError(f"no line {line!r} in {timeout:.0f} s: {seen}")

    def finish(self, timeout: float) -> tuple[str, str]:
        """Its exit within `timeout` seconds (killed otherwise): the rest of stdout, and stderr."""
        try:
            self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:  # its local server too: nothing outlives a failed test
                for pid in _children(self.process.pid):
                    os.kill(pid, signal.SIGKILL)
                self.process.kill()
                self.process.wait()
        self.reader.join()
        rest = list(iter(self.lines.get_nowait, None))
        err = self._stderr()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()
        return "".join(f"{line}\n" for line in rest), err

    def _stderr(self) -> str:
        return self.process.stderr.read() if self.process.stderr and self.process.poll() is not None else ""


def _start(tmp_path: Path, hang: str) -> tuple[Serving, int]:
    """The serving child, once its runner runs, and the pid of its local server."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect"), "FLOWMEM_DB": str(tmp_path / "db")}
    command = [sys.executable, "-c", SERVE, str(tmp_path / "root"), hang]
    child = Serving(
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    )
    child.read_until("running", timeout=READY_LIMIT)
    servers = _children(child.process.pid)
    assert len(servers) == 1 and _alive(servers[0])
    return child, servers[0]


@pytest.mark.parametrize("first", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_first_signal_stops_serve_cleanly(tmp_path: Path, first: signal.Signals) -> None:
    child, server = _start(tmp_path, "none")
    child.process.send_signal(first)
    out, err = child.finish(timeout=READY_LIMIT)
    assert child.process.returncode == 0, err
    assert out.splitlines() == ["runner stopping", "pausing 1", "paused", "flowmem serve stopped"]
    assert err == ""  # no traceback, no line
    assert not _alive(server)


@pytest.mark.parametrize(
    ("hang", "second", "doing"),
    [
        ("runner", signal.SIGTERM, "stopping the runner (the served deployments are not paused)"),
        ("runner", signal.SIGINT, "stopping the runner (the served deployments are not paused)"),
        ("pause", signal.SIGTERM, "pausing the served deployments (they may stay active)"),
        ("pause", signal.SIGINT, "pausing the served deployments (they may stay active)"),
    ],
    ids=["runner-SIGTERM", "runner-SIGINT", "pause-SIGTERM", "pause-SIGINT"],
)
def test_a_second_signal_while_stopping_ends_serve_at_once(
    tmp_path: Path, hang: str, second: signal.Signals, doing: str
) -> None:
    child, server = _start(tmp_path, hang)
    child.process.send_signal(signal.SIGTERM)
    child.read_until("runner stopping" if hang == "runner" else "pausing 1", timeout=READY_LIMIT)
    time.sleep(0.2)  # the stop is stuck now; without a way out it would stay so for an hour
    child.process.send_signal(second)
    # Ends at once, not after the hour the stuck stop lasts (a bound, not a budget: about 0.1 s
    # on idle cores; a loaded machine only makes it longer).
    out, err = child.finish(timeout=STUCK_SECONDS / 6)
    assert child.process.returncode == 128 + second
    assert err.splitlines() == [f"flowmem serve: forced to stop by a second {second.name} while {doing}"]
    assert "flowmem serve stopped" not in out and "paused" not in out.splitlines()
    deadline = time.monotonic() + STUCK_SECONDS / 6  # killed, not left running without its parent
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server)


# The kernel hands a signal sent to a process to any of its threads that does not block it;
# Python runs the handler in the main thread only when that thread next runs Python code.
# `tgkill` gives it to one thread of our choice, as the kernel may.


def _to_another_thread(pid: int, signum: signal.Signals) -> None:
    """Send `signum` to a thread of `pid` other than its main one (one that does not block it)."""
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        status = dict(line.split(":", 1) for line in (task / "status").read_text().splitlines())
        if int(task.name) != pid and not int(status["SigBlk"], 16) & (1 << (signum - 1)):
            tgkill(pid, int(task.name), signum)
            return
    raise AssertionError(f"no thread of {pid} but the main one takes {signum.name}")


ASLEEP_IN = {"select": IN_POLL, "sleep": IN_SLEEP}
"""Where the main thread waits: in the event loop's select, or in `time.sleep` (tests/threads.py)."""

PROMPT = 10.0
"""Seconds from a signal that another thread received to the stop it begins: a bound (it takes
milliseconds), short beside the hour the runner's loop would otherwise sleep."""


@needs_tgkill
def test_a_signal_that_another_thread_receives_stops_serve_as_promptly(tmp_path: Path) -> None:
    child, server = _start(tmp_path, "none")
    wait_asleep(child.process.pid, ASLEEP_IN["select"])  # the runner waits: nothing else wakes its loop
    _to_another_thread(child.process.pid, signal.SIGTERM)
    try:
        child.read_until("runner stopping", timeout=PROMPT)  # without a wakeup: the runner's hour
    except AssertionError:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.finish(timeout=0)  # killed, with its local server
        raise
    out, err = child.finish(timeout=READY_LIMIT)
    assert child.process.returncode == 0, err
    assert out.splitlines() == ["pausing 1", "paused", "flowmem serve stopped"]
    assert not _alive(server)


@needs_tgkill
@pytest.mark.parametrize("hang", ["runner", "pause"])
def test_a_second_signal_that_another_thread_receives_ends_a_stuck_stop_at_once(
    tmp_path: Path, hang: str
) -> None:
    child, server = _start(tmp_path, hang)
    child.process.send_signal(signal.SIGTERM)
    child.read_until("runner stopping" if hang == "runner" else "pausing 1", timeout=READY_LIMIT)
    wait_asleep(child.process.pid, ASLEEP_IN["sleep"])  # stuck: time.sleep in the main thread
    _to_another_thread(child.process.pid, signal.SIGINT)
    out, err = child.finish(timeout=STUCK_SECONDS / 6)
    assert child.process.returncode == 128 + signal.SIGINT
    assert len(err.splitlines()) == 1 and "forced to stop by a second SIGINT" in err
    deadline = time.monotonic() + STUCK_SECONDS / 6
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server)
