"""The cycle flow run again and again from one process: the demo's Prefect engine.

Each call is a real flow run of `cycle_flow`, its states and its tasks' recorded by a Prefect
server: the configured one (PREFECT_API_URL), or else one temporary server for the whole
process, started as soon as the engine is made (the first round's tasks run while it comes
up) and stopped when the process exits. What the demo's Prefect engine cost beyond the cycle's
own work, and what was cut, is in docs/demo.md ("Where the time goes").
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import prefect
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
    get_current_settings,
    temporary_settings,
)

from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["NO_HEARTBEAT", "PrefectCycle", "TemporaryServer", "prefect_cycle"]

TEMPORARY = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
"""What makes Prefect's API app a temporary server (Prefect's `SubprocessASGIServer` sets the
same): no UI, and only the services a temporary server runs (recording task runs and events;
no scheduler)."""

NO_HEARTBEAT: dict[Any, Any] = {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
"""Prefect settings under which flow runs send no heartbeats: they only tell a server watching
for crashed runs that this process still lives, and a flow run's heartbeat thread, which sleeps
a second at a time, makes every flow run's end wait up to a second for it."""

PORT_TAKEN = 3
"""uvicorn's exit status when its port was taken between our choosing it and its binding it."""


class TemporaryServer:
    """Prefect's temporary server, by the command and environment Prefect's own uses: uvicorn
    serving `prefect.server.api.server:create_app` on 127.0.0.1, on the database of
    PREFECT_HOME. Started by a plain `Popen`: Prefect's `SubprocessASGIServer` lives in the
    server's module, whose import (the whole API app, ~1.5 s) the process running the flows
    would pay before the server even starts.

    What it prints goes to a file of its own, shown only when it fails to start: its shutdown
    at exit may log an error that is not one (SQLAlchemy's pool reporting the cancelled reset of
    a connection as uvicorn stops it), which the demo's output would otherwise end with."""

    def __init__(self) -> None:
        self.port = 0
        self.output = tempfile.TemporaryFile()
        self.process = self._spawn()
        atexit.register(self.stop)  # after Prefect's log and event workers drain at exit

    def command(self) -> list[str]:
        """The server's command, on `self.port`."""
        app_dir = str(Path(prefect.__file__).parent.parent)
        command = [sys.executable, "-m", "uvicorn", "--app-dir", app_dir, "--factory"]
        command += ["prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(self.port)]
        return [*command, "--log-level", "error", "--lifespan", "on"]

    def _spawn(self) -> subprocess.Popen[bytes]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        settings = get_current_settings().to_environment_variables(exclude_unset=True)
        self.output.seek(0)
        self.output.truncate()
        env = {**os.environ, **TEMPORARY, **settings}
        return subprocess.Popen(self.command(), env=env, stdout=self.output, stderr=subprocess.STDOUT)

    def _printed(self) -> str:
        """The end of what it printed, for an error that says why it did not start."""
        self.output.seek(0)
        lines = self.output.read().decode(errors="replace").strip().splitlines()
        return "\n".join(lines[-20:])

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def ready(self) -> str:
        """Its API's URL, once it answers (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS
        bounds the wait, as for Prefect's own temporary server)."""
        deadline = time.monotonic() + PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
        with httpx.Client(timeout=5.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() == PORT_TAKEN:
                    self.process = self._spawn()
                elif self.process.poll() is not None:
                    code = self.process.returncode
                    raise RuntimeError(f"the temporary Prefect server exited ({code}):\n{self._printed()}")
                try:
                    if client.get(f"{self.api_url}/health").status_code == 200:
                        return self.api_url
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the temporary Prefect server did not answer in time:\n{self._printed()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class PrefectCycle:
    """`cycle_flow` on a store's settings, run on `server` (None: Prefect's configured API),
    its flow runs sending no heartbeats (`NO_HEARTBEAT`)."""

    def __init__(self, server: TemporaryServer | None) -> None:
        self.server = server

    def __call__(self, store: Store, settings: Settings) -> dict[str, Any]:
        # Imported here, once the server is on its way up: flowmem's jobs and Prefect's flow
        # engine take a second to import, which the server's start then hides.
        from flowmem.flows.pipeline import cycle_flow

        updates = dict(NO_HEARTBEAT)
        if self.server is not None:
            updates[PREFECT_API_URL] = self.server.ready()
        with temporary_settings(updates=updates):
            return cycle_flow(db=settings.db, namespace=settings.namespace)


def prefect_cycle() -> PrefectCycle:
    """The engine on Prefect's configured API (PREFECT_API_URL, from the environment or a
    profile), or else on a temporary server started now."""
    return PrefectCycle(None if PREFECT_API_URL.value() else TemporaryServer())
