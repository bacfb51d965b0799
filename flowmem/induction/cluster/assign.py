"""Placing new tasks in a stored clustering without refitting it, and when a cluster's new runs
are worth inducing it again.

An incremental induction run keeps the clusters of the last fit: a new task text joins the
cluster of the stored text nearest to it (cosine of the store's task embeddings), as a fit
places its own noise texts in the cluster of the nearest clustered text (`Clustering.placed`).
Measured on `flowmem generate` data (16.5k runs, 1% new): every new run landed in a cluster of
its own task family. `NearestLabels` finds the same labels from the stored texts' vectors given
a part at a time, so a run need not hold every stored vector at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from flowmem.retrieval.nearest import snap_cosines

__all__ = ["MIN_CHANGE", "NearestLabels", "material", "nearest_labels"]

MIN_CHANGE = 0.05
"""A cluster is induced again once its runs moved by this share of those its workflows were
induced from (in a cluster of under 20 runs, any new run does)."""


def _unit(vectors: npt.ArrayLike) -> npt.NDArray[np.float32]:
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit


def nearest_labels(
    known: npt.ArrayLike, labels: Sequence[int], new: npt.ArrayLike, *, chunk: int = 1024
) -> list[int]:
    """For each row of `new`, the label of the most similar row of `known` (cosine, rounded
    as `snap_cosines` rounds it; the first of equals); -1 for each when nothing is known."""
    queries = _unit(new)
    if not len(labels):
        return [-1] * len(queries)
    keys = _unit(known)
    found: list[int] = []
    for start in range(0, len(queries), chunk):
        best = np.argmax(snap_cosines(queries[start : start + chunk] @ keys.T), axis=1)
        found += [int(labels[i]) for i in best]
    return found


class NearestLabels:
    """`nearest_labels` of some new rows over known rows given in parts, in any order: each
    part's rows with their places in the whole known list (`ranks`), so that among equal
    cosines the first of that list wins, as it does at once. What it holds: the new rows'
    unit vectors, each one's best cosine and the rank it came from."""

    def __init__(self, new: npt.ArrayLike, labels: Sequence[int], *, chunk: int = 1024) -> None:
        self._queries = _unit(new)
        self._labels = labels
        """The known rows' labels, by rank."""
        self._chunk = chunk
        self._best = np.full(len(self._queries), -np.inf)
        self._rank = np.full(len(self._queries), len(labels), dtype=np.int64)

    def add(self, ranks: npt.ArrayLike, known: npt.ArrayLike) -> None:
        """Compare the new rows with some known rows: their `ranks` and vectors."""
        places = np.asarray(ranks, dtype=np.int64)
        if not len(places) or not len(self._queries):
            return
        by_rank = np.argsort(places, kind="stable")  # argmax then keeps the first rank of equals
        places, keys = places[by_rank], _unit(np.asarray(known, dtype=np.float32)[by_rank])
        for start in range(0, len(self._queries), self._chunk):
            end = start + self._chunk
            cosines = snap_cosines(self._queries[start:end] @ keys.T)
            top = np.argmax(cosines, axis=1)
            found, rank = cosines[np.arange(len(top)), top], places[top]
            best, held = self._best[start:end], self._rank[start:end]  # views: updated in place
            better = (found > best) | ((found == best) & (rank < held))
            best[better], held[better] = found[better], rank[better]

    def labels(self) -> list[int]:
        """Each new row's label so far (-1 for each when nothing is known)."""
        if not len(self._labels):
            return [-1] * len(self._queries)
        return [int(self._labels[r]) for r in np.minimum(self._rank, len(self._labels) - 1)]


def material(before: tuple[int, int], now: tuple[int, int], *, min_change: float = MIN_CHANGE) -> bool:
    """Whether a cluster whose member runs changed is to be induced again: (successes,
    failures) when its workflows were induced against now. Runs that moved (new ones, outcomes
    that changed) below `min_change` of those it was induced from wait for more; a change the
    counts do not show (a run swapped for another) is always material."""
    moved = abs(now[0] - before[0]) + abs(now[1] - before[1])
    return moved == 0 or moved >= min_change * sum(before)
