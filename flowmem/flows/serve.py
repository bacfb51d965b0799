"""`flowmem serve`: the deployments of `deployments/prefect.yaml`, served from one process.

The schedules are defined here once; a test checks that `deployments/prefect.yaml` declares
the same deployments, entrypoints, schedules and parameters. Served deployments are named
`<name>-served` (`flowmem-collect/collect-served`), so they never overwrite the work-pool
deployments `prefect deploy` registers as `flowmem-collect/collect` on the same server.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.deployments.runner import RunnerDeployment
from prefect.flows import Flow
from prefect.runner import Runner
from prefect.settings import PREFECT_API_URL, temporary_settings

from flowmem.flows import pipeline

__all__ = ["DEPLOYMENTS", "SERVED_SUFFIX", "Deployment", "serve"]

SERVED_SUFFIX = "-served"
"""Appended to the name of every served deployment; no deployment of prefect.yaml ends so."""


@dataclass(frozen=True)
class Deployment:
    """One scheduled flow."""

    name: str
    """Deployment name (the flow's name is `flowmem-<name>`)."""
    cron: str
    """When it runs."""
    active: bool = True
    """Whether the schedule starts active."""
    parameters: dict[str, Any] = field(default_factory=dict)
    """Flow parameters."""

    @property
    def served_name(self) -> str:
        """The deployment's name under `flowmem serve` (prefect.yaml's is `name`)."""
        return self.name + SERVED_SUFFIX

    @property
    def entrypoint(self) -> str:
        """The flow's entrypoint, as prefect.yaml names it."""
        return f"flowmem/flows/pipeline.py:{self.name}"

    @property
    def flow(self) -> Flow[..., Any]:
        """The flow object."""
        found: Flow[..., Any] = getattr(pipeline, self.name)
        return found


DEPLOYMENTS = (
    Deployment("collect", "*/5 * * * *"),
    Deployment("induce", "*/15 * * * *", parameters={"inducer": "rule"}),
    Deployment("learn", "0 * * * *"),
    Deployment("cycle", "*/15 * * * *", active=False, parameters={"inducer": "rule"}),
    Deployment("maintain", "30 * * * *"),
)
"""collect every 5 minutes, induce every 15, learn hourly; cycle (all three) is there, paused,
for those who prefer one schedule; maintain hourly, at half past (away from learn)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def local_server(*, timeout: float = 180.0) -> Iterator[str | None]:
    """The Prefect API to serve against: the configured one (PREFECT_API_URL), or else a
    `prefect server start` on 127.0.0.1 that lives as long as the block.

    Prefect's temporary in-process server runs no scheduler, so schedules would never fire on
    it; a real local server does.
    """
    if PREFECT_API_URL.value():
        yield None
        return
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + timeout
        while not _healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                err = process.stderr.read().decode(errors="replace")[-2000:] if process.stderr else ""
                raise RuntimeError(f"the local Prefect server did not start: {err}")
            time.sleep(0.5)
        with temporary_settings({PREFECT_API_URL: url}):
            yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM does what Ctrl-C does: KeyboardInterrupt in plain code; inside `asyncio.run`,
    asyncio's own SIGINT handler cancels the main task, so the runner exits its context
    (pausing its schedules) and no traceback is printed."""
    signal.raise_signal(signal.SIGINT)


class _Runner(Runner):
    """Prefect's runner, stopped by SIGTERM as by Ctrl-C.

    Prefect's own SIGTERM handler calls `sys.exit(0)` from inside the event loop, which
    prints an asyncio traceback."""

    def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
        _interrupt(signal.SIGTERM, None)


def serve(*, interval: float | None = None, only: tuple[str, ...] = ()) -> None:
    """Serve the deployments until interrupted (Ctrl-C or SIGTERM, both a clean stop).

    `interval` (seconds) replaces every cron schedule, for a quick local check; `only` serves a
    subset by name. On shutdown the served deployments are paused, so no runs pile up as Late
    while nothing serves them; the next `serve` registers them again with their own `active`
    flag (prefect.yaml's deployments are separate and left alone).
    """
    deployments = [
        cast(
            RunnerDeployment,
            d.flow.to_deployment(
                name=d.served_name,
                cron=None if interval else d.cron,
                interval=interval,
                paused=False if interval else not d.active,
                parameters=d.parameters,
            ),
        )
        for d in DEPLOYMENTS
        if not only or d.name in only
    ]
    previous = signal.signal(signal.SIGTERM, _interrupt)  # also while the local server starts
    try:
        with local_server():
            runner = _Runner(pause_on_shutdown=False)  # paused below, however early the stop
            ids = [cast(UUID, runner.add_deployment(d)) for d in deployments]
            try:
                names = ", ".join(f"{d.flow_name}/{d.name}" for d in deployments)
                print(f"flowmem serve: {names}", flush=True)
                asyncio.run(runner.start())
            finally:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second stop must not cut this
                _pause(ids)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _pause(ids: list[UUID]) -> None:
    """Pause the served deployments (best effort: the server may be gone already)."""
    try:
        with get_client(sync_client=True) as client:
            for deployment_id in ids:
                client.pause_deployment(deployment_id)
    except Exception as exc:  # stopping must still succeed
        print(f"flowmem serve: could not pause the served deployments: {exc}", file=sys.stderr)
