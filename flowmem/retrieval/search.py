"""One search, pure: the served workflows a task gets, best first, from a snapshot of the index.

A search scores every served workflow by its nearest source task (cosine, less a little where
other workflows hold part of that task's runs: `nearest`), multiplies by the version's rank
factor (from the Beta posterior of its outcomes), and keeps the best (`ranking.Snapshot`). A
task from no known domain gets no memory keyed by example tasks (the relevance floor:
`floor_keeps`). What is served together is then chosen: for a task seen before, what covers
the runs that worked for it (`cover`); otherwise those within the relevance gap of the first
(`serving.within_gap`), sub-routines only where they add an action (`serving.compose`).

A workflow's active version is served; a newer candidate version on trial is served instead
to a share of requests (decided by a hash of the task, so the same task gets the same
version). The index that keeps the snapshot fresh is `agents.served_index.ServedIndex`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt

from flowmem.models import Workflow
from flowmem.retrieval.beside import Beside, Pending
from flowmem.retrieval.cover import Evidence, Lookup, cover
from flowmem.retrieval.ranking import Ask, Snapshot
from flowmem.retrieval.serving import CANDIDATES, compose, within_gap

__all__ = ["Bounds", "Hit", "floor_keeps", "search"]


@dataclass(frozen=True)
class Hit:
    """One search result."""

    workflow: Workflow
    """The served version."""
    score: float
    """similarity × rank factor."""
    similarity: float
    """Cosine similarity of the task and the workflow's nearest source task, less
    `SHARE_WEIGHT` × the part of that task's runs other workflows hold (`nearest`)."""
    by_example: bool = False
    """Whether the workflow is keyed by example tasks, and so held to the relevance floor
    (`floor_keeps`)."""


@dataclass(frozen=True)
class Bounds:
    """What limits what a search serves beyond its k (`Settings` gives each)."""

    gap: float | None = None
    """A memory scoring more than this below the first is not served (`within_gap`)."""
    ratio: float | None = None
    """A memory scoring below this share of the first's score is not served (`within_gap`)."""
    floor: float | None = None
    """A task that neither its nearest example-keyed memory nor a stored run's task is as
    similar to as this gets none of those memories: it is from no known domain
    (`Settings.floor`)."""
    cover_weight: float | None = None
    """When a task recurs, what is served is chosen with its nearest successful stored runs as
    evidence (`cover`, `Settings.cover_weight`); None: never."""


def _recurring(
    evidence: Evidence, task: str, query: npt.NDArray[np.float32], bounds: Bounds, any_memory: bool
) -> list[Sequence[str]]:
    """The evidence runs a recurring task is served by (`Evidence.runs_for`); none when the
    bounds do not choose by evidence or there is no memory to choose among."""
    return evidence.runs_for(task, query) if bounds.cover_weight is not None and any_memory else []


@dataclass(frozen=True)
class _Now:
    """A lookup the search makes itself, once it has ranked: the runs only, the familiar check
    left to `floor_keeps`, which asks it only when no memory keyed by example tasks clears the
    floor."""

    evidence: Evidence
    task: str
    query: npt.NDArray[np.float32]
    bounds: Bounds

    def result(self) -> Lookup:
        return Lookup(_recurring(self.evidence, self.task, self.query, self.bounds, True), None)

    def cancel(self) -> None:
        """Nothing runs."""


def _looked(
    evidence: Evidence, task: str, query: npt.NDArray[np.float32], bounds: Bounds, beside: Beside | None
) -> _Now | Pending[Lookup]:
    """What a search asks of the stored runs (`Evidence.lookup`): in `beside`'s helper thread
    when the stored tasks have an HNSW (faiss lets go of the GIL while it searches, and the
    ranking's search or product runs meanwhile on the other core), else by the search once it
    has ranked (a handoff costs more than a product over a few thousand tasks saves)."""
    if beside is None or evidence.index.ann is None:
        return _Now(evidence, task, query, bounds)
    runs = bounds.cover_weight is not None
    return beside.run(lambda: evidence.lookup(task, query, bounds.floor, runs=runs))


SURE = 0.9
"""The share of the floor below which the stored tasks' HNSW is taken at its word that a task
is of no known domain, without the ranking (`_unknown`). Nearer the floor, a task whose
nearest stored task that HNSW missed may have a key the ranking's HNSW finds above it (the
graph search is least sure far from every point). Of 2,000 tasks from no known domain on a
store of 100k workflows and their runs (`bench/recurring.py`'s), served otherwise than in
turn: 6 with 1 (the floor itself), 2 with 0.95, none with 0.9 or 0.85. Such a task waits for
the ranking, as in turn."""

_Ranked = tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.float64],
    npt.NDArray[np.float64],
    Lookup,
]


def _ranked(
    snap: Snapshot,
    evidence: Evidence,
    query: npt.NDArray[np.float32],
    ask: Ask,
    bounds: Bounds,
    beside: Beside | None,
) -> _Ranked | None:
    """The ranked versions, their scores and similarities, and what the stored runs say of the
    task (`_looked`); None: nothing to serve. A task of no known domain on a store whose
    memories are all keyed by stored tasks (`_unknown_first`) is answered by the stored tasks'
    HNSW alone (`_unknown`)."""
    if beside is not None and _unknown_first(snap, evidence, ask.task, bounds, beside):
        return _unknown(snap, evidence, query, ask, bounds)
    looked = _looked(evidence, ask.task, query, bounds, beside)
    try:
        ranked, scores, similarity = snap.ranked(query, ask)
    except BaseException:
        looked.cancel()
        raise
    if not len(ranked):
        looked.cancel()
        return None
    return ranked, scores, similarity, looked.result()


def _unknown(
    snap: Snapshot,
    evidence: Evidence,
    query: npt.NDArray[np.float32],
    ask: Ask,
    bounds: Bounds,
) -> _Ranked | None:
    """`_ranked` for a task that `_unknown_first` asks the stored tasks first: nothing when the
    stored tasks' HNSW finds none within `SURE` of the floor of it (then no key is, and the
    floor keeps none), else the ranking, in turn. Nothing runs beside that search: two HNSW
    searches at once (~64 MB each at 100k) take each other's caches, and a ranking begun
    beside it on a guess is run for nothing for a task of no known domain, the common case."""
    floor = bounds.floor
    assert floor is not None
    nearest = evidence.nearest_seen(query)
    if nearest < SURE * floor:
        return None  # no key is near it: the floor keeps none
    ranked, scores, similarity = snap.ranked(query, ask)
    return (ranked, scores, similarity, Lookup([], nearest >= floor)) if len(ranked) else None


def _unknown_first(snap: Snapshot, evidence: Evidence, task: str, bounds: Bounds, beside: Beside) -> bool:
    """Whether a search asks the stored tasks first whether the task is of a known domain, and
    serves nothing when it is not: there is a floor, the stored tasks have an HNSW, no stored
    run has the task's template (it cannot recur), every served memory is keyed by example
    tasks, and every key is a stored task's vector (`Evidence.keys_among`, worked out in the
    helper). A task no stored task is `floor` similar to is then that similar to no key, and
    the floor keeps none of them, whatever the ranking."""
    if not bounds.floor or evidence.index.ann is None or not snap.rows.by_example.all():
        return False
    if evidence.knows(task):
        return False
    return evidence.keys_among(snap.index.vectors, beside.later)


def floor_keeps(
    evidence: Evidence,
    task: str,
    query: npt.NDArray[np.float32],
    bounds: Bounds,
    similarity: Sequence[float],
    by_example: Sequence[bool],
) -> list[bool]:
    """The relevance floor, the one rule of every surface: which of some memories `task`
    (embedded as `query`) may be served, given each one's similarity to it and whether it is
    keyed by example tasks. `search` applies it to the served workflows, `search_workflow` to
    them and the recorded procedures it returns (each keyed by its own task), and `flowmem
    eval` too (`Evidence.floor_keeps`). All of them, unless there is a floor, the task does not
    recur (`Evidence.runs_for`), no task the namespace has stored a run of is at least `floor`
    similar to it (`Evidence.familiar`) and the nearest memory keyed by example tasks is not
    either (`serving.above_floor`): then only those keyed by their own text."""
    runs = _recurring(evidence, task, query, bounds, bool(len(similarity)))
    return evidence.floor_keeps(query, bounds.floor, similarity, by_example, recurs=bool(runs))


def search(
    snap: Snapshot,
    evidence: Evidence,
    task: str,
    query: npt.NDArray[np.float32],
    k: int,
    bounds: Bounds,
    *,
    ok: npt.NDArray[np.bool_] | None = None,
    share: float = 0.0,
    beside: Beside | None = None,
) -> list[Hit]:
    """The k best served workflows for a task (embedded as `query`), at most; `ok` limits the
    versions (an agent's, a scope's), `share` is the candidates' share on trial. With
    `beside`, what the search asks of the stored runs is looked up in its helper thread while
    the served workflows are ranked, when both search an HNSW (`_looked`)."""
    if not len(snap):
        return []
    ask = Ask(task, max(k, CANDIDATES), ok, share)
    found = _ranked(snap, evidence, query, ask, bounds, beside)
    if found is None:
        return []
    ranked, scores, similarity, looked = found
    runs, familiar = looked.runs, looked.familiar
    by_example = snap.rows.by_example[ranked]
    floor, near = bounds.floor, similarity.tolist()
    keep = evidence.floor_keeps(query, floor, near, by_example.tolist(), recurs=bool(runs), familiar=familiar)
    if not all(keep):  # a task from no known domain
        kept = np.array(keep)
        ranked, scores, similarity, by_example = (
            ranked[kept],
            scores[kept],
            similarity[kept],
            by_example[kept],
        )
        if not len(ranked):
            return []
    n = within_gap(scores.tolist(), bounds.gap, bounds.ratio)
    if runs:  # a task seen before: what covers what worked for it (`cover`)
        candidates = [snap.rows.actions(int(i)) for i in ranked]
        top = cover(candidates, runs, k, bounds.cover_weight or 0.0, keep=[0])
    elif snap.subroutines and snap.rows.subroutine[ranked[:n]].any():
        top = compose(_Lazy(snap, ranked[:n].tolist()), k)
    else:  # what compose gives task-level workflows, without building them
        top = list(range(min(k, n)))
    served = snap.workflows([int(ranked[p]) for p in top])  # built together: one validation
    scored, near, example = scores.tolist(), similarity.tolist(), by_example.tolist()
    return [Hit(w, scored[p], near[p], example[p]) for w, p in zip(served, top, strict=True)]


class _Lazy(Sequence[Workflow]):
    """Served versions by position, each built only when `compose` looks at it."""

    def __init__(self, snap: Snapshot, positions: list[int]) -> None:
        self.snap, self.positions = snap, positions

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, i: int) -> Workflow: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Workflow]: ...
    def __getitem__(self, i: int | slice) -> Workflow | Sequence[Workflow]:
        if isinstance(i, slice):
            return [self.snap.workflow(p) for p in self.positions[i]]
        return self.snap.workflow(self.positions[i])
