"""The induce flow on a real Dask cluster (`FLOWMEM_DASK_ADDRESS`): two worker processes read,
place and induce, and the store ends up with exactly the workflows and runs of an in-process
induction of the same data."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.scaling import committed  # as the scaling bench compares a cluster's run
from flowmem.demo import simulate
from flowmem.induction.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings


def test_the_setting_names_a_scheduler_or_a_cluster_of_local_worker_processes() -> None:
    from flowmem.flows.runners import dask_runner

    remote = dask_runner("tcp://10.0.0.5:8786")
    assert (remote.address, remote.cluster_kwargs) == ("tcp://10.0.0.5:8786", {})
    local = dask_runner("local:3")
    assert local.address is None
    assert local.cluster_kwargs == {
        "n_workers": 3,
        "processes": True,  # not threads of this process: what crosses to a worker is pickled
        "threads_per_worker": 1,
        "dashboard_address": ":0",  # a free port, never :8787 (None binds it)
    }


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """The address of a Dask cluster of two worker processes, one thread each, for the module
    (a worker process takes seconds to start and to import flowmem and Prefect)."""
    from distributed import LocalCluster

    from flowmem.flows.runners import dask_runner

    # The cluster `FLOWMEM_DASK_ADDRESS=local:2` starts (no dashboard: two runs never collide on :8787).
    cluster = LocalCluster(**dask_runner("local:2").cluster_kwargs)  # type: ignore[no-untyped-call]
    with cluster:
        yield cluster.scheduler_address


def _tasks_run(dask_worker: Any) -> tuple[int, int]:
    return os.getpid(), dask_worker.state.executed_count


def tasks_run(address: str) -> dict[int, int]:
    """For each worker of the cluster at `address`: its process id -> how many tasks it ran."""
    from distributed import Client

    with Client(address) as client:  # type: ignore[no-untyped-call]
        found: dict[str, tuple[int, int]] = client.run(_tasks_run)
    return dict(found.values())


# End to end: Prefect flows on the harness's server, their tasks on worker processes.
@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_two_worker_processes_commit_the_workflows_of_an_in_process_run(
    scheduler: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowmem.flows.pipeline import induce_flow

    here, there = (Settings(db=str(tmp_path / name / "db")) for name in ("here", "there"))
    monkeypatch.setenv("FLOWMEM_DASK_ADDRESS", scheduler)  # what the flow's settings read
    monkeypatch.setenv("FLOWMEM_INDUCE_BATCH", "3")  # a few clusters per task: tasks for both workers
    summaries = []
    for batch in (simulate(150, seed=5), simulate(12, seed=6)):  # a full run, then new runs placed
        for s in (here, there):
            store_trajectories(store_from(s), batch, s.scrub)
        expected = run_induction(store_from(here), here, RuleInducer(), namespace=here.namespace).summary()
        ran = induce_flow(db=there.db)
        assert {k: v for k, v in ran.items() if k not in ("run", "tag")} == {
            k: v for k, v in expected.items() if k not in ("run", "tag")
        }
        summaries.append(ran)
    full, placed = summaries
    assert full["refit"] and full["versions_created"] > 5
    assert placed["refit"] is None and 0 < placed["clusters_changed"] < placed["clusters"]
    assert placed["versions_created"] > 0  # new versions (2, ...) of workflows of the first run
    assert committed(there.db) == committed(here.db)
    # Every plan and induction ran in the two other processes, each taking some; commits ran here.
    tasks = tasks_run(scheduler)
    assert len(tasks.keys() - {os.getpid()}) == 2 and min(tasks.values()) > 0
    assert sum(tasks.values()) == sum(1 + math.ceil(s["clusters_changed"] / 3) for s in summaries)


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_scheduler_that_does_not_answer_fails_the_run_before_it_reads_or_writes(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dask

    # distributed's defaults first: a `dask.config.set` of one of its keys made before they exist
    # deletes the whole "distributed" section on exit, and a later Dask test in this process fails.
    import distributed  # noqa: F401

    from flowmem.flows.pipeline import induce_flow

    store_trajectories(store_from(settings), simulate(40, seed=5), settings.scrub)
    monkeypatch.setenv("FLOWMEM_DASK_ADDRESS", "tcp://127.0.0.1:9")  # the discard port: nothing listens
    with (
        dask.config.set({"distributed.comm.timeouts.connect": "1s"}),
        pytest.raises(OSError, match="127.0.0.1:9"),
    ):
        induce_flow(db=settings.db)
    assert store_from(settings).list_runs() == [] and store_from(settings).list_workflows() == []
    assert dask.config.get("distributed.comm.timeouts.connect") != "1s"
