"""Induce: one incremental induction run over a namespace, versioned, committed at once.

A run (1) counts the trajectories stored since the last run and stops there when nothing is
new and no cluster is waiting for a retry; (2) refits the clusters, keeping their ids; (3)
induces only the clusters whose member runs changed since the last run (or whose induction
failed then); (4) stores changed workflows as new versions in one commit tagged with the run
id; (5) retires the workflows of earlier runs whose cluster is gone or was induced again
without them (`retirements`). `induce` runs it in this process; the Prefect flow runs
`prepare_run`, `induce_cluster` per cluster and `commit_outcomes` as tasks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowmem.induction.base import ClusterInput, Inducer
from flowmem.induction.drafts import (
    ClusterOutcome,
    ClusterPlan,
    InductionResult,
    assemble,
    induce_cluster,
    plan_clusters,
    plan_versions,
    task_key,
)
from flowmem.models import InductionRun, Trajectory, Workflow
from flowmem.policy.lifecycle import NOT_SERVED, Cause, Transition, needs_reinduction
from flowmem.settings import Settings
from flowmem.storage import NotFoundError, Store

__all__ = [
    "RunPlan",
    "RunReport",
    "commit_outcomes",
    "induce",
    "key_vectors",
    "nothing_served",
    "prepare_run",
    "previous_clusters",
    "retirements",
]


@dataclass
class RunPlan:
    """What an induction run is about to do."""

    run: InductionRun
    """The run being prepared (not yet committed)."""
    total: int
    """Trajectories in the namespace."""
    new_trajectories: int
    """Stored since the last run."""
    clusters: ClusterPlan = field(default_factory=ClusterPlan)
    """Every cluster (empty when the run is skipped)."""
    changed: list[ClusterInput] = field(default_factory=list)
    """The clusters to induce."""
    current: dict[str, Workflow] = field(default_factory=dict)
    """The latest version of every workflow."""
    last: InductionRun | None = None
    """The previous induction run."""
    revive: set[str] = field(default_factory=set)
    """Workflows deprecated for their own failures that nothing serves: a new version of each
    is committed even when re-induction gives the same content."""

    @property
    def skipped(self) -> bool:
        """True when there is nothing to induce."""
        return not self.changed


@dataclass
class RunReport:
    """What an induction run committed."""

    run: InductionRun
    """The committed run (its id is the store tag), or the last one if this run was skipped."""
    result: InductionResult
    """Everything induced, including pitfall notes and failed clusters."""
    versions: list[Workflow]
    """The new workflow versions it stored."""
    plan: RunPlan
    """What it set out to do."""
    retired: list[Transition] = field(default_factory=list)
    """The versions it retired (`retirements`): still readable, never served."""

    def summary(self) -> dict[str, Any]:
        """The run's figures as JSON-ready data."""
        counts = self.run.counts if not self.plan.skipped else {}
        return {
            "run": self.run.id if not self.plan.skipped else None,
            "tag": self.run.tag,
            "skipped": self.plan.skipped,
            "trajectories": self.plan.total,
            "new_trajectories": self.plan.new_trajectories,
            "clusters": len(self.plan.clusters.clusters),
            "clusters_changed": len(self.plan.changed),
            "versions_created": len(self.versions),
            "new_workflows": sum(w.version == 1 for w in self.versions),
            "pitfall_notes": len(self.result.notes),
            "retired": sorted({t.workflow_id for t in self.retired}),
            "failed_clusters": self.result.failed,
            "llm_calls": counts.get("llm_calls", 0),
            "llm_tokens": counts.get("llm_tokens", 0),
            "llm_retries": counts.get("llm_retries", 0),
            "llm_rejected": {
                k.removeprefix(REJECTED): n for k, n in counts.items() if k.startswith(REJECTED)
            },
        }


def previous_clusters(
    workflows: Iterable[Workflow], trajectories: Iterable[Trajectory]
) -> dict[str, dict[int, set[str]]]:
    """Per agent, the task keys of each cluster that current workflows were induced from (for
    a store whose last run kept no memberships)."""
    task_of = {t.id: task_key(t.task) for t in trajectories}
    found: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for w in workflows:
        if w.cluster_id is not None:
            found[w.agent][w.cluster_id].update(task_of[i] for i in w.source_trajectory_ids if i in task_of)
    return {agent: dict(clusters) for agent, clusters in found.items()}


def _memberships(state: Mapping[str, Any]) -> dict[str, dict[int, set[str]]] | None:
    """The cluster memberships a run left in its state (None for runs that kept none)."""
    clusters = state.get("clusters")
    if not isinstance(clusters, dict):
        return None
    return {agent: {int(cid): set(keys) for cid, keys in ids.items()} for agent, ids in clusters.items()}


REJECTED = "llm_rejected_"
"""Prefix of the run counts of rejected LLM outputs, one per reason (`llm_rejected_leak`)."""


def nothing_served(store: Store, namespace: str) -> Callable[[str], bool]:
    """Whether every version of a workflow is deprecated (False for an unknown id), read from
    the store: the `nothing_served` of `needs_reinduction`."""

    def check(workflow_id: str) -> bool:
        try:
            return all(w.status == "deprecated" for w in store.history(workflow_id, namespace=namespace))
        except NotFoundError:
            return False

    return check


def _cluster_key(workflow_id: str) -> str:
    """The cluster key of a workflow id (`agent-c3-2` belongs to cluster `agent-c3`)."""
    head, _, tail = workflow_id.rpartition("-")
    return head if tail.isdigit() and "-c" in head else workflow_id


def _last_induction(store: Store, namespace: str) -> InductionRun | None:
    """The latest induction run still in effect: one that was rolled back is not (the store
    holds the workflows from before it, so what it induced is to be induced again)."""
    found = store.list_runs(namespace=namespace)
    undone = {r.rolled_back_run for r in found if r.kind == "rollback"}
    runs = [r for r in found if r.kind == "induce" and r.id not in undone]
    return runs[-1] if runs else None


def _logged(row: Mapping[str, Any]) -> Transition:
    return Transition(row["id"], row["version"], row["old"], row["new"], row["reason"], row["cause"])


def prepare_run(store: Store, settings: Settings, *, namespace: str, force: bool = False) -> RunPlan:
    """Decide what the next run of `namespace` induces (`force`: every cluster).

    `settings` gives the clustering parameters; every read and the run itself use `namespace`.
    """
    last = _last_induction(store, namespace)
    total = store.count_trajectories(namespace=namespace)
    seen = int(last.counts.get("trajectories", 0)) if last else 0
    pending = set(last.state.get("failed", [])) if last else set()
    # A version deprecated for its own failures since the last run: re-induce its cluster,
    # failures included, so a better workflow can replace it.
    since = last.finished_at if last else None
    logged = [_logged(r) for r in store.transitions(namespace=namespace) if since is None or r["at"] > since]
    reinduce = needs_reinduction(logged, nothing_served=nothing_served(store, namespace))
    pending |= {_cluster_key(wid) for wid in reinduce}
    plan = RunPlan(
        run=InductionRun(id=Store.new_run_id(), namespace=namespace),
        total=total,
        new_trajectories=max(0, total - seen),
        last=last,
        revive=set(reinduce),
    )
    if last is not None and not force and plan.new_trajectories == 0 and not pending:
        return plan
    trajectories = store.list_trajectories(namespace=namespace, limit=None)
    plan.current = {w.id: w for w in store.list_workflows(namespace=namespace)}
    # A retired workflow whose cluster is back gets a new version even when it says the same.
    plan.revive |= {w.id for w in plan.current.values() if w.status == "retired"}
    plan.clusters = plan_clusters(
        trajectories,
        params=settings.cluster_params,
        literal_share=settings.literal_share,
        subroutines=settings.subroutines,
        previous=(last and _memberships(last.state))
        or previous_clusters(plan.current.values(), trajectories),
    )
    before: Mapping[str, str] = last.state.get("fingerprints", {}) if last and not force else {}
    prints = plan.clusters.fingerprints()
    plan.changed = [
        c for c in plan.clusters.clusters if before.get(key := c.key) != prints[key] or key in pending
    ]
    return plan


def key_vectors(
    store: Store, shares: Mapping[str, Mapping[str, float]], *, limit: int = 32
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """Each workflow's retrieval keys: the embeddings of (at most `limit`, evenly spread) of
    its distinct source tasks, and each one's share (`InductionResult.key_shares`). Search
    scores a workflow by its best key (`induction.nearest`)."""
    vectors: dict[str, Any] = {}
    weights: dict[str, list[float]] = {}
    for wid, tasks in shares.items():
        distinct = sorted(tasks)
        step = max(1, -(-len(distinct) // limit))
        chosen = distinct[::step][:limit]
        vectors[wid] = store.embedder.embed(chosen)
        weights[wid] = [tasks[t] for t in chosen]
    return vectors, weights


def _key_of(workflow_id: str, keys: set[str]) -> str:
    """The cluster key of a workflow id among the run's cluster keys (`agent-c3-2` is a
    variant of `agent-c3`; a sub-routine's id is its key)."""
    if workflow_id in keys:
        return workflow_id
    head, _, tail = workflow_id.rpartition("-")
    return head if head and tail.isdigit() else workflow_id


def retirements(store: Store, plan: RunPlan, result: InductionResult) -> list[Transition]:
    """The versions a run retires: every served version (candidate or active) of a workflow an
    earlier induction run made, whose cluster no longer exists after the re-clustering
    (`gone`), or whose cluster this run induced again, successfully, without it (`replaced`:
    a variant that no longer exists, a near-duplicate merged into another). A cluster whose
    induction failed keeps its workflows."""
    keys = {c.key for c in plan.clusters.clusters}
    redone = {c.key for c in plan.changed} - set(result.failed)
    drafted = {w.id for w in result.workflows}
    out: list[Transition] = []
    for w in plan.current.values():
        if w.id in drafted or w.provenance.run_id is None:  # not induced (put by hand): kept
            continue
        key = _key_of(w.id, keys)
        cause: Cause
        if key not in keys:
            cause, reason = "gone", f"its cluster {key} no longer exists after run {plan.run.id}"
        elif key in redone:
            cause, reason = "replaced", f"run {plan.run.id} induced its cluster {key} without it"
        else:
            continue
        for v in store.history(w.id, namespace=plan.run.namespace):
            if v.status not in NOT_SERVED:
                out.append(Transition(w.id, v.version, v.status, "retired", reason, cause))
    return out


def commit_outcomes(store: Store, plan: RunPlan, outcomes: Sequence[ClusterOutcome]) -> RunReport:
    """Version what changed and commit it as the run (nothing is written for a skipped run)."""
    result = assemble(plan.clusters, outcomes)
    if plan.skipped:
        last = plan.last or plan.run
        return RunReport(last, result, [], plan)
    prints = plan.clusters.fingerprints()
    failed = sorted(result.failed)
    usage = result.usage
    counts = {
        "trajectories": plan.total,
        "new_trajectories": plan.new_trajectories,
        "clusters_changed": len(plan.changed),
        "llm_calls": usage.calls,
        "llm_tokens": usage.tokens,
        "llm_retries": usage.retries,
        **{REJECTED + reason: n for reason, n in sorted(usage.rejected.items())},
        **result.counts,
    }
    state: dict[str, Any] = {
        "fingerprints": {k: v for k, v in prints.items() if k not in failed},
        "failed": failed,
        "clusters": {
            agent: {str(cid): sorted(keys) for cid, keys in ids.items()}
            for agent, ids in plan.clusters.memberships.items()
        },
    }
    retired = retirements(store, plan, result)
    # Kept in the run, so a rollback of it can give the retired versions their status back.
    state["retired"] = [[t.workflow_id, t.version, t.old] for t in retired]
    counts["retired"] = len({t.workflow_id for t in retired})
    run = plan.run.model_copy(update={"counts": counts, "state": state})
    versions = plan_versions(result.workflows, plan.current, run_id=run.id, revive=plan.revive)
    shares = result.key_shares()  # over every draft: an unchanged variant holds runs too
    keys, weights = key_vectors(store, {w.id: shares[w.id] for w in versions})
    committed = store.commit_run(run, versions, keys=keys, shares=weights)
    # After the commit: a crash in between leaves them served, and the next run retires them.
    store.record_transitions(retired, namespace=plan.run.namespace)
    return RunReport(committed, result, versions, plan, retired)


def induce(
    store: Store, settings: Settings, inducer: Inducer, *, namespace: str, force: bool = False
) -> RunReport:
    """One whole induction run of `namespace` in this process (the flow runs the same steps as tasks)."""
    plan = prepare_run(store, settings, namespace=namespace, force=force)
    return commit_outcomes(store, plan, [induce_cluster(c, inducer) for c in plan.changed])
