"""Where the induce flow runs its tasks: the flow's own task runner, or a Dask cluster.

`Settings.dask_address` names the cluster: a scheduler's address, or `local:N` for a cluster of
N worker processes started on this machine for the run. prefect-dask and distributed are
imported here only, and only when a cluster is named: no other process of flowmem (an agent,
the API) loads them. What a task takes to a worker is pickled (the settings, the clusters in
their `Parcel`, the inducer's name); each worker opens the store from the settings itself.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from prefect.context import FlowRunContext
from prefect.task_runners import TaskRunner

from flowmem.settings import Settings

if TYPE_CHECKING:
    from prefect_dask.task_runners import DaskTaskRunner

__all__ = ["LOCAL", "dask_runner", "task_runner"]

LOCAL = "local:"
"""`local:N`: a Dask cluster of N worker processes on this machine, for one run."""


def task_runner(settings: Settings) -> AbstractContextManager[TaskRunner[Any]]:
    """The task runner of this flow run, to enter around the tasks it submits: the flow's own
    (Prefect's thread pool, or one given with `with_options(task_runner=...)`) when no Dask
    cluster is named, else a `DaskTaskRunner` on that cluster."""
    if settings.dask_address is None:
        context = FlowRunContext.get()
        if context is None:
            raise RuntimeError("task_runner() is called inside a flow run")
        return nullcontext(context.task_runner)
    return dask_runner(settings.dask_address)


def dask_runner(address: str) -> DaskTaskRunner:
    """A `DaskTaskRunner` connected to the scheduler at `address`, or for `local:N` one that
    starts N worker processes (one thread each: induction holds the GIL; the scheduler's HTTP
    server on a free port) when entered and stops them on exit."""
    from prefect_dask.task_runners import DaskTaskRunner

    if address.startswith(LOCAL):
        workers = int(address.removeprefix(LOCAL))
        # The scheduler's HTTP server on a free port: None still binds :8787 (dask/distributed#8136),
        # which a second cluster on the machine then fails to take.
        kwargs = {"n_workers": workers, "processes": True, "threads_per_worker": 1, "dashboard_address": ":0"}
        return DaskTaskRunner(cluster_kwargs=kwargs)
    return DaskTaskRunner(address=address)
