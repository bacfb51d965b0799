"""The Dask cluster of `FLOWMEM_DASK_ADDRESS=local:N`: N worker processes started on this
machine for one flow run, whose stop is quick and bounded.

Imported only where such a cluster is named (`flowmem.flows.runners.dask_runner`), and by its
workers, which unpickle `QuickExit` from their arguments.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from distributed import LocalCluster, WorkerPlugin

if TYPE_CHECKING:
    from distributed import Worker

__all__ = ["DELIVERY_TIMEOUT", "STOP_TIMEOUT", "BoundedLocalCluster", "QuickExit", "cluster_kwargs"]

logger = logging.getLogger(__name__)

STOP_TIMEOUT = 10.0
"""Seconds the cluster's stop may take in all (its scheduler and nannies; a nanny waits 4 s for
its worker's process to exit, then kills it): a worker that has finished its tasks exits in a
fraction of a second (`QuickExit`), so only a worker stuck in a task's code comes near it."""

DELIVERY_TIMEOUT = 2.0
"""Seconds a closing worker waits for its Prefect events (the last task run's state changes)
to reach the server: milliseconds when the server answers; below the 4 s its nanny waits for
the process to exit."""


def cluster_kwargs(workers: int, api_url: str | None = None) -> dict[str, Any]:
    """The cluster's arguments (`LocalCluster`'s keyword arguments, as prefect-dask's
    `DaskTaskRunner(cluster_kwargs=...)` takes them): `workers` worker processes, one thread
    each (induction holds the GIL); the scheduler's HTTP server on a free port; each worker's
    process ending as soon as the worker has closed (`QuickExit`); the flow's Prefect server in
    the workers' environment (`api_url`, when given), for what a worker does outside a task's
    settings (its log and event workers' last flush at exit)."""
    kwargs: dict[str, Any] = {
        "n_workers": workers,
        "processes": True,
        "threads_per_worker": 1,
        # None still binds :8787 (dask/distributed#8136), which a second cluster then fails to take.
        "dashboard_address": ":0",
        "plugins": (QuickExit(),),
    }
    if api_url is not None:
        kwargs["env"] = {"PREFECT_API_URL": api_url}
    return kwargs


class BoundedLocalCluster(LocalCluster):
    """A `LocalCluster` whose exit (the task runner's, after its client's) closes it within
    `STOP_TIMEOUT`, and, past it, lets the flow go on to its commit with a warning."""

    def __exit__(self, *exc: object) -> None:
        try:
            self.close(timeout=STOP_TIMEOUT)
        except TimeoutError:
            logger.warning("the local Dask cluster did not stop within %.0f s", STOP_TIMEOUT)


class QuickExit(WorkerPlugin):
    """A worker's stop: its Prefect events delivered (`deliver_events`) as it closes, and its
    process ended at the last of its exit handlers, instead of after the interpreter's teardown
    of every module it imported.

    A worker process exits normally once its worker has closed: Prefect's last flush of logs
    and events (at thread shutdown), the exit handlers, then the teardown, which frees every
    object of Prefect, LanceDB, scikit-learn and the rest one by one: 1–4 s on two busy cores,
    measured, while its nanny waits 4 s for the process before it kills it and warns ("Worker
    process still alive after 4.0 seconds, killing"). Nothing of that teardown matters to a
    process that ends: the exit handlers registered after the worker started (Prefect's thread
    loops) have run by then, and the consoles and log handlers are flushed here."""

    name = "flowmem-quick-exit"

    def __init__(self) -> None:
        self.closed = False

    def setup(self, worker: Worker) -> None:
        # Registered now, before any task ran: exit handlers run last registered first, so
        # this one runs after those of what the tasks start.
        atexit.register(self.exit)

    def teardown(self, worker: Worker) -> None:
        self.closed = True
        deliver_events(DELIVERY_TIMEOUT)

    def exit(self) -> None:
        """The process's end, with exit status 0, once its worker has closed (else nothing)."""
        if not self.closed:
            return
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(0)


def deliver_events(timeout: float) -> None:
    """Wait up to `timeout` seconds until the Prefect events this process emitted have been
    sent. Prefect sends what is left when the process exits anyway, but its events worker,
    stopped with an event still queued, warns "Still processing items: 1 items remaining..."
    (its count includes its own stop marker), which would be the only line a clean run printed."""
    if "prefect.events.worker" not in sys.modules:  # no task ran here
        return
    from prefect.events.worker import EventsWorker

    # Prefect keeps its running services in `_instances` (no public list); `wait_until_empty`
    # returns once every queued event was handled.
    running: Mapping[int, object] = EventsWorker._instances  # type: ignore[misc]  # a class variable
    services = [s for s in list(running.values()) if isinstance(s, EventsWorker)]
    if not services:
        return

    def wait() -> None:
        for service in services:
            service.wait_until_empty()

    waiter = threading.Thread(target=wait, name="flowmem events delivery", daemon=True)
    waiter.start()
    waiter.join(timeout)
