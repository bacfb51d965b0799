"""Retrieval by nearest example: a memory scores as its most similar source task. Pure numpy.

Measured on WorkBench (docs/metrics.md): scoring a workflow by the centroid of its source
tasks blurs the words that tell variants apart (the metric, the recipient kind), so the
nearest-example score retrieves the right variant more often.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["ExampleIndex"]


class ExampleIndex:
    """Unit vectors of example tasks, each owned by one item (a workflow)."""

    def __init__(self, vectors: npt.NDArray[np.float32], owners: Sequence[int], n_items: int) -> None:
        if len(vectors) != len(owners):
            raise ValueError("one owner per example vector")
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.owners = np.asarray(owners, dtype=np.int64)
        self.n_items = n_items
        # Owners in runs (each item's examples together), as a store's index lays them out.
        self._grouped = bool(len(self.owners)) and bool(np.all(np.diff(self.owners) >= 0))

    def similarities(self, query: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
        """Per item, the cosine of its most similar example (-inf for an item without one)."""
        best = np.full(self.n_items, -np.inf, dtype=np.float64)
        if len(self.owners):
            scores = (self.vectors @ query).astype(np.float64)
            if self._grouped:
                starts = np.flatnonzero(np.r_[True, self.owners[1:] != self.owners[:-1]])
                best[self.owners[starts]] = np.maximum.reduceat(scores, starts)
            else:
                np.maximum.at(best, self.owners, scores)
        return best

    def ranked(self, query: npt.NDArray[np.float32]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Every item, most similar first (ties by item), and the similarities by item."""
        best = self.similarities(query)
        return np.argsort(-best, kind="stable"), best

    def search(self, query: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The k items with the most similar example, as (item, cosine), best first."""
        if self.n_items == 0 or len(self.owners) == 0:
            return []
        order, best = self.ranked(query)
        return [(int(i), float(best[i])) for i in order[:k] if np.isfinite(best[i])]
