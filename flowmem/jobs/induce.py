"""Induce: one incremental induction run over a namespace, versioned, committed at once.

A run (1) counts the trajectories stored since the last run and stops there when nothing is
new and no cluster is waiting for a retry; (2) places the new tasks in the stored clusters
(`jobs/incremental.py`), or, when they change the clustering materially (many new tasks, a new
agent, other settings), refits the clusters, keeping their ids, and says why (`refit`); (3)
induces only the clusters whose member runs changed since the last run (placed runs: changed
materially, `induction.assign.material`) or whose induction failed then; (4) stores changed
workflows as new versions in one commit tagged with the run id; (5) retires the workflows of
earlier runs whose cluster is gone or was induced again without them (`retirements`).
`run_induction` runs it in this process; the Prefect flow (`flows.pipeline.induce_flow`) runs
`prepare_run`, `induce_cluster` per cluster and `commit_outcomes` as tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from flowmem.induction.assign import MIN_CHANGE
from flowmem.induction.base import ClusterInput, Inducer, cluster_key
from flowmem.induction.increment import Memberships, next_state, thaw, to_induce_after_refit
from flowmem.induction.orchestrate import (
    ClusterOutcome,
    ClusterPlan,
    InductionResult,
    assemble,
    induce_cluster,
    plan_clusters,
    plan_versions,
)
from flowmem.induction.subroutines import compose_workflows
from flowmem.jobs.incremental import (
    REFIT_SHARE,
    Assignment,
    assign_run,
    fit_record,
    merge_with_current,
    previous_clusters,
)
from flowmem.models import Fit, InductionRun, Retirement, Workflow
from flowmem.policy.lifecycle import NOT_SERVED, Cause, Transition, needs_reinduction
from flowmem.settings import Settings
from flowmem.storage import NotFoundError, Store

__all__ = [
    "RunPlan",
    "RunReport",
    "commit_outcomes",
    "key_vectors",
    "nothing_served",
    "prepare_run",
    "previous_clusters",
    "retirements",
    "run_induction",
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
    """Every cluster after a refit; after placing new tasks, the changed ones only (empty
    when the run is skipped)."""
    changed: list[ClusterInput] = field(default_factory=list)
    """The clusters to induce."""
    current: dict[str, Workflow] = field(default_factory=dict)
    """The latest version of every workflow."""
    last: InductionRun | None = None
    """The previous induction run."""
    revive: set[str] = field(default_factory=set)
    """Workflows deprecated for their own failures that nothing serves: a new version of each
    is committed even when re-induction gives the same content."""
    fingerprints: dict[str, str] = field(default_factory=dict)
    """Every cluster's fingerprint (a hash of its runs) now."""
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Every cluster's (successes, failures) now."""
    placed: Memberships = field(default_factory=dict)
    """Agent -> stable cluster id -> the task keys in it that no fit clustered (noise texts,
    and the tasks placed since the fit)."""
    fit: Fit | None = None
    """The fit the clusters come from (`incremental.fit_record`)."""
    refit: str | None = None
    """Why the clusters were fitted again; None when the new tasks were placed in the stored
    clusters (or the run is skipped)."""
    deferred: list[str] = field(default_factory=list)
    """Clusters with too few new runs to be induced again yet."""
    task_of: dict[str, str] = field(default_factory=dict)
    """Trajectory id -> its task text, for every trajectory of the namespace."""

    @property
    def skipped(self) -> bool:
        """True when nothing changed: no cluster to induce, none with runs waiting (a run
        that only defers is recorded, with the placements it made)."""
        return not self.changed and not self.deferred


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
            "clusters": len(self.plan.fingerprints),
            "clusters_changed": len(self.plan.changed),
            "clusters_deferred": len(self.plan.deferred),
            "refit": self.plan.refit,
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


def _last_induction(store: Store, namespace: str) -> InductionRun | None:
    """The latest induction run still in effect: one that was rolled back is not (the store
    holds the workflows from before it, so what it induced is to be induced again)."""
    found = store.list_runs(namespace=namespace)
    undone = {r.rolled_back_run for r in found if r.kind == "rollback"}
    runs = [r for r in found if r.kind == "induce" and r.id not in undone]
    return runs[-1] if runs else None


def _logged(row: Mapping[str, Any]) -> Transition:
    return Transition(row["id"], row["version"], row["old"], row["new"], row["reason"], row["cause"])


def prepare_run(
    store: Store,
    settings: Settings,
    *,
    namespace: str,
    force: bool = False,
    refit_share: float = REFIT_SHARE,
    min_change: float = MIN_CHANGE,
) -> RunPlan:
    """Decide what the next run of `namespace` induces (`force`: refit, every cluster).

    `settings` gives the clustering parameters; every read and the run itself use `namespace`.
    New tasks join the stored clusters until those since the fit reach `refit_share` of the
    fitted ones; a cluster's new runs wait until they reach `min_change` of its runs.
    """
    last = _last_induction(store, namespace)
    total = store.count_trajectories(namespace=namespace)
    seen = int(last.counts.get("trajectories", 0)) if last else 0
    pending, reinduce = _to_reinduce(store, namespace, last)
    plan = RunPlan(
        run=InductionRun(id=Store.new_run_id(), namespace=namespace),
        total=total,
        new_trajectories=max(0, total - seen),
        last=last,
        revive=reinduce,
    )
    if last is not None and not force and plan.new_trajectories == 0 and not pending:
        return plan
    plan.current = {w.id: w for w in store.list_workflows(namespace=namespace)}
    # A retired workflow whose cluster is back gets a new version even when it says the same.
    plan.revive |= {w.id for w in plan.current.values() if w.status == "retired"}
    placed = _placement(
        store,
        settings,
        last,
        force=force,
        namespace=namespace,
        pending=pending,
        refit_share=refit_share,
        min_change=min_change,
    )
    if isinstance(placed, Assignment) and last is not None:
        _take_assignment(plan, placed, last)
        return plan
    plan.refit = str(placed)
    _refit(plan, store, settings, pending=pending, force=force)
    return plan


def _placement(
    store: Store,
    settings: Settings,
    last: InductionRun | None,
    *,
    force: bool,
    namespace: str,
    pending: set[str],
    refit_share: float,
    min_change: float,
) -> Assignment | str:
    """The new runs placed into the last run's clusters, or why every cluster is fitted again."""
    if last is None or force:
        return "the first run" if last is None else "every cluster is induced again"
    return assign_run(
        store,
        settings,
        last.state,
        namespace=namespace,
        pending=pending,
        refit_share=refit_share,
        min_change=min_change,
    )


def _to_reinduce(store: Store, namespace: str, last: InductionRun | None) -> tuple[set[str], set[str]]:
    """The clusters to induce again whatever their new runs, and the workflows to revive.

    The clusters are those whose induction failed in the last run, and those of a version
    deprecated for its own failures since (failures included, so a better workflow can replace
    it); the workflows are those versions' ids."""
    pending = set(last.state.failed) if last else set()
    since = last.finished_at if last else None
    logged = [_logged(r) for r in store.transitions(namespace=namespace) if since is None or r["at"] > since]
    reinduce = needs_reinduction(logged, nothing_served=nothing_served(store, namespace))
    pending |= {cluster_key(wid) for wid in reinduce}
    return pending, set(reinduce)


def _take_assignment(plan: RunPlan, placed: Assignment, last: InductionRun) -> None:
    """Fill `plan` from the new runs' placement into the last run's clusters (no refit)."""
    plan.clusters = ClusterPlan(placed.clusters, memberships=thaw(last.state.clusters) or {})
    plan.changed = list(placed.clusters)
    plan.fingerprints, plan.sizes, plan.placed = placed.fingerprints, placed.sizes, placed.placed
    plan.fit, plan.deferred, plan.task_of = last.state.fit, placed.deferred, placed.task_of


def _refit(plan: RunPlan, store: Store, settings: Settings, *, pending: set[str], force: bool) -> None:
    """Fit every agent's clusters again (ids kept) and pick the clusters whose runs changed."""
    last, namespace = plan.last, plan.run.namespace
    trajectories = store.list_trajectories(namespace=namespace, limit=None)
    plan.task_of = {t.id: t.task for t in trajectories}
    plan.clusters = plan_clusters(
        trajectories,
        params=settings.cluster_params,
        literal_share=settings.literal_share,
        subroutines=settings.subroutines,
        previous=(last and thaw(last.state.clusters))
        or previous_clusters(plan.current.values(), trajectories),
    )
    plan.fingerprints = plan.clusters.fingerprints()
    plan.sizes = {c.key: (len(c.successes), len(c.failures)) for c in plan.clusters.clusters}
    plan.placed = plan.clusters.placed
    texts = sum(len(c.texts) for c in plan.clusters.clusterings.values())
    plan.fit = fit_record(
        settings, trajectories=len(trajectories), texts=texts, agents=set(plan.clusters.clusterings)
    )
    redo = to_induce_after_refit(
        plan.fingerprints, last.state if last and not force else None, pending=pending
    )
    plan.changed = [c for c in plan.clusters.clusters if c.key in redo]


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


def retirements(
    store: Store, plan: RunPlan, result: InductionResult, *, carried: Set[str] = frozenset()
) -> list[Transition]:
    """The versions a run retires: every served version (candidate or active) of a workflow an
    earlier induction run made, whose cluster no longer exists after the re-clustering
    (`gone`), or whose cluster this run induced again, successfully, without it (`replaced`:
    a variant that no longer exists, a near-duplicate merged into another), or, `carried` into
    the run from a cluster it did not induce, merged into a near-duplicate of this run. A
    cluster whose induction failed keeps its workflows."""
    keys = set(plan.fingerprints)
    redone = {c.key for c in plan.changed} - set(result.failed)
    drafted = {w.id for w in result.workflows}
    out: list[Transition] = []
    for w in plan.current.values():
        if w.id in drafted or w.provenance.run_id is None:  # not induced (put by hand): kept
            continue
        key = cluster_key(w.id, keys)
        cause: Cause
        if key not in keys:
            cause, reason = "gone", f"its cluster {key} no longer exists after run {plan.run.id}"
        elif key in redone or w.id in carried:
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
    carried = merge_with_current(
        result,
        plan.current,
        keys=set(plan.fingerprints),
        induced={c.key for c in plan.changed},
        task_of=plan.task_of,
    )
    alive = set(plan.fingerprints)  # composed with every sub-routine the run keeps, induced or not
    known = [w for w in plan.current.values() if w.kind == "subroutine" and w.status not in NOT_SERVED]
    result.workflows = compose_workflows(
        result.workflows, known=[w for w in known if cluster_key(w.id, alive) in alive]
    )
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
    if plan.refit is None:  # no fit: every cluster, not only those induced
        counts["clusters"] = len(plan.fingerprints)
    counts["clusters_deferred"] = len(plan.deferred)
    retired = retirements(store, plan, result, carried=carried)
    state = next_state(
        plan.last.state if plan.last else None,
        fingerprints=plan.fingerprints,
        sizes=plan.sizes,
        deferred=plan.deferred,
        failed=failed,
        clusters=plan.clusters.memberships,
        placed=plan.placed,
        fit=plan.fit,
        refit=plan.refit,
        subroutines=[c.key for c in plan.clusters.clusters if c.kind == "subroutine"],
        # Kept in the run, so a rollback of it can give the retired versions their status back.
        retired=[Retirement(t.workflow_id, t.version, t.old) for t in retired],
    )
    counts["retired"] = len({t.workflow_id for t in retired})
    run = plan.run.model_copy(update={"counts": counts, "state": state})
    versions = plan_versions(result.workflows, plan.current, run_id=run.id, revive=plan.revive)
    shares = result.key_shares()  # over every draft: an unchanged variant holds runs too
    keys, weights = key_vectors(store, {w.id: shares[w.id] for w in versions})
    committed = store.commit_run(run, versions, keys=keys, shares=weights)
    # After the commit: a crash in between leaves them served, and the next run retires them.
    store.record_transitions(retired, namespace=plan.run.namespace)
    return RunReport(committed, result, versions, plan, retired)


def run_induction(
    store: Store, settings: Settings, inducer: Inducer, *, namespace: str, force: bool = False
) -> RunReport:
    """One whole induction run of `namespace` in this process (the flow runs the same steps as tasks)."""
    plan = prepare_run(store, settings, namespace=namespace, force=force)
    return commit_outcomes(store, plan, [induce_cluster(c, inducer) for c in plan.changed])
