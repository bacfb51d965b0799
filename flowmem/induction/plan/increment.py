"""What an incremental induction run does, decided from the last run's state and the columns of
the namespace's trajectories: pure, so `jobs/` only reads those and writes the outcome.

`place_new_runs` puts the task texts new since the last fit in its clusters (`assign`), or says
why the clusters must be fitted again instead; it fingerprints and counts every cluster and
picks those to induce (changed materially, or pending) and those whose new runs wait.
`next_state` is what the run leaves for the next one. The task vectors it places from are asked
for once, every agent's new texts together (`Embeddings.nearest`): an array in memory
(`InMemory`), or `jobs.incremental` reading them in batches.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from flowmem.induction.base import workflow_id
from flowmem.induction.cluster.assign import MIN_CHANGE, material, nearest_labels
from flowmem.induction.plan.orchestrate import fingerprint, task_key
from flowmem.models import Fit, FrozenMemberships, Retirement, RunState

__all__ = [
    "REFIT_SHARE",
    "Ask",
    "Columns",
    "Embeddings",
    "InMemory",
    "Memberships",
    "Placement",
    "freeze",
    "next_state",
    "place_new_runs",
    "stored_clustering_unusable",
    "thaw",
    "to_induce_after_refit",
]

REFIT_SHARE = 0.1
"""The clusters are fitted again once the task texts new since the last fit reach this share of
those it clustered: only a fit forms, merges or splits clusters."""

Memberships = dict[str, dict[int, set[str]]]
"""Agent -> stable cluster id -> task keys (`task_key`); the mutable form of a state's."""

Cluster = tuple[str, int]
"""(agent, stable cluster id)."""


@dataclass(frozen=True)
class Ask:
    """One agent's new task texts to place: the rows of its known texts (one a text, by task
    key: among equally near ones the first wins), their clusters' ids, and the rows of its
    new texts (one a text)."""

    known: Sequence[int]
    labels: Sequence[int]
    """The stable cluster id of each known row."""
    new: Sequence[int]


class Embeddings(Protocol):
    """The task vectors of a namespace's rows, as placement asks for them."""

    def nearest(self, asks: Mapping[str, Ask]) -> dict[str, list[int]]:
        """For each agent asked, each new row's label: that of the known row whose vector is
        the most similar (`assign.nearest_labels`)."""
        ...


@dataclass(frozen=True)
class InMemory:
    """Every row's task vector in one array (`Embeddings`)."""

    vectors: npt.NDArray[np.float32]
    """A 2-D array: each row's task embedding."""

    def nearest(self, asks: Mapping[str, Ask]) -> dict[str, list[int]]:
        """As `Embeddings.nearest`."""
        v = self.vectors
        return {a: nearest_labels(v[list(q.known)], q.labels, v[list(q.new)]) for a, q in asks.items()}


@dataclass(frozen=True)
class Columns:
    """The columns of every trajectory of a namespace a run plans from, one entry per row."""

    ids: Sequence[str]
    """Trajectory ids."""
    agents: Sequence[str]
    """Each run's agent."""
    tasks: Sequence[str]
    """Each run's task text."""
    success: Sequence[bool | None]
    """Each run's outcome (None: not known)."""
    vectors: Embeddings | npt.NDArray[np.float32]
    """Each run's task embedding: a 2-D array, or what reads them when new texts are placed."""

    def embeddings(self) -> Embeddings:
        """The vectors as placement asks for them."""
        return InMemory(self.vectors) if isinstance(self.vectors, np.ndarray) else self.vectors


@dataclass(frozen=True)
class Placement:
    """The new runs placed in the stored clusters: what the run induces and what it keeps."""

    chosen: dict[Cluster, list[int]] = field(default_factory=dict)
    """The clusters to induce (changed materially, or pending) -> their rows, in column order."""
    fingerprints: dict[str, str] = field(default_factory=dict)
    """Every cluster's fingerprint now (a sub-routine's: as it was kept)."""
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Every cluster's (successes, failures) now."""
    placed: Memberships = field(default_factory=dict)
    """The stored placements with the new task texts added."""
    deferred: list[str] = field(default_factory=list)
    """Clusters with new runs too few to induce them again yet (`assign.material`)."""


def thaw(members: FrozenMemberships | None) -> Memberships | None:
    """A mutable copy of memberships a state kept (None stays None)."""
    if members is None:
        return None
    return {agent: {cid: set(keys) for cid, keys in ids.items()} for agent, ids in members.items()}


def freeze(members: Mapping[str, Mapping[int, Iterable[str]]]) -> FrozenMemberships:
    """Memberships as a state keeps them."""
    return {agent: {cid: frozenset(keys) for cid, keys in ids.items()} for agent, ids in members.items()}


_NOT_KEPT = "the last run kept no clustering to place new tasks in"


def _kept(state: RunState) -> tuple[FrozenMemberships, FrozenMemberships, Fit] | None:
    """The fitted memberships, the placements and the fit `state` kept (None: not all)."""
    if state.clusters is None or state.placed is None or state.fit is None:
        return None
    return state.clusters, state.placed, state.fit


def stored_clustering_unusable(state: RunState, *, signature: str) -> str | None:
    """Why new tasks cannot be placed in the clustering `state` kept (None: they can);
    `signature` is the clustering settings now (`Fit.settings`)."""
    kept = _kept(state)
    if kept is None:
        return _NOT_KEPT
    if kept[2].settings != signature:
        return "the clustering settings changed"
    return None


def place_new_runs(
    state: RunState,
    columns: Columns,
    *,
    signature: str,
    min_tasks: int,
    pending: Set[str],
    refit_share: float = REFIT_SHARE,
    min_change: float = MIN_CHANGE,
) -> Placement | str:
    """Place the runs new since the last run (`state`) in its clusters; or why the clusters
    must be fitted again instead. `pending` clusters are induced whatever changed; an agent
    with no cluster and `min_tasks` task texts is clustered by a refit."""
    why, kept = stored_clustering_unusable(state, signature=signature), _kept(state)
    if why is not None or kept is None:
        return why or _NOT_KEPT
    fitted, placed_before, fit = kept
    keys = [task_key(t) for t in columns.tasks]
    where = _where(fitted, placed_before)
    first = _first_rows(columns.agents, keys)
    why = _why_refit(where, first, fit, min_tasks=min_tasks, refit_share=refit_share)
    if why:
        return why
    placed = thaw(placed_before) or {}
    _place(columns.embeddings(), first, where, placed)
    runs: dict[Cluster, list[int]] = defaultdict(list)  # cluster -> its rows, in column order
    for i, (agent, key) in enumerate(zip(columns.agents, keys, strict=True)):
        label = where[agent].get(key)
        if label is not None:
            runs[(agent, label)].append(i)
    fingerprints, sizes = _measure(columns, runs)
    chosen, deferred = _choose(runs, fingerprints, sizes, state, pending=pending, min_change=min_change)
    # Sub-routines, like clusters, are cut at a fit only: kept as they are until the next one.
    for key in state.subroutines:
        fingerprints[key] = state.fingerprints.get(key, "")
        sizes[key] = state.sizes.get(key, (0, 0))
    return Placement(chosen, fingerprints, sizes, placed, deferred)


def _where(fitted: FrozenMemberships, placed: FrozenMemberships) -> dict[str, dict[str, int]]:
    """Agent -> task key -> the stable id of the cluster it is in."""
    where: dict[str, dict[str, int]] = defaultdict(dict)
    for source in (fitted, placed):
        for agent, ids in source.items():
            for cid, members in ids.items():
                where[agent].update(dict.fromkeys(members, cid))
    return where


def _first_rows(agents: Sequence[str], keys: Sequence[str]) -> dict[str, dict[str, int]]:
    """Agent -> the key of each of its task texts -> the first row with it."""
    first: dict[str, dict[str, int]] = defaultdict(dict)
    for i, (agent, key) in enumerate(zip(agents, keys, strict=True)):
        first[agent].setdefault(key, i)
    return first


def _why_refit(
    where: Mapping[str, Mapping[str, int]],
    first: Mapping[str, Mapping[str, int]],
    fit: Fit,
    *,
    min_tasks: int,
    refit_share: float,
) -> str | None:
    """Why the new runs change the clustering materially, if they do."""
    if any(where[a].keys() - first.get(a, {}).keys() for a in where):
        return "runs the clustering holds are no longer stored"
    for agent, present in first.items():
        if present.keys() <= where.get(agent, {}).keys():
            continue
        if agent not in fit.agents:
            return f"a new agent, {agent}"
        if not where.get(agent) and len(present) >= min_tasks:
            return f"{agent} had too few tasks for a cluster and now has {len(present)}"
    grown = sum(len(p) for p in first.values()) - fit.texts
    if grown >= refit_share * max(1, fit.texts):
        return f"{grown} tasks new since the clusters were fitted on {fit.texts} (at least {refit_share:.0%})"
    return None


def _place(
    vectors: Embeddings,
    first: Mapping[str, Mapping[str, int]],
    where: dict[str, dict[str, int]],
    placed: Memberships,
) -> None:
    """Put each new task text in the cluster of the stored text nearest to it (`where` and
    `placed` take it); an agent with no cluster keeps its tasks out, as a fit would. Every
    agent's texts are asked for at once: a reader of the store reads the vectors once."""
    asks: dict[str, Ask] = {}
    news: dict[str, list[str]] = {}
    for agent, rows in sorted(first.items()):
        known = where.get(agent, {})
        new = [k for k in rows if k not in known]
        if not known or not new:
            continue
        old = sorted(k for k in rows if k in known)
        asks[agent] = Ask([rows[k] for k in old], [known[k] for k in old], [rows[k] for k in new])
        news[agent] = new
    if not asks:
        return
    found = vectors.nearest(asks)
    for agent, new in news.items():
        for key, cid in zip(new, found[agent], strict=True):
            where[agent][key] = cid
            placed.setdefault(agent, {}).setdefault(cid, set()).add(key)


def _measure(
    columns: Columns, runs: Mapping[Cluster, list[int]]
) -> tuple[dict[str, str], dict[str, tuple[int, int]]]:
    """Every cluster's fingerprint and (successes, failures), over its runs with an outcome."""
    fingerprints: dict[str, str] = {}
    sizes: dict[str, tuple[int, int]] = {}
    ids, success = columns.ids, columns.success
    for (agent, cid), rows in runs.items():
        outcomes = [(ids[i], bool(success[i])) for i in rows if success[i] is not None]
        key = workflow_id(agent, cid)
        fingerprints[key] = fingerprint(outcomes)
        sizes[key] = (sum(s for _, s in outcomes), sum(not s for _, s in outcomes))
    return fingerprints, sizes


def _choose(
    runs: Mapping[Cluster, list[int]],
    fingerprints: Mapping[str, str],
    sizes: Mapping[str, tuple[int, int]],
    state: RunState,
    *,
    pending: Set[str],
    min_change: float,
) -> tuple[dict[Cluster, list[int]], list[str]]:
    """The clusters to induce: changed materially since their last induction, or pending;
    and those that changed but wait."""
    before, kept = state.fingerprints, state.sizes
    chosen: dict[Cluster, list[int]] = {}
    deferred: list[str] = []
    for agent, cid in sorted(runs):
        key = workflow_id(agent, cid)
        if before.get(key) == fingerprints[key] and key not in pending:
            continue
        if (
            key in pending
            or key not in kept
            or key not in before
            or material(kept[key], sizes[key], min_change=min_change)
        ):
            chosen[(agent, cid)] = runs[(agent, cid)]
        else:
            deferred.append(key)
    return chosen, deferred


def to_induce_after_refit(
    fingerprints: Mapping[str, str], before: RunState | None, *, pending: Set[str]
) -> set[str]:
    """After a fit, the clusters to induce: those whose runs changed since `before` (every
    cluster when there is no state to compare with) and the `pending` ones."""
    kept = before.fingerprints if before is not None else {}
    return {key for key, now in fingerprints.items() if kept.get(key) != now or key in pending}


def next_state(
    before: RunState | None,
    *,
    fingerprints: Mapping[str, str],
    sizes: Mapping[str, tuple[int, int]],
    deferred: Sequence[str],
    failed: Sequence[str],
    clusters: Memberships,
    placed: Memberships,
    fit: Fit | None,
    refit: str | None,
    subroutines: Iterable[str],
    retired: Iterable[Retirement],
) -> RunState:
    """What a run leaves for the next one: each cluster's fingerprint and counts when it was
    last induced (a `deferred` cluster keeps those of `before`; a `failed` one has no
    fingerprint, so it is induced again), the fitted memberships, the placements, the fit, the
    sub-routines' keys (a refit's `subroutines`, or those kept) and the versions it retired."""
    kept = before or RunState()
    fingerprints_now, sizes_now = dict(fingerprints), dict(sizes)
    for key in deferred:
        fingerprints_now[key], sizes_now[key] = kept.fingerprints[key], kept.sizes[key]
    return RunState(
        fingerprints={k: v for k, v in fingerprints_now.items() if k not in failed},
        sizes=sizes_now,
        failed=tuple(failed),
        clusters=freeze(clusters),
        placed=freeze(placed),
        fit=fit,
        refit=refit,
        subroutines=tuple(sorted(subroutines)) if refit is not None else kept.subroutines,
        retired=tuple(retired),
    )
