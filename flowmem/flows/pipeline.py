"""The scheduled flows: collect → induce → learn, cycle (all three), and maintain.

Thin Prefect tasks around the use cases of `flowmem.jobs` (collect, induce, learn); each flow
reads top to bottom like the pipeline it runs. Flows take only plain parameters (a store URI
and a namespace override), build one `Settings`, and pass it down. The flow of `<name>` is
`<name>_flow` (apart from the job it runs), registered in Prefect as `flowmem-<name>`.

Each flow returns its job's frozen model (`Collected`, `RunSummary`, `Learned`, `CycleSummary`,
`Maintained`): the object `flowmem run` prints as JSON and the demo's engine reads. Prefect keeps
a result in memory unless persisting is asked for (`PREFECT_RESULTS_PERSIST_BY_DEFAULT`); a
persisted one is pickled, by Prefect's default serializer.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Generic, TypeVar, cast

from prefect import Task, flow, task, unmapped
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from prefect.client.orchestration import get_client
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectNotFound
from prefect.futures import PrefectFuture

from flowmem.flows.runners import task_runner
from flowmem.induction.base import ClusterInput, Inducer, Usage
from flowmem.induction.plan.bounded import ClusterMembers
from flowmem.induction.plan.orchestrate import ClusterOutcome, induce_cluster
from flowmem.jobs.collect import Collected, collect
from flowmem.jobs.cycle import CycleSummary
from flowmem.jobs.factories import inducer_from, store_from
from flowmem.jobs.induce import (
    RunPlan,
    RunReport,
    RunSummary,
    cluster_input,
    commit_outcomes,
    induce_all,
    prepare_run,
)
from flowmem.jobs.learn import Learned, learn
from flowmem.jobs.maintain import Maintained, maintain
from flowmem.settings import Settings

__all__ = ["collect_flow", "cycle_flow", "induce_flow", "learn_flow", "maintain_flow"]

T = TypeVar("T")

LLM_LIMIT = "flowmem-llm"
"""Global concurrency limit on LLM calls (create it with `prefect gcl create flowmem-llm --limit N`).
Looked up once per run: without it, LLM calls do not wait for a slot."""

RETRY_DELAYS: tuple[float, ...] = (1, 10)
"""Seconds before each further attempt at a cluster whose LLM induction failed: three in all.
A cluster still failing after them is reported and induced again by the next run."""


class Parcel(Generic[T]):
    """A value handed to a task whole. Prefect walks every list, dict, dataclass and model in
    a task's parameters looking for futures: for a 10k run's clusters and plan that took
    longer than inducing them (11 s in `commit` alone). It does not open a plain object.
    (Prefect's own `quote` is a namedtuple, which Dask's task runner takes apart.)"""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value


def _settings(db: str | None, namespace: str | None) -> Settings:
    overrides = {k: v for k, v in {"db": db, "namespace": namespace}.items() if v is not None}
    return Settings(**overrides)  # type: ignore[arg-type]


@task(cache_policy=NONE)
def collect_files(settings: Settings) -> Collected:
    """Ingest the spool and the import paths."""
    return collect(store_from(settings), settings)


@task(cache_policy=NONE)
def plan_run(settings: Settings, force: bool) -> RunPlan:
    """Count what is new, refit the clusters, pick the changed ones."""
    return prepare_run(store_from(settings), settings, namespace=settings.namespace, force=force)


# No task timeout: these run in worker threads, where Prefect cannot interrupt them; the LLM
# client bounds each request with its own timeout and retries. Prefect's retries are for the
# task itself failing (a cluster that fails is an outcome, attempted again in `_attempts`).
@task(cache_policy=NONE, retries=2, retry_delay_seconds=[1, 10])
def induce_batch(
    clusters: Parcel[list[ClusterInput | ClusterMembers]],
    settings: Settings,
    kind: str,
    limited: bool = False,
) -> list[ClusterOutcome]:
    """Induce some clusters; a cluster that fails is reported in its outcome, not raised. With
    the LLM inducer a batch is one cluster, attempted again after a failure (`RETRY_DELAYS`),
    each attempt waiting for the global concurrency limit when the run found one (`limited`)."""
    inducer, store = inducer_from(kind, settings), store_from(settings)
    if kind != "llm":  # clusters planned as their members' ids are read here
        return induce_all(store, clusters.value, inducer)
    return [_attempts(cluster_input(store, c), inducer, limited) for c in clusters.value]


def _attempts(cluster: ClusterInput, inducer: Inducer, limited: bool) -> ClusterOutcome:
    """The outcome of the first attempt that succeeds, or of the last one, with the LLM usage
    of every attempt added up."""
    spent = Usage()
    for delay in (0, *RETRY_DELAYS):
        time.sleep(delay)
        with _slot(limited):
            outcome = induce_cluster(cluster, inducer)
        spent += outcome.usage
        if outcome.error is None:
            break
    outcome.usage = spent
    return outcome


def _slot(limited: bool) -> AbstractContextManager[None]:
    """A slot of `LLM_LIMIT` held while it lasts, or nothing to wait for."""
    return concurrency(LLM_LIMIT, occupy=1, strict=False) if limited else nullcontext()


def _llm_limit_exists() -> bool:
    """Whether the global concurrency limit `LLM_LIMIT` exists, asked once per run: asking
    Prefect for a slot of a limit that does not exist took up to ~2 s per task on a SQLite
    server (two tasks at once), each time to learn that there is nothing to wait for."""
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(LLM_LIMIT)
        except ObjectNotFound:
            return False
    return True


def batches(
    clusters: list[ClusterInput | ClusterMembers], kind: str, size: int
) -> list[list[ClusterInput | ClusterMembers]]:
    """One cluster per task for the LLM inducer (slow calls: concurrency and retries per
    cluster); batches of `size` for the rule inducer, whose milliseconds per cluster would
    drown in Prefect's per-task overhead."""
    step = 1 if kind == "llm" else max(1, size)
    return [clusters[i : i + step] for i in range(0, len(clusters), step)]


@task(cache_policy=NONE)
def commit(settings: Settings, plan: Parcel[RunPlan], outcomes: Parcel[list[ClusterOutcome]]) -> RunReport:
    """Version what changed and commit the whole run at once (one tag)."""
    return commit_outcomes(store_from(settings), plan.value, outcomes.value)


@task(cache_policy=NONE)
def fold_outcomes(settings: Settings) -> Learned:
    """Recompute each served version's stats from the stored outcomes; promote and demote."""
    return learn(store_from(settings), namespace=settings.namespace)


@task(cache_policy=NONE)
def maintain_store(settings: Settings) -> Maintained:
    """Compact and prune every table, keeping what run tags and rollbacks need."""
    return maintain(store_from(settings)).summary()


def _gather(
    groups: list[list[ClusterInput | ClusterMembers]], futures: list[PrefectFuture[list[ClusterOutcome]]]
) -> list[ClusterOutcome]:
    """Every cluster's outcome (a failed cluster is induced again next run); a task that
    itself failed, after its retries, reports its clusters failed, with no LLM usage known."""
    outcomes = []
    for group, future in zip(groups, futures, strict=True):
        try:
            outcomes += future.result()
        except Exception as err:
            for cluster in group:
                key = cluster.key
                outcomes.append(
                    ClusterOutcome(key, error=f"{type(err).__name__}: {err}", reason=type(err).__name__)
                )
    return outcomes


def _clustering(summary: RunSummary) -> str:
    if summary.skipped:
        return "nothing new: no run"
    return f"refit: {summary.refit}" if summary.refit else "new tasks placed in the stored clusters"


def _artifact(report: RunReport, timings: dict[str, float]) -> None:
    s = report.summary()
    rows = [
        ("new trajectories", s.new_trajectories),
        ("clusters changed / all", f"{s.clusters_changed} / {s.clusters}"),
        ("clusters waiting for more runs", s.clusters_deferred),
        ("clustering", _clustering(s)),
        ("workflows created", s.new_workflows),
        ("new versions", s.versions_created),
        ("workflows retired", len(s.retired)),
        ("failed clusters", ", ".join(s.failed_clusters) or "none"),
        ("LLM calls / retries / tokens", f"{s.llm_calls} / {s.llm_retries} / {s.llm_tokens}"),
        ("LLM outputs rejected", ", ".join(f"{k}: {n}" for k, n in s.llm_rejected.items()) or "none"),
        ("tag", s.tag),
        *((f"time: {k}", f"{v:.2f} s") for k, v in timings.items()),
    ]
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    create_markdown_artifact(
        f"# flowmem induction run\n\n| | |\n|---|---|\n{table}\n",
        key="flowmem-induce",
        description="Clusters changed, versions created, LLM usage, time per stage.",
    )


@flow(name="flowmem-collect", log_prints=True)
def collect_flow(db: str | None = None, namespace: str | None = None) -> Collected:
    """Bring new trajectories in from the spool directory and the import paths."""
    return collect_files(_settings(db, namespace))


@flow(name="flowmem-induce", log_prints=True)
def induce_flow(
    db: str | None = None, namespace: str | None = None, inducer: str = "rule", force: bool = False
) -> RunSummary:
    """Incremental induction: only clusters whose runs changed are induced, one task each. The
    plan and the inductions run on the Dask cluster of `FLOWMEM_DASK_ADDRESS` when one is set
    (`flows/runners.py`); the commit runs here."""
    return _induce(_settings(db, namespace), inducer, force)


def _induce(settings: Settings, inducer: str, force: bool) -> RunSummary:
    """The induce flow's tasks, in the flow run that calls this (induce's own, or cycle's)."""
    timings: dict[str, float] = {}
    with task_runner(settings) as runner:  # on the Dask cluster of `settings.dask_address`, if any
        start = time.perf_counter()
        plan = runner.submit(plan_run, {"settings": settings, "force": force}).result()
        timings["plan"] = time.perf_counter() - start
        start = time.perf_counter()
        groups = batches(list(plan.changed), inducer, settings.induce_batch)
        parameters = {
            "clusters": [Parcel(g) for g in groups],
            "settings": unmapped(settings),
            "kind": inducer,
            "limited": inducer == "llm" and bool(groups) and _llm_limit_exists(),
        }
        # `TaskRunner.map` is typed for a task returning `R | Coroutine[..., R]`; ours is sync.
        futures = runner.map(cast(Task[..., Any], induce_batch), parameters) if groups else []
        outcomes = _gather(groups, list(futures))
        timings["induce"] = time.perf_counter() - start
    start = time.perf_counter()
    report = commit(settings, Parcel(plan), Parcel(outcomes))
    timings["commit"] = time.perf_counter() - start
    _artifact(report, timings)
    return report.summary()


@flow(name="flowmem-learn", log_prints=True)
def learn_flow(db: str | None = None, namespace: str | None = None) -> Learned:
    """Fold reported outcomes into per-version stats; promote and demote versions."""
    return fold_outcomes(_settings(db, namespace))


@flow(name="flowmem-cycle", log_prints=True)
def cycle_flow(db: str | None = None, namespace: str | None = None, inducer: str = "rule") -> CycleSummary:
    """collect → induce → learn: what a schedule normally runs. One flow run whose tasks are
    those of the three flows: a subflow run for each, wrapping them, cost more API round trips
    than collect or learn take on the demo's store."""
    settings = _settings(db, namespace)
    return CycleSummary(
        collect=collect_files(settings),
        induce=_induce(settings, inducer, force=False),
        learn=fold_outcomes(settings),
    )


@flow(name="flowmem-maintain", log_prints=True)
def maintain_flow(db: str | None = None) -> Maintained:
    """Compact every table's files, prune old table versions (never one a run tag or a
    rollback needs), check out every run tag: keeps a store that takes many small writes fast."""
    return maintain_store(_settings(db, None))
