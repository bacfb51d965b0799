"""The scheduled flows: collect → induce → learn, and cycle (all three).

Thin Prefect tasks around the pure functions of `flowmem.spool`, `flowmem.runner` and
`flowmem.learning`; each flow reads top to bottom like the pipeline it runs. Flows take only
plain parameters (a store URI and a namespace override), build one `Settings`, and pass it down.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from prefect import flow, task, unmapped
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE
from prefect.concurrency.sync import concurrency
from prefect.context import TaskRunContext
from prefect.futures import PrefectFuture

from flowmem.induction.pipeline import ClusterOutcome, induce_cluster
from flowmem.induction.rule import ClusterInput, Inducer, RuleInducer, workflow_id
from flowmem.runner import RunPlan, RunReport, commit_outcomes, learn_namespace, prepare_run
from flowmem.settings import Settings
from flowmem.spool import collect as collect_spool
from flowmem.storage import Store

__all__ = ["collect", "cycle", "induce", "learn"]

LLM_LIMIT = "flowmem-llm"
"""Global concurrency limit on LLM calls (create it with `prefect gcl create flowmem-llm --limit N`)."""


class ClusterFailedError(RuntimeError):
    """Raised by the per-cluster task so Prefect retries it; carries the failed cluster's
    outcome, so its LLM usage is reported after the last retry too."""

    def __init__(self, outcome: ClusterOutcome) -> None:
        super().__init__(outcome.error or outcome.key)
        self.outcome = outcome

    def __reduce__(self) -> tuple[type[ClusterFailedError], tuple[ClusterOutcome]]:
        return type(self), (self.outcome,)  # picklable, for task runners in other processes


_EARLIER: dict[tuple[str, str], ClusterOutcome] = {}
"""(task run id, cluster key) -> the outcome of a cluster's failed attempt that Prefect will
retry: its LLM usage is added to the next attempt's (the attempts of a task run share a process)."""


def _settings(db: str | None, namespace: str | None) -> Settings:
    overrides = {k: v for k, v in {"db": db, "namespace": namespace}.items() if v is not None}
    return Settings(**overrides)  # type: ignore[arg-type]


def make_inducer(kind: str, settings: Settings) -> Inducer:
    """The inducer of a kind, built where it runs (an LLM client does not travel to workers)."""
    if kind == "llm":
        from flowmem.induction.llm import LLMInducer
        from flowmem.providers.openai import llm_from_settings

        return LLMInducer(llm_from_settings(settings))
    if kind != "rule":
        raise ValueError(f"unknown inducer {kind!r}: use rule or llm")
    return RuleInducer()


@task(cache_policy=NONE)
def collect_files(settings: Settings) -> dict[str, Any]:
    """Ingest the spool and the import paths."""
    report = collect_spool(Store(settings), settings)
    return {
        "files": report.files,
        "stored": report.stored,
        "duplicates": report.duplicates,
        "rejected": report.rejected,
        "failed_files": report.failed_files,
    }


@task(cache_policy=NONE)
def plan_run(settings: Settings, force: bool) -> RunPlan:
    """Count what is new, refit the clusters, pick the changed ones."""
    return prepare_run(Store(settings), settings, force=force)


# No task timeout: these run in worker threads, where Prefect cannot interrupt them; the LLM
# client bounds each request with its own timeout and retries.
@task(cache_policy=NONE, retries=2, retry_delay_seconds=[1, 10])
def induce_batch(clusters: list[ClusterInput], settings: Settings, kind: str) -> list[ClusterOutcome]:
    """Induce some clusters. With the LLM inducer a batch is one cluster, its calls wait for
    the global concurrency limit, and a failure raises so that Prefect retries it."""
    inducer = make_inducer(kind, settings)
    if kind != "llm":
        return [induce_cluster(c, inducer) for c in clusters]
    run = TaskRunContext.get()
    run_id = str(run.task_run.id) if run else ""
    last_attempt = run is None or run.task_run.run_count > run.task.retries
    outcomes = []
    for cluster in clusters:
        with concurrency(LLM_LIMIT, occupy=1, strict=False):
            outcome = induce_cluster(cluster, inducer)
        earlier = _EARLIER.pop((run_id, outcome.key), None)
        if earlier is not None:
            _add_usage(outcome, earlier)
        if outcome.error is not None:
            if not last_attempt:
                _EARLIER[(run_id, outcome.key)] = outcome
            raise ClusterFailedError(outcome)
        outcomes.append(outcome)
    return outcomes


def _add_usage(outcome: ClusterOutcome, earlier: ClusterOutcome) -> None:
    """Add an earlier attempt's LLM usage to `outcome`."""
    outcome.llm_calls += earlier.llm_calls
    outcome.llm_tokens += earlier.llm_tokens
    outcome.llm_retries += earlier.llm_retries
    outcome.llm_rejected = dict(Counter(outcome.llm_rejected) + Counter(earlier.llm_rejected))


def batches(clusters: list[ClusterInput], kind: str, size: int) -> list[list[ClusterInput]]:
    """One cluster per task for the LLM inducer (slow calls: concurrency and retries per
    cluster); batches of `size` for the rule inducer, whose milliseconds per cluster would
    drown in Prefect's per-task overhead."""
    step = 1 if kind == "llm" else max(1, size)
    return [clusters[i : i + step] for i in range(0, len(clusters), step)]


@task(cache_policy=NONE)
def commit(settings: Settings, plan: RunPlan, outcomes: list[ClusterOutcome]) -> RunReport:
    """Version what changed and commit the whole run at once (one tag)."""
    return commit_outcomes(Store(settings), plan, outcomes)


@task(cache_policy=NONE)
def fold_outcomes(settings: Settings) -> dict[str, Any]:
    """Recompute each served version's stats from the stored outcomes; promote and demote."""
    return learn_namespace(Store(settings))


def _gather(
    groups: list[list[ClusterInput]], futures: list[PrefectFuture[list[ClusterOutcome]]]
) -> list[ClusterOutcome]:
    """Every cluster's outcome; a failed cluster is reported (with its LLM usage, when its
    task got as far as inducing it) and retried next run."""
    outcomes = []
    for group, future in zip(groups, futures, strict=True):
        try:
            outcomes += future.result()
        except ClusterFailedError as err:  # after its retries
            outcomes.append(err.outcome)
        except Exception as err:  # the task itself failed: no outcome, no LLM usage known
            for cluster in group:
                key = workflow_id(cluster.agent, cluster.cluster_id)
                outcomes.append(ClusterOutcome(key, error=f"{type(err).__name__}: {err}"))
    return outcomes


def _artifact(report: RunReport, timings: dict[str, float]) -> None:
    s = report.summary()
    rows = [
        ("new trajectories", s["new_trajectories"]),
        ("clusters changed / all", f"{s['clusters_changed']} / {s['clusters']}"),
        ("workflows created", s["new_workflows"]),
        ("new versions", s["versions_created"]),
        ("failed clusters", ", ".join(s["failed_clusters"]) or "none"),
        ("LLM calls / retries / tokens", f"{s['llm_calls']} / {s['llm_retries']} / {s['llm_tokens']}"),
        ("LLM outputs rejected", ", ".join(f"{k}: {n}" for k, n in s["llm_rejected"].items()) or "none"),
        ("tag", s["tag"]),
        *((f"time: {k}", f"{v:.2f} s") for k, v in timings.items()),
    ]
    table = "\n".join(f"| {k} | {v} |" for k, v in rows)
    create_markdown_artifact(
        f"# flowmem induction run\n\n| | |\n|---|---|\n{table}\n",
        key="flowmem-induce",
        description="Clusters changed, versions created, LLM usage, time per stage.",
    )


@flow(name="flowmem-collect", log_prints=True)
def collect(db: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    """Bring new trajectories in from the spool directory and the import paths."""
    return collect_files(_settings(db, namespace))


@flow(name="flowmem-induce", log_prints=True)
def induce(
    db: str | None = None, namespace: str | None = None, inducer: str = "rule", force: bool = False
) -> dict[str, Any]:
    """Incremental induction: only clusters whose runs changed are induced, one task each."""
    settings = _settings(db, namespace)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    plan = plan_run(settings, force)
    timings["plan"] = time.perf_counter() - start
    start = time.perf_counter()
    groups = batches(plan.changed, inducer, settings.induce_batch)
    futures = induce_batch.map(groups, settings=unmapped(settings), kind=inducer) if groups else []
    outcomes = _gather(groups, list(futures))
    timings["induce"] = time.perf_counter() - start
    start = time.perf_counter()
    report = commit(settings, plan, outcomes)
    timings["commit"] = time.perf_counter() - start
    _artifact(report, timings)
    return report.summary()


@flow(name="flowmem-learn", log_prints=True)
def learn(db: str | None = None, namespace: str | None = None) -> dict[str, Any]:
    """Fold reported outcomes into per-version stats; promote and demote versions."""
    return fold_outcomes(_settings(db, namespace))


@flow(name="flowmem-cycle", log_prints=True)
def cycle(db: str | None = None, namespace: str | None = None, inducer: str = "rule") -> dict[str, Any]:
    """collect → induce → learn: what a schedule normally runs."""
    return {
        "collect": collect(db, namespace),
        "induce": induce(db, namespace, inducer),
        "learn": learn(db, namespace),
    }
