"""Retrieval by nearest example: a memory scores as its most similar source task. Pure numpy.

Measured on WorkBench (docs/metrics.md): scoring a workflow by the centroid of its source
tasks blurs the words that tell variants apart (the metric, the recipient kind), so the
nearest-example score retrieves the right variant more often.

Several workflows can share a source task: the same task solved two ways (two variants of a
cluster), or a cluster that holds a few runs of another task. Their nearest-example cosines
are then equal, so their order would be arbitrary and their scores would not separate. Each
example therefore carries its *share*: the part of that task's runs the workflow was induced
from. An example scores its cosine less `SHARE_WEIGHT` × (1 − share): a task's own workflow
(all of its runs) keeps the full cosine, a workflow holding one of its five runs loses 0.04.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from flowmem.retrieval.unique import sorted_unique

__all__ = ["COSINE_BITS", "SHARE_WEIGHT", "ExampleIndex", "key_shares", "snap_cosines"]

COSINE_BITS = 16
"""Cosines are compared rounded to multiples of 2^-COSINE_BITS (`snap_cosines`)."""

SHARE_WEIGHT = 0.05
"""How much of a cosine a source task's share is worth. Small, so that it orders workflows
whose nearest task is the same one (equal cosines) and near-ties, and never outweighs a
clearly closer task; it does not depend on the data set, only on cosines being in [-1, 1].
Measured in docs/induction.md ("Ranking")."""


def key_shares(
    keys: Mapping[str, Mapping[str, int]], *, whole: Collection[str] = ()
) -> dict[str, dict[str, float]]:
    """Per workflow, per source task: the share of that task's runs, over every workflow in
    `keys`, that the workflow was induced from (keys map a workflow id to its source tasks,
    each with how many of its runs had it). A workflow in `whole` (a sub-routine: one part of
    many tasks, beside the other parts) has share 1 in each of its tasks."""
    total: dict[str, int] = {}
    for wid, tasks in keys.items():
        if wid not in whole:
            for task, n in tasks.items():
                total[task] = total.get(task, 0) + n
    return {
        wid: {
            task: 1.0 if wid in whole else (n / total[task] if total.get(task) else 0.0)
            for task, n in tasks.items()
        }
        for wid, tasks in keys.items()
    }


def snap_cosines(products: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float64]:
    """Float32 cosines (products of unit vectors) as float64, rounded to the nearest multiple
    of 2^-COSINE_BITS, so that what float noise alone tells apart compares equal.

    A matrix-vector product runs on BLAS, whose kernels sum in another order per CPU and even
    per row within one call: two identical key vectors (a task two workflows share) came out
    up to 3e-8 apart in a quarter of the products measured, the order of such a tie then
    depending on the machine. Rounded to 2^-16 (1.5e-5), equal cosines stay equal unless they
    straddle a boundary (well under 1% of such ties) and the stable sorts after them order
    ties by position; a real difference below 1.5e-5 is no longer told apart."""
    scaled = np.array(products, dtype=np.float64)
    scaled *= 2.0**COSINE_BITS  # a power of 2: exact
    np.rint(scaled, out=scaled)
    scaled *= 2.0**-COSINE_BITS
    return scaled


class ExampleIndex:
    """Unit vectors of example tasks, each owned by one item (a workflow), with its share of
    that task (1 when not given: the nearest-example cosine alone)."""

    def __init__(
        self,
        vectors: npt.NDArray[np.float32],
        owners: Sequence[int] | npt.NDArray[np.int64],
        n_items: int,
        shares: Sequence[float] | npt.NDArray[np.float64] | None = None,
    ) -> None:
        if len(vectors) != len(owners) or (shares is not None and len(shares) != len(owners)):
            raise ValueError("one owner (and share) per example vector")
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.owners = np.asarray(owners, dtype=np.int64)
        self.penalty = (
            SHARE_WEIGHT * (1.0 - np.clip(np.asarray(shares, dtype=np.float64), 0.0, 1.0))
            if shares is not None
            else np.zeros(len(self.owners))
        )
        self.n_items = n_items
        # Owners in runs (each item's examples together), as a store's index lays them out.
        self._grouped = bool(len(self.owners)) and bool(np.all(np.diff(self.owners) >= 0))
        self._starts = (
            np.flatnonzero(np.r_[True, self.owners[1:] != self.owners[:-1]]) if self._grouped else None
        )
        # Per item, where its examples start and end (a grouped index): `item_similarities`.
        self._lo, self._hi = np.zeros(n_items, np.int64), np.zeros(n_items, np.int64)
        if self._starts is not None:
            held = self.owners[self._starts]
            self._lo[held], self._hi[held] = self._starts, np.r_[self._starts[1:], len(self.owners)]
        # One example per item, item i's at row i (a store of one key per workflow): an
        # example's score is its item's, with nothing to gather or reduce.
        self.single = len(self.owners) == n_items and bool(np.array_equal(self.owners, np.arange(n_items)))
        self.penalized = bool(np.any(self.penalty))
        """Whether any example has a share penalty (none: the cosines are the scores)."""

    def similarities(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """Per item, the best score of its examples: cosine less the share penalty (see the
        module docstring); -inf for an item without one."""
        return self.similarities_of(self.vectors @ query if len(self.owners) else np.zeros(0, np.float32))

    def similarities_of(self, cosines: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """`similarities`, given every example's product with the query."""
        best = np.full(self.n_items, -np.inf, dtype=np.float64)
        if len(self.owners):
            scores = snap_cosines(cosines)
            if self.penalized:
                scores -= self.penalty
            if self.single:
                return scores
            if self._starts is not None:
                best[self.owners[self._starts]] = np.maximum.reduceat(scores, self._starts)
            else:
                np.maximum.at(best, self.owners, scores)
        return best

    @property
    def grouped(self) -> bool:
        """Whether each item's examples are together (what `item_similarities` needs)."""
        return self._starts is not None

    def keys_of(self, items: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The examples of some items of a grouped index, in item order, and how many each has."""
        lo = self._lo[items]
        counts = self._hi[items] - lo
        offsets = np.cumsum(counts) - counts
        return np.repeat(lo - offsets, counts) + np.arange(int(counts.sum())), counts

    def item_similarities(
        self,
        query: npt.NDArray[np.float32],
        items: npt.NDArray[np.int64],
        cosines: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.float64]:
        """`similarities` of some items only (distinct, of a grouped index): their examples are
        gathered and scored (`cosines`: every example's product with the query, when the
        caller has them), the others not looked at."""
        if self._starts is None:
            return self.similarities(query)[items]
        best = np.full(len(items), -np.inf, dtype=np.float64)
        if not len(items):
            return best
        lo = self._lo[items]
        counts = self._hi[items] - lo
        has = counts > 0
        lo, counts = lo[has], counts[has]
        offsets = np.cumsum(counts) - counts
        rows = np.repeat(lo - offsets, counts) + np.arange(int(counts.sum()))
        products = self.vectors[rows] @ query if cosines is None else cosines[rows]
        scores = snap_cosines(products) - self.penalty[rows]
        best[has] = np.maximum.reduceat(scores, offsets)
        return best

    def owner_similarities(
        self,
        query: npt.NDArray[np.float32],
        keys: npt.NDArray[np.int64],
        cosines: npt.NDArray[np.float32],
        every: npt.NDArray[np.float32] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The items owning some examples (distinct rows `keys`, of a grouped index) and their
        `similarities`, given those examples' `cosines` with the query (float32 products; `every`:
        all examples' products, when the caller has them). When each item has one example its
        score is its example's; otherwise each item's examples are scored."""
        if self.single:
            scores = snap_cosines(cosines)
            return keys, scores - self.penalty[keys] if self.penalized else scores
        items = sorted_unique(self.owners[keys])
        return items, self.item_similarities(query, items, every)

    def ranked(self, query: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Every item, most similar first (ties by item), and the similarities by item."""
        best = self.similarities(query)
        return np.argsort(-best, kind="stable"), best

    def search(self, query: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The k items with the most similar example, as (item, score), best first."""
        if self.n_items == 0 or len(self.owners) == 0:
            return []
        order, best = self.ranked(query)
        return [(int(i), float(best[i])) for i in order[:k] if np.isfinite(best[i])]
