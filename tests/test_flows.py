"""The Prefect flows, run for real under a temporary Prefect server (prefect_test_harness)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowmem.demo import simulate
from flowmem.induction.base import ClusterInput, Induced, LLMError, Usage
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.interchange import write_spool_file
from flowmem.jobs.collect import Collected
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Workflow
from flowmem.settings import Settings
from tests.factories import WORKBENCH, cancel, forward, make_workflow
from tests.prefect_servers import seed_database
from tests.processes import READY_LIMIT

# End to end: Prefect flows on the harness's server, deployments, `flowmem serve`; with the other
# modules of the harness's server (and of the migrated Prefect database), in one xdist_group.
pytestmark = [
    pytest.mark.usefixtures("prefect_harness"),
    pytest.mark.slow,
    pytest.mark.xdist_group("prefect"),
]
ROOT = Path(__file__).resolve().parents[1]


class CountingInducer(RuleInducer):
    """The rule inducer standing in for an LLM inducer: each cluster costs one call, counted
    in its usage and in `total` (over all instances)."""

    kind = "llm"
    total = 0

    def induce(self, cluster: ClusterInput) -> Induced:
        CountingInducer.total += 1
        return Induced(super().induce(cluster).workflows, Usage(calls=1))


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> type[CountingInducer]:
    from flowmem.flows import pipeline

    CountingInducer.total = 0
    monkeypatch.setattr(pipeline, "inducer_from", lambda kind, settings: CountingInducer())
    return CountingInducer


def test_collect_is_idempotent_and_quarantines_bad_lines(settings: Settings) -> None:
    from flowmem.flows.pipeline import collect_flow

    runs = simulate(20, seed=3)
    write_spool_file(settings.spool_path, runs[:10])
    bad = settings.spool_path / "bad.jsonl"
    bad.write_text('{"task": "ok task", "steps": []}\n{broken\n{"steps": []}\n')
    (settings.spool_path / "partial.jsonl.tmp").write_text("{still being written")
    first = collect_flow(db=settings.db)
    assert first == Collected(files=2, stored=11, duplicates=0, rejected=2, failed_files=[])
    assert sorted(p.name for p in (settings.spool_path / "done").iterdir())[-1] == "bad.jsonl"
    assert (settings.spool_path / "partial.jsonl.tmp").exists()  # incomplete files wait
    assert collect_flow(db=settings.db).stored == 0
    write_spool_file(settings.spool_path, runs)  # the same runs again, and ten new ones
    again = collect_flow(db=settings.db)
    assert (again.stored, again.duplicates) == (len(runs) - 10, 10)
    assert store_from(settings).count_trajectories() == len(runs) + 1


@pytest.mark.skipif(not WORKBENCH.exists(), reason="shared WorkBench data not present")
def test_induce_on_workbench_creates_then_skips_then_reinduces_one_cluster(
    settings: Settings, tmp_path: Path
) -> None:
    import gzip

    from flowmem.flows.pipeline import induce_flow
    from flowmem.jobs.ingest import ingest_files

    # The email and calendar runs: 20 of the 69 task templates, a third of the runs.
    with gzip.open(WORKBENCH, "rt", encoding="utf-8") as fh:
        lines = [line for line in fh if json.loads(line)["group"].startswith(("email/", "calendar/"))]
    part = tmp_path / "email_calendar.jsonl"
    part.write_text("".join(lines))
    store = store_from(settings)
    ingest_files([part], store, settings)
    first = induce_flow(db=settings.db)
    assert first.new_trajectories == len(lines) == 1325
    assert first.clusters_changed == first.clusters >= 20
    assert first.versions_created == len(store.list_workflows()) > 20  # repeats folded: fewer near-duplicates
    second = induce_flow(db=settings.db)
    assert second.skipped and second.versions_created == 0 and second.llm_calls == 0
    # Re-runs of one existing task land in its cluster: only that cluster is induced again.
    task = next(t for t in store.list_trajectories(limit=None) if t.group == "email/t05")
    rerun = [task.model_copy(update={"id": f"{task.id}/rerun{i}", "success": False}) for i in range(3)]
    store_trajectories(store, rerun, settings.scrub)
    third = induce_flow(db=settings.db)
    assert third.clusters_changed == 1 and third.new_trajectories == 3


def test_llm_induction_calls_per_changed_cluster_only(
    settings: Settings, counting: type[CountingInducer]
) -> None:
    from flowmem.flows.pipeline import induce_flow

    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub)
    first = induce_flow(db=settings.db, inducer="llm")
    assert counting.total == first.llm_calls == first.clusters_changed == 2
    assert first.versions_created == 2
    second = induce_flow(db=settings.db, inducer="llm")
    assert counting.total == 2 and second.llm_calls == 0 and second.versions_created == 0
    store_trajectories(store, [forward(i, skip_lookup=True, success=False) for i in range(4)], settings.scrub)
    third = induce_flow(db=settings.db, inducer="llm")
    assert counting.total == 3 and third.llm_calls == 1 and third.clusters_changed == 1
    assert third.versions_created == 1  # the forwarding workflow learnt its pitfalls
    assert "| clusters changed / all | 1 / 2 |" in _latest_artifact("flowmem-induce")


class SlotReading(RuleInducer):
    """An LLM inducer stand-in that notes, at each call, the slots of `LLM_LIMIT` held (None:
    no such limit)."""

    kind = "llm"
    held: list[int | None] = []

    def induce(self, cluster: ClusterInput) -> Induced:
        from prefect.client.orchestration import get_client
        from prefect.exceptions import ObjectNotFound

        from flowmem.flows.pipeline import LLM_LIMIT

        with get_client(sync_client=True) as client:
            try:
                SlotReading.held.append(client.read_global_concurrency_limit_by_name(LLM_LIMIT).active_slots)
            except ObjectNotFound:
                SlotReading.held.append(None)
        return Induced(super().induce(cluster).workflows, Usage(calls=1))


def test_llm_calls_hold_a_slot_of_the_global_limit_only_when_it_exists(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    from flowmem.flows import pipeline

    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub)
    monkeypatch.setattr(pipeline, "inducer_from", lambda kind, settings: SlotReading())
    SlotReading.held = []
    assert pipeline.induce_flow(db=settings.db, inducer="llm").llm_calls == 2
    assert "do not exist" not in capfd.readouterr().err  # no limit: nothing asked for, nothing warned
    store_trajectories(store, [forward(i, skip_lookup=True, success=False) for i in range(4)], settings.scrub)
    with get_client(sync_client=True) as client:
        client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=pipeline.LLM_LIMIT, limit=1))
        try:
            assert pipeline.induce_flow(db=settings.db, inducer="llm").llm_calls == 1
        finally:  # the harness's server is the whole worker's
            client.delete_global_concurrency_limit_by_name(pipeline.LLM_LIMIT)
    assert SlotReading.held == [None, None, 1]


def _latest_artifact(key: str) -> str:
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    async def read() -> str:
        async with get_client() as client:
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
                sort=ArtifactSort.CREATED_DESC,
                limit=1,
            )
            return str(found[0].data)

    return asyncio.run(read())


def test_a_failing_cluster_is_reported_and_retried_next_run(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowmem.flows import pipeline

    class Down(RuleInducer):
        def induce(self, cluster: ClusterInput) -> Induced:
            if "Forward" in cluster.successes[0].task:
                raise ConnectionError("LLM endpoint unreachable")
            return super().induce(cluster)

    store_trajectories(
        store_from(settings), [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub
    )
    monkeypatch.setattr(pipeline, "inducer_from", lambda kind, settings: Down())
    monkeypatch.setattr(pipeline, "RETRY_DELAYS", (0, 0))
    broken = pipeline.induce_flow(db=settings.db, inducer="llm")
    assert list(broken.failed_clusters) == ["agent-c0"] or len(broken.failed_clusters) == 1
    assert broken.versions_created == 1  # the healthy cluster still lands
    monkeypatch.setattr(pipeline, "inducer_from", lambda kind, settings: RuleInducer())
    healed = pipeline.induce_flow(db=settings.db, inducer="llm")
    assert healed.clusters_changed == 1 and healed.versions_created == 1 and not healed.failed_clusters


class Rejecting(RuleInducer):
    """An LLM inducer stand-in: each attempt at a cluster makes two calls (a retry after a leaky
    answer); the forwarding cluster's next `failures` attempts end with no valid workflow."""

    kind = "llm"
    failures = 0

    def induce(self, cluster: ClusterInput) -> Induced:
        usage = Usage(calls=2, retries=1, rejected={"leak": 1})
        if "Forward" in cluster.successes[0].task and Rejecting.failures > 0:
            Rejecting.failures -= 1
            usage += Usage(rejected={"invented_tool": 1})
            raise LLMError("no valid workflow after a retry", reason="rejected", usage=usage)
        return Induced(super().induce(cluster).workflows, usage)


def test_llm_usage_of_failed_and_retried_clusters_reaches_the_report(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowmem.flows import pipeline

    store_trajectories(
        store_from(settings), [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub
    )
    monkeypatch.setattr(pipeline, "inducer_from", lambda kind, settings: Rejecting())
    monkeypatch.setattr(pipeline, "RETRY_DELAYS", (0, 0))
    Rejecting.failures = 3  # the task's three attempts all fail
    broken = pipeline.induce_flow(db=settings.db, inducer="llm")
    assert list(broken.failed_clusters.values()) == ["LLMError: no valid workflow after a retry"]
    assert (broken.llm_calls, broken.llm_retries) == (3 * 2 + 2, 3 + 1)
    assert broken.llm_rejected == {"invented_tool": 3, "leak": 4}
    Rejecting.failures = 1  # next run: the task's second attempt succeeds
    healed = pipeline.induce_flow(db=settings.db, inducer="llm")
    assert healed.clusters_changed == 1 and not healed.failed_clusters
    assert (healed.llm_calls, healed.llm_retries, healed.llm_rejected) == (
        4,
        2,
        {"invented_tool": 1, "leak": 2},
    )
    artifact = _latest_artifact("flowmem-induce")
    assert "| LLM calls / retries / tokens | 4 / 2 / 0 |" in artifact
    assert "| LLM outputs rejected | invented_tool: 1, leak: 2 |" in artifact


def test_a_crashing_task_is_retried_by_prefect_then_reported(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowmem.flows import pipeline

    built: list[str] = []

    def crash(kind: str, settings: Settings) -> RuleInducer:
        built.append(kind)
        raise ValueError("no LLM configured")

    store_trajectories(
        store_from(settings), [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub
    )
    monkeypatch.setattr(pipeline, "inducer_from", crash)
    monkeypatch.setattr(pipeline.induce_batch, "retry_delay_seconds", [0, 0])
    broken = pipeline.induce_flow(db=settings.db, inducer="llm")
    assert len(built) == 2 * 3  # each cluster's task, run again twice by Prefect
    assert set(broken.failed_clusters.values()) == {"ValueError: no LLM configured"}
    assert (broken.clusters_changed, broken.llm_calls, broken.versions_created) == (2, 0, 0)


def _workflows(settings: Settings) -> list[dict[str, Any]]:
    return [w.model_dump(exclude={"created_at", "provenance"}) for w in store_from(settings).list_workflows()]


def test_dask_task_runner_gives_the_same_workflows(tmp_path: Path) -> None:
    from prefect_dask.task_runners import DaskTaskRunner

    from flowmem.flows.pipeline import induce_flow

    runs = simulate(150, seed=5)
    plain, dask = (Settings(db=str(tmp_path / name / "db")) for name in ("plain", "dask"))
    for s in (plain, dask):
        store_trajectories(store_from(s), runs, s.scrub)
    induce_flow(db=plain.db)
    runner = DaskTaskRunner(
        cluster_kwargs={
            "n_workers": 1,
            "threads_per_worker": 2,
            "processes": False,
            "dashboard_address": None,
        }
    )
    # prefect-dask types its runner over its own future type, not PrefectFuture[Any].
    result = induce_flow.with_options(task_runner=runner)(db=dask.db)  # type: ignore[arg-type]
    assert result.versions_created > 5
    assert _workflows(plain) == _workflows(dask)


def test_the_flow_gives_the_same_workflows_and_runs_as_the_cli_job(tmp_path: Path) -> None:
    from flowmem.flows.pipeline import induce_flow
    from flowmem.jobs.induce import run_induction

    cli, flow = (Settings(db=str(tmp_path / name / "db")) for name in ("cli", "flow"))
    for batch in (simulate(150, seed=5), simulate(3, seed=6)):  # a full run, then an incremental one
        for s in (cli, flow):
            store_trajectories(store_from(s), batch, s.scrub)
        job = run_induction(store_from(cli), cli, RuleInducer(), namespace=cli.namespace).summary()
        ran = induce_flow(db=flow.db)
        assert ran.model_dump(exclude={"run", "tag"}) == job.model_dump(exclude={"run", "tag"})
        assert _workflows(cli) == _workflows(flow)
    assert ran.refit is None and ran.clusters_changed < ran.clusters


def test_learn_folds_outcomes_into_version_stats(settings: Settings) -> None:
    from flowmem.flows.pipeline import learn_flow
    from flowmem.models import WorkflowRef

    store = store_from(settings)
    store.put_workflow(forward_workflow := _one_workflow())
    used = [WorkflowRef(id=forward_workflow.id, version=1)]
    store_trajectories(
        store,
        [
            forward(i).model_copy(update={"id": f"u{i}", "workflows_used": used, "success": i % 3 != 0})
            for i in range(6)
        ],
        settings.scrub,
    )
    learnt = learn_flow(db=settings.db)
    assert (learnt.versions_with_outcomes, learnt.runs_served) == (1, 6)
    assert [(t.version, t.new) for t in learnt.transitions] == [(1, "active")]
    [w] = store.list_workflows()
    assert (w.stats.served, w.stats.successes, w.stats.failures) == (6, 4, 2) and w.status == "active"


def _one_workflow() -> Workflow:

    return make_workflow()


def test_prefect_yaml_declares_the_served_deployments() -> None:
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flows import load_flow_from_entrypoint

    from flowmem.flows.serve import DEPLOYMENTS

    spec = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    declared = {d["name"]: d for d in spec["deployments"]}
    assert set(declared) == {d.name for d in DEPLOYMENTS}
    for d in DEPLOYMENTS:
        entry = declared[d.name]
        assert entry["entrypoint"] == d.entrypoint
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            assert load_flow_from_entrypoint(entry["entrypoint"]).name == f"flowmem-{d.name}"
        finally:
            os.chdir(cwd)
        [schedule] = entry["schedules"]
        assert CronSchedule(cron=schedule["cron"]).cron == d.cron
        assert schedule.get("active", True) == d.active
        assert entry["parameters"] == d.parameters
        assert entry["work_pool"]["name"] == "flowmem-pool"


class ServeUntilCollected:
    """`flowmem serve --interval 5 --only collect` with no Prefect server configured (it starts
    its own local one), on a spool of ten runs, started now; a thread of its own sends it
    SIGINT (Ctrl-C) once a scheduled collect has stored the runs."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.settings = Settings(db=str(tmp_path / "db"))
        self.runs = simulate(10, seed=6)
        write_spool_file(self.settings.spool_path, self.runs)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
        env |= {
            "PREFECT_HOME": str(tmp_path / "prefect"),
            "FLOWMEM_DB": self.settings.db,
            # Quick turns, not the production pace: the server schedules every second, and the
            # runner looks for due runs every second (not 10) and starts a run only once it is due.
            "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "1",
            "PREFECT_RUNNER_POLL_FREQUENCY": "1",
            "PREFECT_RUNNER_PREFETCH_SECONDS": "0",
            # One flow run's process at a time (Prefect's default is 5): a run's process takes
            # longer than the 5 s interval to start on a loaded machine, and the runs due
            # meanwhile each started an interpreter of their own (~5 s of CPU each) that the
            # test never waits for.
            "PREFECT_RUNNER_PROCESS_LIMIT": "1",
        }
        command = [sys.executable, "-m", "flowmem.cli", "serve", "--interval", "5", "--only", "collect"]
        with (tmp_path / "output").open("w") as out:
            self.process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        self.failure = ""
        """Why no SIGINT was sent (empty once it was)."""
        self.thread = threading.Thread(target=self._interrupt_once_collected, daemon=True)
        self.thread.start()

    def _interrupt_once_collected(self) -> None:
        try:
            deadline = time.monotonic() + READY_LIMIT
            while store_from(self.settings).count_trajectories() < len(self.runs):  # a scheduled collect ran
                if self.process.poll() is not None or time.monotonic() >= deadline:
                    self.failure = "no scheduled run"
                    return
                time.sleep(0.5)
            self.process.send_signal(signal.SIGINT)
        except BaseException as error:  # reported by the test, not lost in this thread
            self.failure = repr(error)

    def result(self) -> tuple[int, str]:
        """Wait for it to end: its exit code and output."""
        self.thread.join(READY_LIMIT)
        try:
            assert not self.failure, f"{self.failure}: {(self.tmp_path / 'output').read_text()[-3000:]}"
            code = self.process.wait(timeout=READY_LIMIT)
        finally:
            self.stop()
        return code, (self.tmp_path / "output").read_text()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def serve_schedule(
    tmp_path: Path, prefect_harness: None, prefect_database: Path
) -> Iterator[ServeUntilCollected]:
    """`ServeUntilCollected` in the environment the flow tests have (`prefect_harness`), its
    own local server's PREFECT_HOME on a copy of the session's migrated database."""
    seed_database(prefect_database, tmp_path / "prefect")
    serving = ServeUntilCollected(tmp_path)
    yield serving
    serving.stop()


def test_serve_fires_its_schedule_and_stops_on_ctrl_c(serve_schedule: ServeUntilCollected) -> None:
    code, output = serve_schedule.result()
    assert code == 0, output[-3000:]
    assert "flowmem serve stopped" in output


def test_prefect_deploy_accepts_the_yaml(tmp_path: Path) -> None:
    """`prefect deploy --all` from the repo root, against the test server, with a process pool."""
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env["PREFECT_API_URL"] = str(PREFECT_API_URL.value())
    prefect = [sys.executable, "-m", "prefect", "--no-prompt"]

    def run(*args: str) -> str:
        done = subprocess.run(
            [*prefect, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=READY_LIMIT
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    # The pool as `prefect work-pool create flowmem-pool --type process --overwrite` makes it
    # (the process worker's default job template), and the deployments read back, through the
    # client: no CLI process to start for either (~3 s each).
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    template = ProcessWorker.get_default_base_job_template()
    with get_client(sync_client=True) as client:
        pool = WorkPoolCreate(name="flowmem-pool", type="process", base_job_template=template)
        client.create_work_pool(pool, overwrite=True)
    run("deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
    with get_client(sync_client=True) as client:
        for name in ("collect", "induce", "learn", "cycle"):
            deployed = client.read_deployment_by_name(f"flowmem-{name}/{name}")
            assert deployed.work_pool_name == "flowmem-pool"


def _recorded(db: str, since: float) -> list[tuple[str, set[str], set[str]]]:
    """Every flow run on the current Prefect API whose `db` parameter is `db`, in the order
    they started, once its task runs and its events are stored (the server records both from
    the events the flow run sends, a little after it ends): (flow name, names of its Completed
    task runs, names of the events about it)."""
    from datetime import UTC, datetime

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from prefect.events.filters import EventAnyResourceFilter, EventFilter, EventOccurredFilter

    start = datetime.fromtimestamp(since, UTC)
    deadline = time.monotonic() + READY_LIMIT
    with get_client(sync_client=True) as client:
        while True:
            runs = [r for r in client.read_flow_runs(limit=200) if r.parameters.get("db") == db]
            flows = {f.id: f.name for f in client.read_flows(limit=200)}
            found = []
            for run in sorted(runs, key=lambda r: str(r.start_time)):
                ids = FlowRunFilter(id=FlowRunFilterId(any_=[run.id]))
                tasks = client.read_task_runs(flow_run_filter=ids)
                done = {
                    t.name.rsplit("-", 1)[0] for t in tasks if t.state is not None and t.state.is_completed()
                }
                about = EventAnyResourceFilter(id=[f"prefect.flow-run.{run.id}"])
                page = client.read_events(
                    EventFilter(occurred=EventOccurredFilter(since=start), any_resource=about), 50
                )
                found.append((flows[run.flow_id], done, {e.event for e in page.events}))
            if (runs and all(done and "prefect.flow-run.Completed" in names for _, done, names in found)) or (
                time.monotonic() > deadline
            ):
                return found
            time.sleep(0.5)


def test_the_demo_engine_runs_one_flow_run_per_cycle_with_its_tasks_and_no_heartbeat(
    settings: Settings,
) -> None:
    """The demo's Prefect engine on the configured server: each cycle is one flow run of
    `flowmem-cycle` whose task runs are collect's, induce's and learn's (no subflow run for
    each), and it sends no heartbeat (a flow run's end waits up to 1 s for its heartbeat
    thread)."""
    from flowmem.flows.engine import prefect_cycle
    from flowmem.jobs.cycle import cycle

    engine = prefect_cycle()
    assert engine.server is None  # the harness's server is the configured one
    since = time.time()
    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub)
    first = engine(store, settings)
    assert first.induce.versions_created == 2
    assert engine(store, settings).induce.new_trajectories == 0
    runs = _recorded(settings.db, since)
    assert [name for name, _, _ in runs] == ["flowmem-cycle", "flowmem-cycle"]
    tasks = {"collect_files", "plan_run", "induce_batch", "commit", "fold_outcomes"}
    assert [done for _, done, _ in runs] == [tasks, tasks - {"induce_batch"}]  # nothing new to induce
    for _, _, events in runs:
        assert "prefect.flow-run.Completed" in events and "prefect.flow-run.heartbeat" not in events
    # The same cycle without Prefect gives the same figures on a copy of the store.
    other = Settings(db=settings.db + "-direct")
    store_trajectories(
        store_from(other), [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], other.scrub
    )
    direct = cycle(store_from(other), other)
    assert direct.induce.model_dump(exclude={"run", "tag"}) == first.induce.model_dump(exclude={"run", "tag"})
