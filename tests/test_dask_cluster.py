"""The induce flow on a real Dask cluster (`FLOWMEM_DASK_ADDRESS`): two worker processes read,
place and induce, and the store ends up with exactly the workflows and runs of an in-process
induction of the same data."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from bench.scaling import committed  # as the scaling bench compares a cluster's run
from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings
from tests.prefect_servers import seed_database
from tests.processes import READY_LIMIT

pytestmark = pytest.mark.xdist_group("prefect")  # the harness's Prefect server, started once


def test_the_setting_names_a_scheduler_or_a_cluster_of_local_worker_processes() -> None:
    from flowmem.flows.local_cluster import QuickExit
    from flowmem.flows.runners import dask_runner

    remote = dask_runner("tcp://10.0.0.5:8786", "http://127.0.0.1:4200/api")
    assert (remote.address, remote.cluster_kwargs) == ("tcp://10.0.0.5:8786", {})
    local = dask_runner("local:3", "http://127.0.0.1:4200/api")
    assert local.address is None
    plugins = local.cluster_kwargs.pop("plugins")
    assert [type(p) for p in plugins] == [QuickExit]  # each worker's process ends once it closed
    assert local.cluster_kwargs == {
        "n_workers": 3,
        "processes": True,  # not threads of this process: what crosses to a worker is pickled
        "threads_per_worker": 1,
        "dashboard_address": ":0",  # a free port, never :8787 (None binds it)
        "env": {"PREFECT_API_URL": "http://127.0.0.1:4200/api"},  # the flow's server, for the workers
    }


def test_each_task_takes_settings_naming_the_flows_server_to_its_worker() -> None:
    """What prefect-dask sends with each task (`serialize_context`, as its client's `submit`
    calls it) names the flow's Prefect server, also when no setting named it (the flow's
    temporary server): a worker of any cluster, one started apart from the flow too, then
    reports there and starts no server. Entering the runner connects to nothing yet."""
    from prefect.context import SettingsContext, serialize_context
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flowmem.flows.runners import on_dask

    with temporary_settings(restore_defaults={PREFECT_API_URL}):  # as on a temporary server
        with on_dask("tcp://127.0.0.1:9", "http://127.0.0.1:4321/api"):
            sent = SettingsContext(**serialize_context()["settings_context"]).settings
        assert sent.api.url == "http://127.0.0.1:4321/api"
        assert PREFECT_API_URL.value() is None  # only while the flow's tasks are on Dask


QUICK_EXIT = """
import sys
from flowmem.flows.local_cluster import QuickExit

class Loud:
    def __del__(self):
        print("torn down", flush=True)

kept = Loud()  # freed by the interpreter's teardown, which prints
plugin = QuickExit()
plugin.setup(worker=None)  # as the worker starts
if sys.argv[1] == "closed":
    plugin.teardown(worker=None)  # as the worker closes
print("exiting", flush=True)
"""


@pytest.mark.parametrize(
    ("closed", "printed"), [("closed", "exiting\n"), ("running", "exiting\ntorn down\n")]
)
def test_a_closed_workers_process_ends_without_the_interpreters_teardown(closed: str, printed: str) -> None:
    """What lets a nanny find its worker's process gone at once, not kill it after 4 s: once
    the worker closed, the process ends at its last exit handler, status 0, before the teardown
    of its modules (`QuickExit`); a worker that did not close exits as any process."""
    done = subprocess.run(
        [sys.executable, "-c", QUICK_EXIT, closed], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout) == (0, printed), done.stderr


@pytest.fixture
def scheduler() -> Iterator[str]:
    """The address of a Dask cluster of two worker processes, one thread each, for the one test
    that runs flows on it, and stopped when it ends: an idle cluster's scheduler, nannies and
    workers keep ticking (~2.2 s of CPU in 20 s, measured), which a module-wide cluster did
    through the module's later tests (the local cluster's run: ~25 s alone, 87 s in the suite)."""
    from distributed import LocalCluster

    from flowmem.flows.local_cluster import cluster_kwargs

    # The cluster `FLOWMEM_DASK_ADDRESS=local:2` starts (no dashboard: two runs never collide on
    # :8787), but for the flow's Prefect server in its workers' environment: a cluster started
    # apart from the flow learns of that server only from the settings each task brings.
    cluster = LocalCluster(**cluster_kwargs(2))  # type: ignore[no-untyped-call]
    with cluster:
        yield cluster.scheduler_address


SERVER = "prefect.server.api.server:create_app"

SLOW_SCRATCH = re.compile(
    r"^.*UserWarning: Creating scratch directories is taking a surprisingly long time\..*\n(?:  .*\n)?", re.M
)
"""Dask's warning when a server (the scheduler, a nanny, a worker) took over 1 s to make its
scratch directory, with the line of source Python prints under it: on a loaded machine its
processes wait on each other's file locks there. The machine's, not the run's: left out of
what the run is held to print."""
"""What a Prefect API server's command line runs (Prefect's temporary server, the harness's)."""


def descendants(pid: int) -> list[int]:
    """The processes `pid` started, and theirs, as long as they run."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # the thread or the process ended
            continue
        for child in children:
            found += [child, *descendants(child)]
    return found


def prefect_servers(pid: int) -> set[int]:
    """The Prefect API servers among the processes `pid` started, and theirs."""
    servers = set()
    for child in descendants(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if SERVER.encode() in command:
            servers.add(child)
    return servers


def _servers_started() -> set[int]:
    return prefect_servers(os.getpid())


def _tasks_run(dask_worker: Any) -> tuple[int, int]:
    return os.getpid(), dask_worker.state.executed_count


def tasks_run(address: str) -> dict[int, int]:
    """For each worker of the cluster at `address`: its process id -> how many tasks it ran."""
    from distributed import Client

    with Client(address) as client:  # type: ignore[no-untyped-call]
        found: dict[str, tuple[int, int]] = client.run(_tasks_run)
    return dict(found.values())


def servers_started(address: str) -> set[int]:
    """The Prefect servers the workers of the cluster at `address` started (and still run)."""
    from distributed import Client

    with Client(address) as client:  # type: ignore[no-untyped-call]
        found: dict[str, set[int]] = client.run(_servers_started)
    return set().union(*found.values())


def task_runs_of(flow_run_id: UUID, expected: int) -> list[tuple[str, str]]:
    """The task runs of a flow run on the Prefect server of the settings (name without its
    suffix, state), once `expected` of them are final: the server records a task run from the
    events its process sends, a moment after the flow run returned."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    deadline = time.monotonic() + 60
    with get_client(sync_client=True) as client:
        while True:
            runs = client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
            )
            found = sorted(
                (r.name.rsplit("-", 1)[0], str(r.state_type.value if r.state_type else None)) for r in runs
            )
            final = sum(state in ("COMPLETED", "FAILED", "CRASHED") for _, state in found)
            if final >= expected or time.monotonic() > deadline:
                return found
            time.sleep(0.2)


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
    summaries, flow_runs = [], []
    for batch in (simulate(150, seed=5), simulate(12, seed=6)):  # a full run, then new runs placed
        for s in (here, there):
            store_trajectories(store_from(s), batch, s.scrub)
        expected = run_induction(store_from(here), here, RuleInducer(), namespace=here.namespace).summary()
        state = induce_flow(db=there.db, return_state=True)
        ran = state.result()  # the flow's `RunSummary`
        assert ran.model_dump(exclude={"run", "tag"}) == expected.model_dump(exclude={"run", "tag"})
        summaries.append(ran)
        assert state.state_details.flow_run_id is not None
        flow_runs.append(state.state_details.flow_run_id)
    full, placed = summaries
    assert full.refit and full.versions_created > 5
    assert placed.refit is None and 0 < placed.clusters_changed < placed.clusters
    assert placed.versions_created > 0  # new versions (2, ...) of workflows of the first run
    assert committed(there.db) == committed(here.db)
    # Every plan and induction ran in the two other processes, each taking some; commits ran here.
    tasks = tasks_run(scheduler)
    assert len(tasks.keys() - {os.getpid()}) == 2 and min(tasks.values()) > 0
    assert sum(tasks.values()) == sum(1 + math.ceil(s.clusters_changed / 3) for s in summaries)
    # The task runs on the workers reported to the flow's Prefect server (the harness's), which
    # the workers learnt of from the settings each task brought; none started a server of its own.
    for summary, flow_run in zip(summaries, flow_runs, strict=True):
        batches = math.ceil(summary.clusters_changed / 3)
        expected_runs = sorted(
            [("commit", "COMPLETED"), ("plan_run", "COMPLETED")] + [("induce_batch", "COMPLETED")] * batches
        )
        assert task_runs_of(flow_run, len(expected_runs)) == expected_runs
    assert servers_started(scheduler) == set()


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


def watched(command: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str, set[int], set[int]]:
    """Run `command` to its end, looking at the processes it starts every 0.1 s: its exit code,
    stdout and stderr, the Prefect servers it started (and its processes theirs), and every
    process it started."""
    with (cwd / "stdout").open("w+") as out, (cwd / "stderr").open("w+") as err:
        process = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=err, text=True)
        servers: set[int] = set()
        started: set[int] = set()
        deadline = time.monotonic() + READY_LIMIT
        while process.poll() is None and time.monotonic() < deadline:
            servers |= prefect_servers(process.pid)
            started |= set(descendants(process.pid))
            time.sleep(0.1)
        if process.poll() is None:
            process.kill()
        code = process.wait()
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read(), servers, started


def running(processes: set[int], within: float) -> set[int]:
    """Those of `processes` still running after up to `within` seconds."""
    deadline = time.monotonic() + within
    while (alive := {p for p in processes if Path(f"/proc/{p}").exists()}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


@pytest.mark.slow
def test_flowmem_run_on_a_local_cluster_prints_json_only_and_its_workers_report_to_the_flows_server(
    tmp_path: Path, prefect_database: Path
) -> None:
    """`FLOWMEM_DASK_ADDRESS=local:2 flowmem run induce --json` with no Prefect server
    configured (issue 39): the flow's process starts Prefect's temporary server and the two
    workers, whose task runs report there (they start no server of their own); stdout is the
    JSON, stderr empty (nor INFO lines, nor a nanny killing a worker that did not exit in time:
    `--json` shows warnings), and nothing it started outlives it."""
    import sqlite3

    settings = Settings(db=str(tmp_path / "db"))
    store_trajectories(store_from(settings), simulate(60, seed=5), settings.scrub)
    home = tmp_path / "prefect"
    seed_database(prefect_database, home)  # the temporary server's, migrated once for the session
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "FLOWMEM_", "DASK_"))}
    env |= {
        "PREFECT_HOME": str(home),
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "FLOWMEM_DB": settings.db,
        "FLOWMEM_DASK_ADDRESS": "local:2",
        "FLOWMEM_INDUCE_BATCH": "3",  # a few clusters per task: tasks for both workers
        "LANCEDB_LOG": "error",
    }
    command = [sys.executable, "-m", "flowmem.cli", "run", "induce", "--json"]
    code, stdout, stderr, servers, started = watched(command, env, tmp_path)
    assert (code, SLOW_SCRATCH.sub("", stderr)) == (0, ""), stderr[-3000:]
    [line] = stdout.splitlines()
    summary = json.loads(line)
    assert summary["versions_created"] > 0 and summary["clusters_changed"] > 3
    assert len(servers) == 1  # the flow's own temporary server, no worker's
    assert running(started, within=10) == set()  # multiprocessing's resource tracker takes a moment
    with sqlite3.connect(home / "prefect.db") as db:
        tasks = db.execute("SELECT id, name, state_type FROM task_run").fetchall()
        logged = {row[0] for row in db.execute("SELECT task_run_id FROM log WHERE task_run_id IS NOT NULL")}
    batches = math.ceil(summary["clusters_changed"] / 3)
    assert sorted((name.rsplit("-", 1)[0], state) for _, name, state in tasks) == sorted(
        [("commit", "COMPLETED"), ("plan_run", "COMPLETED")] + [("induce_batch", "COMPLETED")] * batches
    )
    assert logged == {task_run for task_run, _, _ in tasks}  # every task run's log, the workers' too
