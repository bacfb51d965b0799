"""Local processes for a block of work: a free port on 127.0.0.1, and a Prefect server started
there and waited for until it answers /health.

The one place that starts a Prefect server: `flowmem serve`'s scheduler-running server
(`prefect server start`), the demo's temporary server (Prefect's API app under uvicorn, as
Prefect's own temporary server runs it), the benchmarks' and the tests' servers. Prefect is not
imported here (a server's process imports it): the tests and the benchmarks take `free_port`
from here without loading it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

__all__ = [
    "PORT_TAKEN",
    "TEMPORARY",
    "PrefectServer",
    "free_port",
    "healthy",
    "prefect_server",
    "server_command",
]

TEMPORARY = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
"""What makes Prefect's API app a temporary server (Prefect's `SubprocessASGIServer` sets the
same): no UI, and only the services a temporary server runs (recording task runs and events;
no scheduler)."""

PORT_TAKEN = 3
"""uvicorn's exit status when its port was taken between our choosing it and its binding it."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that no one listens on now (the system's choice: bound, then
    released; another process may take it before ours binds it, see `PORT_TAKEN`)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def healthy(api_url: str, *, timeout: float = 2.0) -> bool:
    """Whether the Prefect API at `api_url` (…/api) answers its health check now."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def server_command(port: int, *, temporary: bool = False) -> list[str]:
    """The command of a Prefect server on 127.0.0.1:`port`: `prefect server start` (with its
    scheduler, for schedules to fire), or, `temporary`, Prefect's API app under uvicorn as
    Prefect's temporary server runs it (with `TEMPORARY` in its environment; no UI, no
    scheduler, and none of the CLI's import of the whole API app first)."""
    if not temporary:
        return [
            sys.executable,
            "-m",
            "prefect",
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
    spec = importlib.util.find_spec("prefect")
    if spec is None or spec.origin is None:
        raise RuntimeError("prefect is not installed")
    app_dir = str(Path(spec.origin).parent.parent)
    command = [sys.executable, "-m", "uvicorn", "--app-dir", app_dir, "--factory"]
    command += ["prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(port)]
    return [*command, "--log-level", "error", "--lifespan", "on"]


class PrefectServer:
    """A Prefect server process on 127.0.0.1 and a free port, started when made; `ready` waits
    until it answers, `stop` ends it.

    What it prints goes to a file of its own, shown only in the error when it does not start (a
    temporary server's shutdown logs a cancelled connection reset as an error, which is not one).
    `new_session` starts it in a process group of its own, which `stop` signals whole (the
    terminal's Ctrl-C then never reaches it)."""

    def __init__(
        self,
        *,
        env: Mapping[str, str] | None = None,
        temporary: bool = False,
        name: str = "Prefect server",
        new_session: bool = False,
        command: Callable[[int], list[str]] | None = None,
    ) -> None:
        self.env = {**(os.environ if env is None else env), **(TEMPORARY if temporary else {})}
        self.temporary, self.name, self.new_session = temporary, name, new_session
        self._command = command
        self.port = 0
        self.output = tempfile.TemporaryFile()
        weakref.finalize(self, self.output.close)  # closed with it, or at exit, if never stopped
        self.began = time.perf_counter()
        self.ready_s: float | None = None
        """Seconds from its start to its first answer, once `ready` returned."""
        self.process = self._spawn()

    def command(self) -> list[str]:
        """Its command, on `self.port`."""
        if self._command is not None:
            return self._command(self.port)
        return server_command(self.port, temporary=self.temporary)

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.port = free_port()
        self.output.seek(0)
        self.output.truncate()
        return subprocess.Popen(
            self.command(),
            env=self.env,
            stdout=self.output,
            stderr=subprocess.STDOUT,
            start_new_session=self.new_session,
        )

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def printed(self) -> str:
        """The end of what it printed (its last 20 lines; nothing once it was stopped)."""
        if self.output.closed:
            return ""
        self.output.seek(0)
        lines = self.output.read().decode(errors="replace").strip().splitlines()
        return "\n".join(lines[-20:])

    def ready(self, timeout: float) -> str:
        """Its API's URL, once /health answers (started again on another port if its own was
        taken before it bound it). A RuntimeError with the end of what it printed if it exits
        first or does not answer within `timeout` seconds (then it is stopped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code == PORT_TAKEN:
                self.process = self._spawn()
            elif code is not None:
                raise RuntimeError(f"the {self.name} exited ({code}):\n{self.printed()}")
            elif healthy(self.api_url):
                self.ready_s = time.perf_counter() - self.began
                return self.api_url
            time.sleep(0.1)
        shown = self.printed()
        self.stop()
        raise RuntimeError(f"the {self.name} did not answer within {timeout:g} s:\n{shown}")

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self.new_session:
                os.killpg(self.process.pid, signum)
            else:
                self.process.send_signal(signum)

    def kill(self) -> None:
        """End it at once (SIGKILL; its process group's, with `new_session`)."""
        if self.process.poll() is None:
            self._signal(signal.SIGKILL)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL if it has not ended within `timeout` seconds; its output file
        closed."""
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait()
        self.output.close()


@contextlib.contextmanager
def prefect_server(
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    temporary: bool = False,
    name: str = "Prefect server",
    new_session: bool = False,
) -> Iterator[PrefectServer]:
    """A Prefect server for the block, once it answers (`PrefectServer.ready`); stopped after."""
    server = PrefectServer(env=env, temporary=temporary, name=name, new_session=new_session)
    try:
        server.ready(timeout)
        yield server
    finally:
        server.stop()
