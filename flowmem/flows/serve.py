"""`flowmem serve`: the deployments of `deployments/prefect.yaml`, served from one process.

The schedules are defined here once; a test checks that `deployments/prefect.yaml` declares
the same deployments, entrypoints, schedules and parameters. Served deployments are named
`<name>-served` (`flowmem-collect/collect-served`), so they never overwrite the work-pool
deployments `prefect deploy` registers as `flowmem-collect/collect` on the same server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, cast
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.deployments.runner import RunnerDeployment
from prefect.flows import Flow
from prefect.runner import Runner
from prefect.settings import PREFECT_API_URL, temporary_settings

from flowmem.flows import pipeline
from flowmem.flows.local import PrefectServer, server_command

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
    """Flow parameters: the flow's keyword arguments, as Prefect's `to_deployment` takes them
    and prefect.yaml declares them (the flow's signature types them)."""

    @property
    def served_name(self) -> str:
        """The deployment's name under `flowmem serve` (prefect.yaml's is `name`)."""
        return self.name + SERVED_SUFFIX

    @property
    def entrypoint(self) -> str:
        """The flow's entrypoint, as prefect.yaml names it."""
        return f"flowmem/flows/pipeline.py:{self.name}_flow"

    @property
    def flow(self) -> Flow[..., Any]:
        """The flow object."""
        found: Flow[..., Any] = getattr(pipeline, f"{self.name}_flow")
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


def _server_command(port: int) -> list[str]:
    """The command of the local Prefect server `local_server` starts: `prefect server start`,
    whose scheduler fires the schedules."""
    return server_command(port)


@contextlib.contextmanager
def local_server(
    *, timeout: float = 180.0, started: Callable[[PrefectServer], object] = lambda _: None
) -> Iterator[str | None]:
    """The Prefect API to serve against: the configured one (PREFECT_API_URL), or else a
    `prefect server start` on 127.0.0.1 that lives as long as the block (`started` is given
    it as soon as its process exists).

    Prefect's temporary in-process server runs no scheduler, so schedules would never fire on
    it; a real local server does.
    """
    if PREFECT_API_URL.value():
        yield None
        return
    server = PrefectServer(name="local Prefect server", command=lambda port: _server_command(port))
    started(server)
    try:
        url = server.ready(timeout)
        with temporary_settings({PREFECT_API_URL: url}):
            yield url
    finally:
        server.stop()


class _Stop:
    """SIGTERM and SIGINT while `serve` runs: the first stops it cleanly, a second one (while
    it stops) ends the process at once.

    The first does what Ctrl-C does: KeyboardInterrupt in plain code; while the runner runs,
    the cancellation of its task (as asyncio's own SIGINT handler would), so the runner exits
    its context and no traceback is printed. A stop can hang — on a Prefect server that no
    longer answers the pause, or a flow run that will not end — and a supervisor or an
    operator then signals again: that ends the process with 128 + the signal's number, the
    local Prefect server killed, after one line saying what was cut short.

    Python runs a signal's handler in the main thread, when that thread next runs Python code;
    the kernel may hand the signal to any other thread (lancedb's, Prefect's), which interrupts
    nothing there: the main thread, asleep in the event loop's select or in a stuck stop,
    would not see the signal until something else woke it: the runner's next poll
    (PREFECT_RUNNER_POLL_FREQUENCY, 10 s by default), or never, in a stop stuck in a blocking
    call (seen in a test: a SIGTERM left unanswered for minutes). `watching` makes every
    signal also a byte on a socket (`signal.set_wakeup_fd`) that a thread of ours reads: it
    wakes the loop, and it ends the process itself on a second signal, whatever the main
    thread is doing.
    """

    def __init__(self) -> None:
        self.stopping = False
        """Whether a stop has begun (by a signal, or because the runner ended)."""
        self.seen = 0
        """Signals read from the wakeup socket (`watching`)."""
        self._exiting = threading.Lock()
        self.doing = "stopping the local Prefect server"
        """What a stop is doing at this point, for the line a forced stop prints."""
        self.task: asyncio.Task[None] | None = None
        """The task that runs the runner, while it runs."""
        self.server: PrefectServer | None = None
        """The local Prefect server, when `serve` started one."""

    def __call__(self, signum: int, frame: object) -> None:
        if self.stopping:
            self.force(signum)
        self.stopping = True
        if self.task is not None and not self.task.done():
            # Called between two steps of the loop, in its thread: what asyncio's own handler does.
            self.task.cancel()
            self._wake(self.task)
            return
        raise KeyboardInterrupt

    @staticmethod
    def _wake(task: asyncio.Task[None]) -> None:
        """Wake the loop that runs `task` (from its thread or another), so it runs what is due."""
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            task.get_loop().call_soon_threadsafe(lambda: None)

    def force(self, signum: int) -> None:
        """End the process now (the local server killed), saying what was cut short (once: the
        handler in the main thread and the watching thread may both get here)."""
        self._exiting.acquire()  # the second to get here waits: the first ends the process
        name = signal.Signals(signum).name
        sys.stderr.write(f"flowmem serve: forced to stop by a second {name} while {self.doing}\n")
        if self.server is not None:
            self.server.kill()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """While the block runs, every signal with a Python handler also writes its number to
        a socket that a daemon thread reads (`_watch`)."""
        reader, writer = socket.socketpair()
        writer.setblocking(False)  # what set_wakeup_fd requires: a full socket drops bytes
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        thread = threading.Thread(
            target=self._watch, args=(reader,), name="flowmem-serve-signals", daemon=True
        )
        thread.start()
        try:
            yield
        finally:
            signal.set_wakeup_fd(previous)
            writer.close()  # the thread reads the end of the stream and returns
            thread.join()
            reader.close()

    def _watch(self, reader: socket.socket) -> None:
        """A second SIGTERM or SIGINT ends the process from here; any one wakes the runner's
        loop, so the main thread runs the handler now. (Whether a first signal came after the
        runner ended by itself, the byte does not say: the handler decides that one.)"""
        while numbers := reader.recv(64):
            for signum in numbers:
                if signum not in (signal.SIGTERM, signal.SIGINT):
                    continue
                if self.seen:
                    self.force(signum)
                self.seen += 1
                if (task := self.task) is not None:
                    self._wake(task)

    async def run(self, runner: Runner) -> None:
        """Run the runner as the task a first signal cancels."""
        self.task = asyncio.current_task()
        try:
            await runner.start()
        finally:
            self.task = None


class _Runner(Runner):
    """Prefect's runner, stopped by SIGTERM as by Ctrl-C.

    Prefect's own SIGTERM handler (installed by `start`) calls `sys.exit(0)` from inside the
    event loop, which prints an asyncio traceback."""

    on_signal: Callable[[int, object], None]
    """Called with SIGTERM instead."""

    def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
        self.on_signal(signal.SIGTERM, None)


def serve(*, interval: float | None = None, only: tuple[str, ...] = ()) -> None:
    """Serve the deployments until interrupted (Ctrl-C or SIGTERM, both a clean stop; a second
    one during the stop ends the process at once, see `_Stop`).

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
    stop = _Stop()
    # Ours also while the local server starts; not asyncio's default SIGINT handler, so
    # asyncio.run leaves SIGINT to us.
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with stop.watching(), local_server(started=lambda server: setattr(stop, "server", server)):
            runner = _Runner(pause_on_shutdown=False)  # paused below, however early the stop
            runner.on_signal = stop
            ids = [cast(UUID, runner.add_deployment(d)) for d in deployments]
            try:
                names = ", ".join(f"{d.flow_name}/{d.name}" for d in deployments)
                print(f"flowmem serve: {names}", flush=True)
                stop.doing = "stopping the runner (the served deployments are not paused)"
                asyncio.run(stop.run(runner))
            except asyncio.CancelledError:
                if not stop.stopping:  # not ours: a stop we did not ask for is an error
                    raise
            finally:
                stop.stopping = True  # from here on, a signal cuts the stop short
                stop.doing = "pausing the served deployments (they may stay active)"
                _pause(ids)
                stop.doing = "stopping the local Prefect server"
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _pause(ids: list[UUID]) -> None:
    """Pause the served deployments (best effort: the server may be gone already)."""
    try:
        with get_client(sync_client=True) as client:
            for deployment_id in ids:
                client.pause_deployment(deployment_id)
    except Exception as exc:  # stopping must still succeed
        print(f"flowmem serve: could not pause the served deployments: {exc}", file=sys.stderr)
