"""Where the induce flow runs its tasks: the flow's own task runner, or a Dask cluster.

`Settings.dask_address` names the cluster: a scheduler's address, or `local:N` for a cluster of
N worker processes started on this machine for the run (`flowmem.flows.local_cluster`).
prefect-dask and distributed are imported here and there only, and only when a cluster is
named: no other process of flowmem (an agent, the API) loads them. What a task takes to a
worker is pickled (the settings, the clusters in their `Parcel`, the inducer's name); each
worker opens the store from the settings itself.

A task run on a worker reports to the flow's Prefect server: prefect-dask sends the flow run's
Prefect settings with each task, and while the flow's tasks are on Dask those settings name the
server the flow itself talks to (`PREFECT_API_URL`), also when that is a temporary server the
flow's process started, which the settings otherwise leave unnamed (a worker would start one
of its own). The workers of `local:N` have it in their environment as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from prefect.context import FlowRunContext
from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.task_runners import TaskRunner

from flowmem.settings import Settings

if TYPE_CHECKING:
    from prefect_dask.task_runners import DaskTaskRunner

__all__ = ["LOCAL", "dask_runner", "flow_api_url", "on_dask", "task_runner"]

LOCAL = "local:"
"""`local:N`: a Dask cluster of N worker processes on this machine, for one run."""


def task_runner(settings: Settings) -> AbstractContextManager[TaskRunner[Any]]:
    """The task runner of this flow run, to enter around the tasks it submits: the flow's own
    (Prefect's thread pool, or one given with `with_options(task_runner=...)`) when no Dask
    cluster is named, else a `DaskTaskRunner` on that cluster whose tasks report to the flow's
    Prefect server (`on_dask`)."""
    context = FlowRunContext.get()
    if context is None:
        raise RuntimeError("task_runner() is called inside a flow run")
    if settings.dask_address is None:
        return nullcontext(context.task_runner)
    return on_dask(settings.dask_address, flow_api_url(context))


def flow_api_url(context: FlowRunContext) -> str:
    """The API URL of the Prefect server the flow run reports to: the configured one, or the
    temporary server Prefect started for this process (which no setting names)."""
    return str(context.client.api_url).rstrip("/")


@contextmanager
def on_dask(address: str, api_url: str) -> Iterator[DaskTaskRunner]:
    """A `DaskTaskRunner` on the cluster at `address` (`dask_runner`), entered under Prefect
    settings naming `api_url`: the settings each task takes to its worker, so that its task run
    reports there and no worker starts a Prefect server of its own."""
    with temporary_settings(updates={PREFECT_API_URL: api_url}), dask_runner(address, api_url) as runner:
        yield runner


def dask_runner(address: str, api_url: str | None = None) -> DaskTaskRunner:
    """A `DaskTaskRunner` connected to the scheduler at `address`, or for `local:N` one that
    starts N worker processes when entered and stops them on exit, quickly and within a bound
    (`flowmem.flows.local_cluster`; `api_url` in its workers' environment)."""
    from prefect_dask.task_runners import DaskTaskRunner

    if address.startswith(LOCAL):
        from flowmem.flows.local_cluster import BoundedLocalCluster, cluster_kwargs

        kwargs = cluster_kwargs(int(address.removeprefix(LOCAL)), api_url)
        return DaskTaskRunner(cluster_class=BoundedLocalCluster, cluster_kwargs=kwargs)
    return DaskTaskRunner(address=address)
