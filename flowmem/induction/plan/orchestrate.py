"""The induction pass, pure: cluster each agent's runs, induce every cluster, assemble the drafts.

`induce_cluster` induces one cluster of a plan (`ClusterPlan`, made by `induction.plan.bounded`),
`assemble` gathers the outcomes (near-duplicates merged, sub-routines composed, names made
distinct); `plan_versions` turns drafts into the new versions of a run. `jobs/induce.py` runs it
against a store, the Prefect flow as tasks.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from flowmem.induction.abstract.subroutines import compose_workflows
from flowmem.induction.base import (
    ClusterInput,
    Inducer,
    InductionRefused,
    LLMError,
    Usage,
)
from flowmem.induction.cluster.cluster import Clustering
from flowmem.induction.pitfalls.failures import pitfall_statement, standalone_pitfalls
from flowmem.induction.render.naming import distinct
from flowmem.models import Pitfall, Trajectory, Workflow, is_demonstration
from flowmem.retrieval.nearest import key_shares

__all__ = [
    "ClusterOutcome",
    "ClusterPlan",
    "InductionResult",
    "assemble",
    "fingerprint",
    "in_run_order",
    "induce_cluster",
    "merge_duplicates",
    "plan_versions",
    "task_key",
]

log = logging.getLogger("flowmem.induction")


@dataclass(frozen=True)
class InductionResult:
    """What one induction pass produced: a value, made once (`assemble`); a later step makes a
    new one (`dataclasses.replace`)."""

    workflows: list[Workflow] = field(default_factory=list)
    """Drafts (version 1), one per cluster with successes, near-duplicates merged."""
    notes: dict[str, list[str]] = field(default_factory=dict)
    """Clusters with failed runs only: their pitfall notes (no workflow to follow)."""
    clusterings: dict[str, Clustering] = field(default_factory=dict)
    """Agent -> the clustering of its distinct task texts."""
    keys: dict[str, dict[str, int]] = field(default_factory=dict)
    """Workflow id -> the task texts it was induced from (its retrieval key), each with how
    many of its source runs had it (`nearest.key_shares` turns them into shares)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Cluster -> why its induction failed (the others still count)."""
    failed_reasons: dict[str, str] = field(default_factory=dict)
    """Cluster -> the kind of its failure (`ClusterOutcome.reason`), to count them by."""
    memberships: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    """Agent -> stable cluster id -> its task keys (the `previous` of the next run)."""
    usage: Usage = field(default_factory=Usage)
    """The LLM usage of every cluster, failed ones included."""

    def key_shares(self) -> dict[str, dict[str, float]]:
        """Workflow id -> each of its source tasks with its share of that task's runs
        (`nearest.key_shares`; a sub-routine's share of each task is whole)."""
        whole = {w.id for w in self.workflows if w.kind == "subroutine"}
        return key_shares({w.id: self.keys.get(w.id, {}) for w in self.workflows}, whole=whole)

    @property
    def counts(self) -> dict[str, int]:
        """Figures for the run record."""
        return {
            "clusters": sum(len(c.members()) for c in self.clusterings.values()),
            "workflows": len(self.workflows),
            "pitfall_notes": len(self.notes),
            "failed_clusters": len(self.failed),
        }


@dataclass
class ClusterPlan:
    """The clusters of one namespace, with stable ids, ready to be induced one by one."""

    clusters: list[ClusterInput] = field(default_factory=list)
    """One input per cluster (every agent)."""
    clusterings: dict[str, Clustering] = field(default_factory=dict)
    """Agent -> the clustering of its distinct task texts."""
    memberships: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    """Agent -> stable cluster id -> its task keys (`task_key`)."""
    placed: dict[str, dict[int, set[str]]] = field(default_factory=dict)
    """Agent -> stable cluster id -> the task keys of its noise texts placed in it."""

    def fingerprints(self) -> dict[str, str]:
        """Cluster key (`agent-c<id>`) -> a hash of its member runs: equal hashes mean the
        cluster has nothing new to induce from."""
        return {c.key: _fingerprint(c) for c in self.clusters}


@dataclass
class ClusterOutcome:
    """What inducing one cluster gave."""

    key: str
    """The cluster key (`agent-c<id>`, the id of its first workflow)."""
    workflows: list[Workflow] = field(default_factory=list)
    """Drafts."""
    keys: dict[str, dict[str, int]] = field(default_factory=dict)
    """Workflow id -> the task texts it was induced from, each with how many of its runs had
    it (0 for each of the cluster's tasks when none of its source runs is known)."""
    notes: list[str] = field(default_factory=list)
    """Pitfall notes, for a cluster with failed runs only."""
    error: str | None = None
    """Why induction failed, if it did."""
    reason: str | None = None
    """The kind of failure, if it failed: the reason of an `LLMError` or an
    `InductionRefused`, else the exception's type name."""
    usage: Usage = field(default_factory=Usage)
    """The LLM usage of inducing it, a failed attempt included."""


def in_run_order(runs: Iterable[Trajectory]) -> list[Trajectory]:
    """Runs in the order a cluster's runs are induced in: newest first, then by id (the order
    `Store.list_trajectories` reads them in; total, as ids are unique)."""
    return sorted(sorted(runs, key=lambda t: t.id), key=lambda t: t.created_at, reverse=True)  # stable


def task_key(task: str) -> str:
    """A short, stable key of a task text (memberships are kept as keys, not texts)."""
    return hashlib.sha256(task.encode()).hexdigest()[:12]


def fingerprint(runs: Iterable[tuple[str, bool]]) -> str:
    """A hash of a cluster's runs with a known outcome, as (id, success) pairs."""
    ids = sorted(f"{rid}:{success}" for rid, success in runs)
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


def _fingerprint(cluster: ClusterInput) -> str:
    return fingerprint((t.id, t.success is True) for t in [*cluster.successes, *cluster.failures])


def _failure(err: Exception) -> str:
    """How a cluster's failure is reported: the error's type and message; for a request that
    failed (`LLMError` "unavailable"), those of the request's own error."""
    cause = err.__cause__ if isinstance(err, LLMError) and err.reason == "unavailable" else None
    shown = cause if isinstance(cause, Exception) else err
    return f"{type(shown).__name__}: {shown}"


def _reason(err: Exception) -> str:
    """The kind of a cluster's failure, to count failures by."""
    if isinstance(err, LLMError | InductionRefused):
        return err.reason
    return type(err).__name__


def induce_cluster(cluster: ClusterInput, inducer: Inducer) -> ClusterOutcome:
    """Induce one cluster; an error is reported in the outcome (with the LLM usage its
    `LLMError` carries), never raised. A cluster planned as its members' ids is read first
    (`ClusterMembers.input`): given one here, it would induce nothing, so that is an error."""
    if not isinstance(cluster, ClusterInput):
        raise TypeError(f"induce_cluster needs a ClusterInput (its runs read), not {type(cluster).__name__}")
    key = cluster.key
    outcome = ClusterOutcome(key)
    try:
        induced = inducer.induce(cluster)
    except Exception as err:  # one bad cluster never sinks the run
        log.warning("induction of %s failed: %s", key, err)
        outcome.error, outcome.reason = _failure(err), _reason(err)
        if isinstance(err, LLMError):
            outcome.usage = err.usage
        return outcome
    outcome.usage = induced.usage
    if not induced.workflows and cluster.failures:
        outcome.notes = standalone_pitfalls(cluster.failures, cluster.example_literals)
    runs = {t.id: t for t in [*cluster.successes, *cluster.failures]}
    task_of = {rid: t.task for rid, t in runs.items()}
    for w in induced.workflows:
        sources = [runs[i] for i in w.source_trajectory_ids if i in runs]
        if sources and all(is_demonstration(t) for t in sources):
            w = w.model_copy(update={"provenance": w.provenance.model_copy(update={"mode": "offline"})})
        outcome.workflows.append(w)
        own = Counter(task_of[i] for i in w.source_trajectory_ids if i in task_of)
        outcome.keys[w.id] = dict(sorted(own.items())) or dict.fromkeys(sorted(set(task_of.values())), 0)
    return outcome


def assemble(plan: ClusterPlan, outcomes: Sequence[ClusterOutcome]) -> InductionResult:
    """Gather the outcomes of a plan's clusters into one result (near-duplicates merged)."""
    failed: dict[str, str] = {}
    reasons: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    drafts: list[Workflow] = []
    keys: dict[str, dict[str, int]] = {}
    usage = Usage()
    for outcome in outcomes:
        if outcome.error is not None:
            failed[outcome.key] = outcome.error
            reasons[outcome.key] = outcome.reason or "error"
        if outcome.notes:
            notes[outcome.key] = outcome.notes
        drafts += outcome.workflows
        keys.update(outcome.keys)
        usage = usage + outcome.usage
    workflows = compose_workflows(merge_duplicates(drafts, keys))
    return InductionResult(
        workflows=distinct(workflows),  # no two of an agent named or described alike
        notes=notes,
        clusterings=plan.clusterings,
        keys=keys,
        failed=failed,
        failed_reasons=reasons,
        memberships=plan.memberships,
        usage=usage,
    )


def merge_duplicates(workflows: Sequence[Workflow], keys: dict[str, dict[str, int]]) -> list[Workflow]:
    """Merge near-duplicates: drafts of one agent with the same steps (actions and argument
    keys) become one, which keeps the larger cluster's id and every source run and key."""
    groups: dict[tuple[str, str, tuple[tuple[str, tuple[str, ...]], ...]], list[Workflow]] = defaultdict(list)
    for w in workflows:
        shape = tuple((s.action, tuple(sorted(s.args))) for s in w.steps)
        groups[(w.agent, w.scope, shape)].append(w)
    merged: list[Workflow] = []
    for group in groups.values():
        group.sort(key=lambda w: (-len(w.source_trajectory_ids), w.id))
        head = group[0]
        for other in group[1:]:
            merged_keys = Counter(keys.get(head.id, {}))
            merged_keys.update(keys.pop(other.id, {}))
            keys[head.id] = dict(sorted(merged_keys.items()))
        sources = sorted({s for w in group for s in w.source_trajectory_ids})
        # The same advice from two drafts differs only in its evidence "(n/m failures)".
        advice: dict[str, Pitfall] = {}
        for p in (p for w in group for p in w.pitfalls):
            advice.setdefault(pitfall_statement(p.text), p)
        pitfalls = list(advice.values())[:2]
        merged.append(head.model_copy(update={"source_trajectory_ids": sources, "pitfalls": pitfalls}))
    return sorted(merged, key=lambda w: w.id)


def plan_versions(
    drafts: Sequence[Workflow],
    current: Mapping[str, Workflow],
    *,
    run_id: str,
    revive: Collection[str] = frozenset(),
) -> list[Workflow]:
    """The new versions to commit: a draft equal to the current version creates nothing, a
    changed one becomes latest + 1 with its parent, a new id becomes v1.

    A workflow in `revive` (deprecated for its own failures, nothing of it served, its cluster
    re-induced) gets a new version even when the draft says the same: a fresh candidate on
    trial, rather than a cluster that no workflow serves again."""
    planned: list[Workflow] = []
    for draft in drafts:
        provenance = draft.provenance.model_copy(update={"run_id": run_id})
        now = current.get(draft.id)
        if now is None:
            planned.append(
                draft.model_copy(update={"version": 1, "parent_version": None, "provenance": provenance})
            )
        elif now.content_hash() != draft.content_hash() or draft.id in revive:
            update = {"version": now.version + 1, "parent_version": now.version, "provenance": provenance}
            planned.append(draft.model_copy(update=update))
    return planned
