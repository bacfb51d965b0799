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
from typing import TYPE_CHECKING, Any

from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
    get_current_settings,
    temporary_settings,
)

from flowmem.flows.local import PrefectServer
from flowmem.settings import Settings
from flowmem.storage import Store

if TYPE_CHECKING:
    from flowmem.jobs.cycle import CycleSummary

__all__ = ["NO_HEARTBEAT", "PrefectCycle", "TemporaryServer", "prefect_cycle"]

NO_HEARTBEAT: dict[Any, Any] = {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
"""Prefect settings under which flow runs send no heartbeats: they only tell a server watching
for crashed runs that this process still lives, and a flow run's heartbeat thread, which sleeps
a second at a time, makes every flow run's end wait up to a second for it."""


class TemporaryServer(PrefectServer):
    """Prefect's temporary server, by the command and environment Prefect's own uses
    (`flows.local.server_command(temporary=True)`: uvicorn serving Prefect's API app on
    127.0.0.1, on the database of PREFECT_HOME), started by a plain `Popen`: Prefect's
    `SubprocessASGIServer` lives in the server's module, whose import (the whole API app,
    ~1.5 s) the process running the flows would pay before the server even starts. Stopped
    when the process exits."""

    def __init__(self) -> None:
        settings = get_current_settings().to_environment_variables(exclude_unset=True)
        super().__init__(env={**os.environ, **settings}, temporary=True, name="temporary Prefect server")
        atexit.register(self.stop, 5.0)  # after Prefect's log and event workers drain at exit

    def ready(self, timeout: float | None = None) -> str:
        """Its API's URL, once it answers (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS
        bounds the wait, as for Prefect's own temporary server)."""
        return super().ready(
            PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value() if timeout is None else timeout
        )


class PrefectCycle:
    """`cycle_flow` on a store's settings, run on `server` (None: Prefect's configured API),
    its flow runs sending no heartbeats (`NO_HEARTBEAT`)."""

    def __init__(self, server: TemporaryServer | None) -> None:
        self.server = server

    def __call__(self, store: Store, settings: Settings) -> CycleSummary:
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
