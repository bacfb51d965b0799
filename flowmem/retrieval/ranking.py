"""The served index's arrays and its exact ranking: brute force, or an ANN with a re-rank.

A snapshot holds the served versions as columns (`Columns`; the store reads them as
`storage.served.ServedRows`): their keys as
one float32 matrix with an owner per key, rank factors, agent and scope codes, trial pairs;
no `Workflow` object until one is served (`Snapshot.workflow`, a small LRU).

`Snapshot.ranked` returns the best `m` servable versions by score (similarity × rank factor),
ties by position, exactly as sorting every version would. Up to `ann_min` keys it scores
every key (one matrix-vector product, one BLAS thread: steadier and faster than two for one
query). Past that, once the ANN is built, it re-ranks exactly the versions owning the keys
the ANN returns, and stops when the m-th best score is at least what any version it has not
looked at could score (the cosine of the farthest key returned, times the largest rank
factor); otherwise it asks for more keys, and past a limit scores every key.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

from flowmem.models import UsageStats, Workflow
from flowmem.policy.lifecycle import DEFAULT_PARAMS, LifecycleParams, rank_factor, serve_candidate
from flowmem.retrieval.align import Pattern
from flowmem.retrieval.ann import KeyANN
from flowmem.retrieval.nearest import ExampleIndex, snap_cosines

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

    def __len__(self) -> int: ...
    def actions(self, i: int) -> Pattern:
        """The actions of the version at position i (`Workflow.pattern`), without its `Workflow`."""

    def workflow(self, i: int) -> Workflow:
        """The `Workflow` at position i, with its live status and stats."""


class _OneBlasThread:
    """One BLAS thread while any search runs a product: the process's setting is saved by the
    first search in and restored by the last one out, so concurrent searches never leave it
    changed (a plain `limit()` per call would restore one call's view over another's)."""

    def __init__(self) -> None:
        self._lock, self._users, self._limiter = threading.Lock(), 0, None
        self._controller: Any = None

    def __enter__(self) -> None:
        with self._lock:
            if self._users == 0:
                self._controller = self._controller or ThreadpoolController()
                self._limiter = self._controller.limit(limits=1, user_api="blas")
            self._users += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._limiter is not None:
                self._limiter.restore_original_limits()
                self._limiter = None


_ONE_BLAS_THREAD = _OneBlasThread()
_FIRST_KEYS = 256
"""Keys asked of the ANN first; doubled while the ranking is not proven exact."""
_MAX_KEYS = 4096
"""Past this many keys from the ANN, score every key instead."""
_ONE_THREAD = 50_000
"""Below this many keys a product runs on one BLAS thread (two are bimodal there, FACTS.md);
above, memory bandwidth makes two threads faster."""
_CACHE = 1024
"""Workflow objects kept per snapshot (the hits of recent searches; ~10 MB at most)."""
ANN_MIN = 5_000
"""Keys from which an ANN is built and used: `python bench/ann_crossover.py` times both paths
on one store, interleaved (p50, k=3): even at 5k keys, the ANN 1.2x faster at 7.5k, 1.5x at
10k and 2x at 15k, as the key matrix (1.5 KB a key) outgrows the CPU caches."""


def _top(scores: npt.NDArray[np.float64], m: int) -> npt.NDArray[np.int64]:
    """Positions of the m best finite scores, best first, ties by position (as a stable sort
    of every score would give)."""
    finite = np.flatnonzero(np.isfinite(scores))
    if len(finite) > m:
        part = finite[np.argpartition(-scores[finite], m - 1)[:m]]
        finite = finite[scores[finite] >= scores[part].min()]
    return finite[np.lexsort((finite, -scores[finite]))][:m]


@dataclass
class AnnSlot:
    """Where an ANN lands once built; snapshots of the same keys share one."""

    ann: KeyANN | None = None


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
    """Its ANN once built (in the background); until then search is brute force."""
    ann_min: int = ANN_MIN
    _cache: OrderedDict[int, Workflow] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(
        cls, rows: Columns, params: LifecycleParams = DEFAULT_PARAMS, *, ann_min: int = ANN_MIN
    ) -> Snapshot:
        """A snapshot of served columns."""
        cache: dict[str, float] = {}
        factors = np.array(
            [cache.setdefault(s.model_dump_json(), rank_factor(s, params)) for s in rows.stats],
            dtype=np.float64,
        )
        partner = np.full(len(rows), -1, dtype=np.int64)
        active = {w: i for i, (w, s) in enumerate(zip(rows.ids, rows.statuses, strict=True)) if s == "active"}
        for i, (w, s) in enumerate(zip(rows.ids, rows.statuses, strict=True)):
            if s != "active" and w in active:
                partner[i], partner[active[w]] = active[w], i
        index = ExampleIndex(rows.keys, rows.owners, len(rows), rows.shares)
        return cls(rows, index, factors, partner, ann_min=ann_min)

    def __len__(self) -> int:
        return len(self.rows)

    def workflow(self, i: int) -> Workflow:
        """The served version at position i (built from its row once, then cached)."""
        with self._lock:
            found = self._cache.get(i)
            if found is not None:
                self._cache.move_to_end(i)
                return found
        found = self.rows.workflow(i)
        with self._lock:
            self._cache[i] = found
            while len(self._cache) > _CACHE:
                self._cache.popitem(last=False)
        return found

    def wants_ann(self) -> bool:
        """Whether this snapshot is large enough for an ANN."""
        return len(self.index.vectors) >= self.ann_min and self.index.grouped

    def mask(self, agent: str | None, scope: str | None) -> npt.NDArray[np.bool_] | None:
        """Versions of this agent and scope (None: no filter)."""
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
        task: str,
        m: int,
        ok: npt.NDArray[np.bool_] | None,
        share: float,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The best m servable versions for the query, best first, with their scores and
        similarities; `ok` limits the versions, `share` is the candidates' share on trial."""
        ann = self.slot.ann
        if ann is not None and (ok is None or ok.sum() * 4 >= len(ok)):
            found = self._ranked_ann(ann, query, task, m, ok, share)
            if found is not None:
                return found
        if ok is not None and ok.sum() * 4 < len(ok) and self.index.grouped:
            items = np.flatnonzero(ok)
            similarity = np.full(len(self), -np.inf)
            with _ONE_BLAS_THREAD:
                similarity[items] = self.index.item_similarities(query, items)
        elif len(self.index.vectors) < _ONE_THREAD:
            with _ONE_BLAS_THREAD:
                similarity = self.index.similarities(query)
        else:
            similarity = self.index.similarities(query)
        allowed = np.isfinite(similarity) if ok is None else ok & np.isfinite(similarity)
        scores = np.where(allowed, similarity * self.factors, -np.inf)
        top = self._trial_filtered(scores, task, m, share)
        return top, scores[top], similarity[top]

    def _trial_filtered(
        self, scores: npt.NDArray[np.float64], task: str, m: int, share: float
    ) -> npt.NDArray[np.int64]:
        """`_top`, after taking out the version of each trial pair this request is not served."""
        while True:
            top = _top(scores, m)
            # A pair's decision is the same whichever of its two is looked at: drop those of
            # the top that lose it, until none does.
            dropped = {p for i in top for p in self._excluded(int(i), task, share)} & set(top.tolist())
            if not dropped:
                return top
            scores = scores.copy()
            scores[list(dropped)] = -np.inf

    def _excluded(self, i: int, task: str, share: float) -> list[int]:
        """Of the trial pair holding version i (if any), the one this request is not served."""
        other = int(self.partner[i])
        if other < 0:
            return []
        candidate, active = (i, other) if self.rows.statuses[i] != "active" else (other, i)
        wid, version = self.rows.ids[candidate], int(self.rows.versions[candidate])
        return [active] if serve_candidate(task, wid, version, share) else [candidate]

    def _ranked_ann(
        self,
        ann: KeyANN,
        query: npt.NDArray[np.float32],
        task: str,
        m: int,
        ok: npt.NDArray[np.bool_] | None,
        share: float,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
        """`ranked` from the ANN's keys, exactly re-ranked; None when not proven exact within
        `_MAX_KEYS` keys (the caller then scores every key)."""
        count, fmax, fmin = _FIRST_KEYS, float(self.factors.max()), float(self.factors.min())
        while count <= _MAX_KEYS:
            keys = ann.search(query, count)
            items = np.unique(self.index.owners[keys])
            with _ONE_BLAS_THREAD:
                similarity = self.index.item_similarities(query, items)
                # Rounded as the scores are (monotone), so the bound holds for rounded scores.
                farthest = float(snap_cosines(self.index.vectors[keys] @ query).min()) if len(keys) else -1.0
            allowed = np.isfinite(similarity) if ok is None else ok[items] & np.isfinite(similarity)
            scores = np.where(allowed, similarity * self.factors[items], -np.inf)
            full = np.full(len(self), -np.inf)
            full[items] = scores
            top = self._trial_filtered(full, task, m, share)
            bound = farthest * (fmax if farthest >= 0 else fmin)
            if len(keys) >= len(self.index.vectors) or (len(top) >= m and full[top[-1]] >= bound):
                where = np.searchsorted(items, top)
                return top, full[top], similarity[where]
            count *= 2
        return None
