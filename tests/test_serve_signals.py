"""`flowmem serve` and signals: the first SIGTERM or Ctrl-C stops it cleanly; a second one while
it stops ends it at once (a supervisor's or an operator's way out of a stop that hangs).

The real command runs in a child process with its real signal handling; only what would talk to
a Prefect server is replaced: the local server is a plain HTTP server answering its health
check, the runner waits instead of polling, and the pause is a print (that can be made to hang,
as against a server that no longer answers).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.processes import READY_LIMIT

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


def _start(tmp_path: Path, hang: str) -> tuple[subprocess.Popen[str], int]:
    """The serving child, once its runner runs, and the pid of its local server."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect"), "FLOWMEM_DB": str(tmp_path / "db")}
    command = [sys.executable, "-c", SERVE, str(tmp_path / "root"), hang]
    child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _read_until(child, "running", timeout=READY_LIMIT)
    servers = _children(child.pid)
    assert len(servers) == 1 and _alive(servers[0])
    return child, servers[0]


def _read_until(child: subprocess.Popen[str], line: str, *, timeout: float) -> list[str]:
    assert child.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = child.stdout.readline()
        assert got, f"the child ended: {seen} {child.stderr.read() if child.stderr else ''}"
        seen.append(got.rstrip("\n"))
        if seen[-1] == line:
            return seen
    raise AssertionError(f"no line {line!r}: {seen}")


def _finish(child: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    try:
        return child.communicate(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("first", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_first_signal_stops_serve_cleanly(tmp_path: Path, first: signal.Signals) -> None:
    child, server = _start(tmp_path, "none")
    child.send_signal(first)
    out, err = _finish(child, timeout=READY_LIMIT)
    assert child.returncode == 0, err
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
    child.send_signal(signal.SIGTERM)
    _read_until(child, "runner stopping" if hang == "runner" else "pausing 1", timeout=READY_LIMIT)
    time.sleep(0.2)  # the stop is stuck now; without a way out it would stay so for an hour
    child.send_signal(second)
    # Ends at once, not after the hour the stuck stop lasts (a bound, not a budget: about 0.1 s
    # on idle cores; a loaded machine only makes it longer).
    out, err = _finish(child, timeout=STUCK_SECONDS / 6)
    assert child.returncode == 128 + second
    assert err.splitlines() == [f"flowmem serve: forced to stop by a second {second.name} while {doing}"]
    assert "flowmem serve stopped" not in out and "paused" not in out.splitlines()
    deadline = time.monotonic() + STUCK_SECONDS / 6  # killed, not left running without its parent
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(server)
