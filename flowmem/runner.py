"""Induction runs over a namespace of the store: incremental, versioned, committed at once.

A run (1) counts the trajectories stored since the last run and stops there when nothing is
new and no cluster is waiting for a retry; (2) refits the clusters, keeping their ids; (3)
induces only the clusters whose member runs changed since the last run (or whose induction
failed then); (4) stores changed workflows as new versions in one commit tagged with the run
id. The Prefect flows (`flowmem/flows/`) run the same steps, one task each.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flowmem.induction.pipeline import (
    ClusterOutcome,
    ClusterPlan,
    InductionResult,
    assemble,
    induce_cluster,
    plan_clusters,
    plan_versions,
    task_key,
)
from flowmem.induction.rule import ClusterInput, Inducer, workflow_id
from flowmem.learning import usage_from
from flowmem.lifecycle import DEFAULT_PARAMS, LifecycleParams, Transition, decide
from flowmem.models import InductionRun, Trajectory, Workflow
from flowmem.settings import Settings
from flowmem.storage import NotFoundError, Store

__all__ = [
    "RunPlan",
    "RunReport",
    "commit_outcomes",
    "induce_namespace",
    "key_vectors",
    "learn_namespace",
    "prepare_run",
    "previous_clusters",
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

FAILING = ("failing", "worse")
"""Deprecation causes that are a version's own failures (not being superseded)."""


def _nothing_served(store: Store, workflow_id: str) -> bool:
    try:
        return all(w.status == "deprecated" for w in store.history(workflow_id))
    except NotFoundError:
        return False


def _reinduce(transitions: list[Transition], store: Store) -> list[str]:
    """Workflows a version of which was deprecated for its own failures, and of which no
    version is served any more: their clusters go back to induction, failures included."""
    ids = {t.workflow_id for t in transitions if t.new == "deprecated" and t.cause in FAILING}
    return sorted(wid for wid in ids if _nothing_served(store, wid))


def _cluster_key(workflow_id: str) -> str:
    """The cluster key of a workflow id (`agent-c3-2` belongs to cluster `agent-c3`)."""
    head, _, tail = workflow_id.rpartition("-")
    return head if tail.isdigit() and "-c" in head else workflow_id


def _last_induction(store: Store) -> InductionRun | None:
    runs = [r for r in store.list_runs() if r.kind == "induce"]
    return runs[-1] if runs else None


def prepare_run(store: Store, settings: Settings, *, force: bool = False) -> RunPlan:
    """Decide what the next run induces (`force`: every cluster)."""
    last = _last_induction(store)
    total = store.count_trajectories()
    seen = int(last.counts.get("trajectories", 0)) if last else 0
    pending = set(last.state.get("failed", [])) if last else set()
    # A version deprecated for its own failures since the last run: re-induce its cluster,
    # failures included, so a better workflow can replace it.
    since = last.finished_at if last else None
    failed_ids = {
        t["id"] for t in store.transitions() if t["cause"] in FAILING and (since is None or t["at"] > since)
    }
    pending |= {_cluster_key(wid) for wid in failed_ids if _nothing_served(store, wid)}
    plan = RunPlan(
        run=InductionRun(id=Store.new_run_id(), namespace=settings.namespace),
        total=total,
        new_trajectories=max(0, total - seen),
        last=last,
    )
    if last is not None and not force and plan.new_trajectories == 0 and not pending:
        return plan
    trajectories = store.list_trajectories(limit=None)
    plan.current = {w.id: w for w in store.list_workflows()}
    plan.clusters = plan_clusters(
        trajectories,
        params=settings.cluster_params,
        literal_share=settings.literal_share,
        previous=(last and _memberships(last.state))
        or previous_clusters(plan.current.values(), trajectories),
    )
    before: Mapping[str, str] = last.state.get("fingerprints", {}) if last and not force else {}
    prints = plan.clusters.fingerprints()
    plan.changed = [
        c
        for c in plan.clusters.clusters
        if before.get(key := workflow_id(c.agent, c.cluster_id)) != prints[key] or key in pending
    ]
    return plan


def key_vectors(store: Store, keys: Mapping[str, list[str]], *, limit: int = 32) -> dict[str, Any]:
    """Each workflow's retrieval vectors: the embeddings of (at most `limit`, evenly spread)
    distinct source tasks. Search scores a workflow by its nearest one."""
    out = {}
    for wid, tasks in keys.items():
        distinct = sorted(set(tasks))
        step = max(1, -(-len(distinct) // limit))
        out[wid] = store.embedder.embed(distinct[::step][:limit])
    return out


def commit_outcomes(store: Store, plan: RunPlan, outcomes: Sequence[ClusterOutcome]) -> RunReport:
    """Version what changed and commit it as the run (nothing is written for a skipped run)."""
    result = assemble(plan.clusters, outcomes)
    if plan.skipped:
        last = plan.last or plan.run
        return RunReport(last, result, [], plan)
    prints = plan.clusters.fingerprints()
    failed = sorted(result.failed)
    rejected = [Counter(o.llm_rejected) for o in outcomes]
    counts = {
        "trajectories": plan.total,
        "new_trajectories": plan.new_trajectories,
        "clusters_changed": len(plan.changed),
        "llm_calls": sum(o.llm_calls for o in outcomes),
        "llm_tokens": sum(o.llm_tokens for o in outcomes),
        "llm_retries": sum(o.llm_retries for o in outcomes),
        **{REJECTED + reason: n for reason, n in sorted(sum(rejected, Counter()).items())},
        **result.counts,
    }
    state = {
        "fingerprints": {k: v for k, v in prints.items() if k not in failed},
        "failed": failed,
        "clusters": {
            agent: {str(cid): sorted(keys) for cid, keys in ids.items()}
            for agent, ids in plan.clusters.memberships.items()
        },
    }
    run = plan.run.model_copy(update={"counts": counts, "state": state})
    versions = plan_versions(result.workflows, plan.current, run_id=run.id)
    keys = key_vectors(store, {w.id: result.keys[w.id] for w in versions})
    committed = store.commit_run(run, versions, keys=keys)
    return RunReport(committed, result, versions, plan)


def induce_namespace(store: Store, settings: Settings, inducer: Inducer, *, force: bool = False) -> RunReport:
    """One whole induction run in this process (the flows run the same steps as tasks)."""
    plan = prepare_run(store, settings, force=force)
    return commit_outcomes(store, plan, [induce_cluster(c, inducer) for c in plan.changed])


def learn_namespace(store: Store, params: LifecycleParams = DEFAULT_PARAMS) -> dict[str, Any]:
    """Fold the outcomes of served runs into per-version stats, then apply the promotion and
    demotion rules and record every transition in the lifecycle log."""
    usage = usage_from(store.iter_trajectories())
    store.put_usage(usage)
    transitions = []
    for wid in sorted({i for i, _ in usage}):
        try:
            versions = store.history(wid)
        except NotFoundError:  # outcomes of a workflow that is not stored (rolled back)
            continue
        transitions += decide(versions, params)
    store.record_transitions(transitions)
    return {
        "versions_with_outcomes": len(usage),
        "runs_served": sum(u.served for u in usage.values()),
        "transitions": [
            {"id": t.workflow_id, "version": t.version, "old": t.old, "new": t.new, "reason": t.reason}
            for t in transitions
        ],
        "reinduce": _reinduce(transitions, store),
    }
