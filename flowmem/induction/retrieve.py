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

    def search(self, query: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """The k items with the most similar example, as (item, cosine), best first."""
        if self.n_items == 0 or len(self.owners) == 0:
            return []
        best = np.full(self.n_items, -np.inf, dtype=np.float64)
        np.maximum.at(best, self.owners, self.vectors @ query)
        order = np.argsort(-best, kind="stable")[:k]
        return [(int(i), float(best[i])) for i in order if np.isfinite(best[i])]
