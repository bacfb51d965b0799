"""`flowmem serve`: the deployments of `deployments/prefect.yaml`, served from one process.

The schedules are defined here once; a test checks that `deployments/prefect.yaml` declares
the same deployments, entrypoints, schedules and parameters.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import prefect
from prefect.deployments.runner import RunnerDeployment
from prefect.flows import Flow
from prefect.settings import PREFECT_API_URL, temporary_settings

from flowmem.flows import pipeline

__all__ = ["DEPLOYMENTS", "Deployment", "serve"]


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


def serve(*, interval: float | None = None, only: tuple[str, ...] = ()) -> None:
    """Serve the deployments until interrupted (Ctrl-C or SIGTERM).

    `interval` (seconds) replaces every cron schedule, for a quick local check; `only` serves a
    subset by name. Schedules are not paused on shutdown, so the next `serve` picks them up.
    """
    deployments = [
        cast(
            RunnerDeployment,
            d.flow.to_deployment(
                name=d.name,
                cron=None if interval else d.cron,
                interval=interval,
                paused=False if interval else not d.active,
                parameters=d.parameters,
            ),
        )
        for d in DEPLOYMENTS
        if not only or d.name in only
    ]
    with local_server():
        prefect.serve(*deployments, pause_on_shutdown=False)
