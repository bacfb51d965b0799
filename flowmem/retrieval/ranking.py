"""The served index's arrays and its exact ranking: brute force, or an ANN with a re-rank.

A snapshot holds the served versions as columns (`Columns`; the store reads them as
`storage.served.ServedRows`): their keys as
one float32 matrix with an owner per key, rank factors, agent and scope codes, trial pairs;
no `Workflow` object until one is served (`Snapshot.workflow`) or kept built ahead
(`retrieval.built`).

`Snapshot.ranked` returns the best `m` servable versions by score (similarity × rank factor),
ties by position, exactly as sorting every version would. Up to `ann_min` keys it scores
every key (one matrix-vector product, one BLAS thread: steadier and faster than two for one
query), and from `_PROVEN_FROM` keys takes the `_FIRST_KEYS` best keys by one
`argpartition` and ranks their versions only, when the m-th of those scores above the last of
the keys (no other version can: a version scores as its best key); otherwise every version.
Past `ann_min`, once the ANN is built, it re-ranks exactly the versions owning the keys the
ANN returns, and stops when the m-th best score is above what any version it has not looked
at could score; otherwise it asks for more keys, and past a limit scores every key. Both are
`Snapshot._proven`. The ANN holds each key scaled by its version's rank factor when it was
built, so what a version it has not looked at could score is the farthest returned key's
scaled product times the largest ratio of a key's factor now to that one (1 for a factor
unchanged), the keys whose factor grew most scored exactly beside it (`Snapshot.boost`).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from flowmem.models import UsageStats, Workflow
from flowmem.policy.lifecycle import DEFAULT_PARAMS, LifecycleParams, rank_factor, serve_candidate
from flowmem.retrieval.align import Pattern
from flowmem.retrieval.ann import AnnSlot, KeyANN, KeyBase
from flowmem.retrieval.ann_reuse import Borrowed, borrow, key_base
from flowmem.retrieval.blas import ONE_BLAS_THREAD, product
from flowmem.retrieval.boost import Boost, carried, key_scale, work_out
from flowmem.retrieval.built import Built, to_keep
from flowmem.retrieval.nearest import COSINE_BITS, ExampleIndex, snap_cosines
from flowmem.retrieval.unique import grouped

__all__ = ["ANN_MIN", "AnnSlot", "Columns", "Snapshot"]


class Columns(Protocol):
    """The served versions of one namespace as columns, by workflow id, newest first within a
    workflow: what a snapshot ranks (`storage.served.ServedRows` is the store's)."""

    @property
    def ids(self) -> Sequence[str]: ...
    @property
    def versions(self) -> npt.NDArray[np.int64]: ...
    @property
    def statuses(self) -> Sequence[str]: ...
    @property
    def stats(self) -> Sequence[UsageStats]:
        """Live usage stats."""

    @property
    def agents(self) -> npt.NDArray[np.int32]:
        """Per version: its agent's position in `agent_names`."""

    @property
    def agent_names(self) -> Sequence[str]: ...
    @property
    def scopes(self) -> npt.NDArray[np.int32]: ...
    @property
    def scope_names(self) -> Sequence[str]: ...
    @property
    def keys(self) -> npt.NDArray[np.float32]:
        """Every version's retrieval keys, one row each, a version's keys together in order."""

    @property
    def owners(self) -> npt.NDArray[np.int64]:
        """Per key: the position of its version."""

    @property
    def shares(self) -> npt.NDArray[np.float64]:
        """Per key: its share of its task."""

    @property
    def subroutine(self) -> npt.NDArray[np.bool_]:
        """Per version: whether it is a sub-routine."""

    @property
    def by_example(self) -> npt.NDArray[np.bool_]:
        """Per version: whether it is keyed by example tasks (held to the relevance floor)."""

    @property
    def candidates(self) -> object | None:
        """What these versions were picked among: one object per whole read of the store, the
        same for every change of status read since (None: not known)."""

    @property
    def picked(self) -> npt.NDArray[np.int64] | None:
        """Per version: its position among `candidates` (None: not known)."""

    def text_bytes(self) -> npt.NDArray[np.int64]:
        """Per version: the bytes of text its row holds (what its built `Workflow`'s memory
        follows: `built.estimate`)."""

    def __len__(self) -> int: ...
    def actions(self, i: int) -> Pattern:
        """The actions of the version at position i (`Workflow.pattern`), without its `Workflow`."""

    def workflow(self, i: int) -> Workflow:
        """The `Workflow` at position i, with its live status and stats."""

    def workflows(self, positions: Sequence[int]) -> list[Workflow]:
        """`workflow` of each of these positions, built together."""

    def sources(self) -> frozenset[str]:
        """The source trajectory ids of every version, without building a `Workflow`."""

    def drawing(self, runs: Collection[str]) -> dict[int, int]:
        """Position -> how many of these runs the version there was induced from, for the
        versions induced from any, without building a `Workflow`."""


_FIRST_KEYS = 64
"""Keys looked at first (the nearest by one `argpartition`, or the ANN's), at least twice the
versions asked for: their versions are scored exactly, and kept when proven the best
(`Snapshot._proven`); the ANN is then asked for twice as many. The ANN is first asked for no
more than its breadth (`ann.breadth`), as it looks at least at as many keys as it is asked for:
40 at 10k keys, for a search's 20 versions."""
_PROVEN_FROM = 2048
"""Keys from which brute force ranks the versions of the first keys alone (`_ranked_exact`):
below, ranking every version costs less than the proof (one `similarities_of`: 19 µs against
51 µs at 390 keys of 96 workflows, the WorkBench store; the same at 2,000; the same hits)."""
_HALF_STEP = 2.0 ** -(COSINE_BITS + 1)
"""Half the step cosines are rounded to (`nearest.snap_cosines`): what rounding adds at most."""
_MAX_KEYS = 4096
"""Past this many keys from the ANN, score every key instead."""
BOOSTED = 2048
"""Keys of the highest rank factors scored exactly beside the ANN's, at most (`Snapshot.boost`):
a version that outcomes ranked up (a factor up to 1.5) can outscore a closer one, so the most a
key the ANN did not return can score is its cosine bound times the largest factor of the keys
not scored, not of every key (with one version ranked up among 100k untried ones, the proof
failed and searches scored up to every key: p50 13.5 against 0.8 ms, `bench/outcomes.py`)."""
ANN_MIN = 5_000
"""Keys from which an ANN is built and used: `python bench/ann_crossover.py` times both paths
on one store, interleaved (p50, k=3; docs/performance.md): brute force 1.45x faster at 2.5k
keys, the ANN 1.37x faster at 5k, 2.1x at 10k and 3.5x at 20k (same hits at each), as the
key matrix (1.5 KB a key) outgrows the CPU caches."""


_SORT_ALL = 4
"""Up to this many times m finite scores, `_top` sorts them all (the re-rank's 64 keys for a
search's 20 versions: ~10 µs less than partitioning them first); past it, it partitions first."""


def _top(
    scores: npt.NDArray[np.float64], m: int, items: npt.NDArray[np.int64] | None = None
) -> npt.NDArray[np.int64]:
    """Positions of the m best finite scores, best first, ties by item (`items[position]`, or
    the position itself), as a stable sort of every version's score would give."""
    finite = np.isfinite(scores)
    if len(scores) <= _SORT_ALL * m and finite.all():  # a re-rank's keys, each servable: one sort
        return np.argsort(-scores, kind="stable")[:m] if items is None else np.lexsort((items, -scores))[:m]
    finite = np.flatnonzero(finite)
    if len(finite) > _SORT_ALL * m:  # else one sort of them all costs less than a partition first
        part = finite[np.argpartition(-scores[finite], m - 1)[:m]]
        finite = finite[scores[finite] >= scores[part].min()]
    ties = finite if items is None else items[finite]
    return finite[np.lexsort((ties, -scores[finite]))][:m]


Ranked = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]


class Ask(NamedTuple):
    """What one search asks of the ranking."""

    task: str
    """The task text (it decides which version of a trial pair is served)."""
    m: int
    """How many versions, at most."""
    ok: npt.NDArray[np.bool_] | None
    """The versions that may be served (an agent's, a scope's); None: every one."""
    share: float
    """The candidates' share on trial."""


"""Versions best first, their scores and their similarities (`Snapshot.ranked`)."""


_FIGURES = operator.attrgetter("successes", "failures")


def _factors(stats: Sequence[UsageStats], params: LifecycleParams) -> npt.NDArray[np.float64]:
    """Each version's rank factor (`rank_factor`), worked out once per distinct pair of
    outcome counts, what it depends on (`posterior`): the counts read by one C-level pass and
    grouped by one sort (`unique.grouped`: ~1.4–13 ms at 100k versions, against 10–150 ms
    for `np.unique(axis=0)` and ~50 ms a version at a time)."""
    if not stats:
        return np.zeros(0, dtype=np.float64)
    flat = itertools.chain.from_iterable(map(_FIGURES, stats))
    pairs = np.fromiter(flat, dtype=np.int64, count=2 * len(stats)).reshape(-1, 2)
    first, inverse = grouped(pairs[:, 0], pairs[:, 1])
    factors = np.array([rank_factor(stats[i], params) for i in first.tolist()], dtype=np.float64)
    return factors[inverse]


def _partners(rows: Columns) -> npt.NDArray[np.int64]:
    """Per version, the position of the other version of its workflow on trial beside it (a
    version not active and the workflow's active one, each the other's), else -1. Only the
    workflows of versions not active are looked at: at 100k versions, most active, one pass
    over the ids with a set (~5 ms, against ~100 ms for a dict of every active version)."""
    partner = np.full(len(rows), -1, dtype=np.int64)
    ids, statuses = rows.ids, rows.statuses
    waiting = [i for i, s in enumerate(statuses) if s != "active"]
    if not waiting:
        return partner
    wanted = {ids[i] for i in waiting}
    active: dict[str, int] = {}
    for i in [i for i, w in enumerate(ids) if w in wanted]:
        if statuses[i] == "active":
            active[ids[i]] = i  # the last one, as a dict of every active version keeps it
    for i in waiting:
        if (at := active.get(ids[i])) is not None:
            partner[i], partner[at] = at, i
    return partner


@dataclass
class Snapshot:
    """The served versions of one namespace, as arrays (see the module docstring)."""

    rows: Columns
    index: ExampleIndex
    factors: npt.NDArray[np.float64]
    """Per version: its rank factor."""
    partner: npt.NDArray[np.int64]
    """Per version on trial (a candidate and its workflow's active version): the other one; -1."""
    slot: AnnSlot = field(default_factory=AnnSlot)
    """Its ANN once built (in the background); until then search is brute force, or searches
    `borrowed`."""
    borrowed: Borrowed | None = None
    """The ANN of the snapshot this one replaced, over other keys, mapped to these
    (`retrieval.ann_reuse`): searched while `slot` has none."""
    ann_min: int = ANN_MIN
    fmax: float = field(init=False)
    """The largest rank factor (1 without versions): what bounds a version not looked at."""
    fmin: float = field(init=False)
    """The smallest rank factor (1 without versions)."""
    trials: bool = field(init=False)
    """Whether any version is on trial (has a partner)."""
    subroutines: bool = field(init=False)
    """Whether any version is a sub-routine (none: a search composes nothing)."""
    key_factors: npt.NDArray[np.float64] = field(init=False, repr=False)
    """Per key: its version's rank factor."""
    built: Built = field(default_factory=Built)
    """The `Workflow`s built of its versions, by position (`retrieval.built`): shared by the
    snapshots `with_stats` makes of this one (the same versions and statuses), an entry used
    only while its stats are the position's now (the same object)."""
    _boost: tuple[AnnSlot | None, Boost] | None = field(default=None, repr=False)
    """`boost`, once worked out, and for the ANN of which slot."""
    _keyed: npt.NDArray[np.float64] | None = field(default=None, repr=False)
    """`key_factors` when worked out by the maker (`with_stats`), else None."""

    @classmethod
    def of(
        cls, rows: Columns, params: LifecycleParams = DEFAULT_PARAMS, *, ann_min: int = ANN_MIN
    ) -> Snapshot:
        """A snapshot of served columns."""
        index = ExampleIndex(rows.keys, rows.owners, len(rows), rows.shares)
        return cls(rows, index, _factors(rows.stats, params), _partners(rows), ann_min=ann_min)

    def with_stats(self, rows: Columns, changed: Collection[int], params: LifecycleParams) -> Snapshot:
        """A snapshot of `rows`, which hold this one's versions, statuses and keys and differ in
        the stats of the versions at `changed` alone (an outcome reported): their rank factors
        computed anew, the key index, trial pairs and ANN shared, and the cache of built
        `Workflow`s too (an entry of a changed position is not used: its stats are not the
        position's; not copied: ~1 ms an outcome with a full cache)."""
        factors = self.factors.copy()
        for i in changed:
            factors[i] = rank_factor(rows.stats[i], params)
        keyed, moved = None, None
        if self.index.grouped:  # the changed versions' keys alone: not a gather of every key
            moved, counts = self.index.keys_of(np.fromiter(changed, dtype=np.int64, count=len(changed)))
            keyed = self.key_factors.copy()
            keyed[moved] = np.repeat(factors[list(changed)], counts)
        snap = Snapshot(
            rows,
            self.index,
            factors,
            self.partner,
            slot=self.slot,
            borrowed=self.borrowed,
            ann_min=self.ann_min,
            built=self.built,
            _keyed=keyed,
        )
        if moved is not None:
            snap._boost = self._carried(snap, moved)
        return snap

    def _carried(self, snap: Snapshot, moved: npt.NDArray[np.int64]) -> tuple[AnnSlot | None, Boost] | None:
        """This snapshot's `boost` carried over to `snap`, whose keys at `moved` alone have other
        factors (`boost.carried`); None: none was worked out, or it is to be anew."""
        found = self._boost
        if found is None:
            return None
        boost = carried(found[1], snap.key_factors, moved, BOOSTED)
        return None if boost is None else (found[0], boost)

    def key_base(self) -> KeyBase:
        """Who owns each of this snapshot's keys (what an ANN built over them is mapped by)."""
        rows = self.rows
        return key_base(rows.ids, rows.versions, self.index.owners, origin=rows.candidates, tags=rows.picked)

    def adopt(self, old: Snapshot) -> bool:
        """Take the ANN of `old`, the snapshot this one replaces: shared when it is over the
        same keys, else borrowed when it holds most of these (`ann_reuse.Borrowed.useful`).
        Returns whether a new ANN is still to be built for this snapshot (`to_build`): it
        wants one, and no ANN is taken, or the one taken is not built yet or not close enough
        (`ann_reuse.Borrowed.close`)."""
        if not self.wants_ann():
            return False
        lent = old.slot if old.slot.base is not None else None
        if (
            (lent is None or lent.ann is None)
            and old.borrowed is not None
            and old.borrowed.slot.ann is not None
        ):
            lent = old.borrowed.slot  # `old`'s own is not built yet: the one it searches
        if lent is None or lent.base is None:
            return True
        found = borrow(lent, lent.base, self.key_base())
        if (
            not found.gone
            and not len(found.extra)
            and bool(np.all(found.remap == np.arange(len(found.remap))))
        ):
            self.slot = lent  # the same keys in the same order
            return False
        if found.useful:
            self.borrowed = found
        # One not built yet may never be (a failed build): then a new one is built too.
        return not (found.close and lent.ann is not None)

    def drifted(self) -> bool:
        """Whether the rank factors moved so far from those its ANN scaled its keys by that
        more keys grew than `BOOSTED` (so a search bounds the others by a ratio above 1, and
        needs more of the ANN's keys): then a new ANN is to be built (`rebuild`). Not while
        one is being built."""
        if self.slot.base is not None and self.slot.ann is None:
            return False  # being built
        slot = self.slot if self.slot.ann is not None else self.borrowed.slot if self.borrowed else None
        if slot is None or slot.ann is None:
            return False
        return self.boost(slot, self.borrowed if slot is not self.slot else None).rest > 1.0

    def rebuild(self) -> AnnSlot:
        """A new slot to build an ANN of this snapshot's keys into (`to_build`), the ANN it
        has searched meanwhile (its own, over the same keys) borrowed until it lands."""
        if self.slot.ann is not None:
            keys = len(self.index.vectors)
            self.borrowed = Borrowed(self.slot, np.arange(keys, dtype=np.int64), np.zeros(0, np.int64), 0)
        self.slot, self._boost = AnnSlot(), None
        return self.to_build()

    def to_build(self) -> AnnSlot:
        """The slot a new ANN of this snapshot's keys is to be built into, marked as built over
        them (what a later snapshot maps, `adopt`)."""
        self.slot.base = self.key_base()
        self.slot.scale = self.key_factors.copy()
        return self.slot

    def boost(self, slot: AnnSlot | None = None, borrowed: Borrowed | None = None) -> Boost:
        """What a search of the ANN in `slot` (this snapshot's, or `borrowed`'s) scores exactly
        beside the keys it returns, and what bounds the others (worked out on the first
        search of that ANN).

        The ANN holds each key scaled by its rank factor when it was built (`to_build`), so
        it returns the keys of the highest cosine × that factor. A key's factor may have
        changed since (an outcome): the keys whose factor over that one grew, at most
        `BOOSTED` (every key of a ratio or none), are scored exactly, and the others are
        bounded by the largest ratio left: 1 while few grew, whatever the factors are."""
        found = self._boost
        if found is not None and found[0] is slot:
            return found[1]
        scale = key_scale(slot, borrowed, len(self.index.vectors))
        boost = work_out(self.key_factors, scale, BOOSTED, self.fmin)
        self._boost = (slot, boost)
        return boost

    def __post_init__(self) -> None:
        self.fmax = float(self.factors.max()) if len(self.factors) else 1.0
        self.fmin = float(self.factors.min()) if len(self.factors) else 1.0
        self.trials = bool(np.any(self.partner >= 0))
        self.subroutines = bool(self.rows.subroutine.any())
        self.key_factors = self._keyed if self._keyed is not None else self.factors[self.index.owners]
        self._keyed = None

    def __len__(self) -> int:
        return len(self.rows)

    def workflow(self, i: int) -> Workflow:
        """The served version at position i (built from its row once, then cached)."""
        return self.workflows([i])[0]

    def workflows(self, positions: Sequence[int]) -> list[Workflow]:
        """The served versions at these positions (those not built yet with their stats now
        built together, then remembered: `retrieval.built`)."""
        stats = self.rows.stats
        found = self.built.found(positions, stats)
        if len(found) == len(positions):  # each built already: a search's hits, most often
            return [found[i] for i in positions]
        missing = list(dict.fromkeys(i for i in positions if i not in found))
        if missing:
            built = dict(zip(missing, self.rows.workflows(missing), strict=True))
            found.update(built)
            self.built.add(built, stats)
        return [found[i] for i in positions]

    def to_keep(self, budget: int) -> list[int]:
        """The positions to keep built ahead within `budget` bytes (`built.to_keep`): the most
        served versions."""
        return to_keep([s.served for s in self.rows.stats], self.rows.text_bytes(), budget)

    def wants_ann(self) -> bool:
        """Whether this snapshot is large enough for an ANN."""
        return len(self.index.vectors) >= self.ann_min and self.index.grouped

    def mask(self, agent: str | None, scope: str | None) -> npt.NDArray[np.bool_] | None:
        """Versions of this agent and scope (None: no filter)."""
        if agent is None and scope is None:
            return None
        ok: npt.NDArray[np.bool_] | None = None
        for value, names, codes in (
            (agent, self.rows.agent_names, self.rows.agents),
            (scope, self.rows.scope_names, self.rows.scopes),
        ):
            if value is not None:
                hit = codes == names.index(value) if value in names else np.zeros(len(codes), bool)
                ok = hit if ok is None else ok & hit
        return ok

    def ranked(
        self,
        query: npt.NDArray[np.float32],
        ask: Ask,
    ) -> Ranked:
        """The best `ask.m` servable versions for the query, best first, with their scores and
        similarities."""
        few = ask.ok is not None and ask.ok.sum() * 4 < len(ask.ok)
        ann, borrowed = self.slot.ann, self.borrowed
        if ann is None and borrowed is not None:
            ann = borrowed.slot.ann
        elif borrowed is not None:  # its own is built: the borrowed one is let go
            self.borrowed = borrowed = None
        if ann is not None and not few:
            found = self._ranked_ann(ann, query, ask, borrowed)
            if found is not None:
                return found
        if few and self.index.grouped:
            assert ask.ok is not None
            items = np.flatnonzero(ask.ok)
            similarity = np.full(len(self), -np.inf)
            with ONE_BLAS_THREAD:
                similarity[items] = self.index.item_similarities(query, items)
            return self._ranked_all(similarity, ask)
        cosines = product(self.index.vectors, query)
        return self._ranked_exact(cosines, query, ask)

    def _ranked_exact(
        self,
        cosines: npt.NDArray[np.float32],
        query: npt.NDArray[np.float32],
        ask: Ask,
    ) -> Ranked:
        """`ranked` from every key's cosine. Each key's score (its version's, were it its only
        key: similarity × rank factor) is computed, and the versions owning the `_FIRST_KEYS`
        best keys (one `argpartition`) are ranked; kept when proven (`_proven`: no other
        version has a key scoring above the least of those), otherwise, and below
        `_PROVEN_FROM` keys, every version is ranked."""
        count = max(_FIRST_KEYS, 2 * ask.m)
        if self.index.grouped and len(cosines) > max(4 * count, _PROVEN_FROM):
            scores = snap_cosines(cosines)
            if self.index.penalized:
                scores -= self.index.penalty
            scores *= self.key_factors
            if ask.ok is not None:
                scores[~ask.ok[self.index.owners]] = -np.inf
            keys = np.argpartition(scores, len(scores) - count)[-count:]
            found = self._proven(query, keys, cosines[keys], float(scores[keys].min()), ask, cosines)
            if found is not None:
                return found
        return self._ranked_all(self.index.similarities_of(cosines), ask)

    def _ranked_all(
        self,
        similarity: npt.NDArray[np.float64],
        ask: Ask,
    ) -> Ranked:
        """`ranked` from every version's similarity."""
        allowed = np.isfinite(similarity) if ask.ok is None else ask.ok & np.isfinite(similarity)
        scores = np.where(allowed, similarity * self.factors, -np.inf)
        top = self._trial_filtered(scores, ask)
        return top, scores[top], similarity[top]

    def _proven(
        self,
        query: npt.NDArray[np.float32],
        keys: npt.NDArray[np.int64],
        cosines: npt.NDArray[np.float32],
        bound: float,
        ask: Ask,
        every: npt.NDArray[np.float32] | None = None,
    ) -> Ranked | None:
        """The best `ask.m` of the versions owning `keys` (whose cosines with the query are
        `cosines`; `every`: all keys' cosines, when computed), exactly scored, when no other
        version can rank among them: the m-th score is above `bound`, the most a version owning
        none of those keys can score (-inf: no such version is servable). None otherwise."""
        items, similarity = self.index.owner_similarities(query, keys, cosines, every)
        scores = similarity * self.factors[items]  # what is not finite `_top` leaves out
        if ask.ok is not None:
            scores[~ask.ok[items]] = -np.inf
        top = self._trial_filtered(scores, ask, items)
        if bound > -np.inf and (len(top) < ask.m or not scores[top[-1]] > bound):
            return None
        return items[top], scores[top], similarity[top]

    def _trial_filtered(
        self,
        scores: npt.NDArray[np.float64],
        ask: Ask,
        items: npt.NDArray[np.int64] | None = None,
    ) -> npt.NDArray[np.int64]:
        """`_top` (positions in `scores`, of `items` or of every version), after taking out the
        version of each trial pair this request is not served."""
        while True:
            top = _top(scores, ask.m, items)
            if not self.trials:
                return top
            versions = top if items is None else items[top]
            # A pair's decision is the same whichever of its two is looked at: drop those of
            # the top that lose it, until none does.
            dropped = {p for i in versions.tolist() for p in self._excluded(i, ask)}
            lost = [p for p, i in zip(top.tolist(), versions.tolist(), strict=True) if i in dropped]
            if not lost:
                return top
            scores = scores.copy()
            scores[lost] = -np.inf

    def _excluded(self, i: int, ask: Ask) -> list[int]:
        """Of the trial pair holding version i (if any), the one this request is not served."""
        other = int(self.partner[i])
        if other < 0:
            return []
        candidate, active = (i, other) if self.rows.statuses[i] != "active" else (other, i)
        wid, version = self.rows.ids[candidate], int(self.rows.versions[candidate])
        return [active] if serve_candidate(ask.task, wid, version, ask.share) else [candidate]

    def _ranked_ann(
        self,
        ann: KeyANN,
        query: npt.NDArray[np.float32],
        ask: Ask,
        borrowed: Borrowed | None = None,
    ) -> Ranked | None:
        """`ranked` from the ANN's keys (through `borrowed`'s map, when the ANN is another
        snapshot's), exactly re-ranked (`_proven`); None when not proven exact within
        `_MAX_KEYS` keys (the caller then scores every key)."""
        count = max(min(_FIRST_KEYS, ann.breadth), 2 * ask.m)
        boost = self.boost(self.slot if borrowed is None else borrowed.slot, borrowed)
        boosted = boost.keys
        boosted_cosines = ann.products(self.index.vectors, query, boosted) if len(boosted) else None
        while count <= _MAX_KEYS:
            keys = ann.search(query, count)
            everything = len(keys) >= ann.size
            if borrowed is not None:
                keys = borrowed.keys(keys)
            cosines = ann.products(self.index.vectors, query, keys)
            # The ANN ranks keys by cosine × the factor it scaled them by: every key it did not
            # return scores at most what the farthest it did scores so (its product, scaled),
            # times its factor over that one (at most `rest`, unless scored beside it), and
            # half a rounding step (the scores' cosines are rounded: `snap_cosines`).
            products = cosines if boost.scale is None else cosines * boost.scale[keys]
            farthest = float(products.min()) if len(products) else np.inf
            ratio = boost.rest if farthest >= 0 else boost.least
            bound = -np.inf if everything else farthest * ratio + _HALF_STEP * self.fmax
            if boosted_cosines is not None and (extra := ~np.isin(boosted, keys)).any():
                keys = np.concatenate([keys, boosted[extra]])
                cosines = np.concatenate([cosines, boosted_cosines[extra]])
            found = self._proven(query, keys, cosines, bound, ask)
            if found is not None:
                return found
            count *= 2
        return None
