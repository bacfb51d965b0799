"""An approximate nearest-neighbour index of key vectors, for search past brute force's reach.

Optional: it needs `faiss-cpu` (`pip install 'flowmem[ann]'`); without it `build_ann` returns
None and search stays exact brute force. Chosen by measurement (docs/performance.md, 100k
keys × 384 on 2 cores): faiss's HNSW (M=32) over 8-bit codes built in 15 s and answered 256
neighbours in 0.4 ms (recall@3 0.99 once re-ranked); over full floats 18 s and 0.6 ms;
usearch's built in 52 s (f32) and answered in 1.1 ms, its int8 index lost recall (0.83).
Callers re-rank what it returns exactly (`retrieval.ranking`), so its approximations cost recall
only where a key it missed would have ranked.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["EF_SEARCH", "AnnSlot", "KeyANN", "ann_available", "build_ann"]

EF_SEARCH = 256
"""The HNSW's search breadth at least (more when more keys are asked for): what it costs per
search against how often it misses a nearest key (`python bench/search.py`: recall@3)."""


def ann_available() -> bool:
    """Whether the optional ANN library is installed."""
    return importlib.util.find_spec("faiss") is not None


class KeyANN:
    """HNSW over unit key vectors by inner product (= cosine); keys are their row numbers."""

    def __init__(self, index: Any, size: int) -> None:
        self._index, self.size = index, size

    def search(
        self, query: npt.NDArray[np.float32], count: int, ef: int = EF_SEARCH
    ) -> npt.NDArray[np.int64]:
        """Row numbers of (about) the `count` keys nearest the query, nearest first (`ef`: the
        search breadth, at least `count`)."""
        import faiss

        count = min(count, self.size)
        # Per-call parameters: concurrent searches never share a mutable efSearch.
        params = faiss.SearchParametersHNSW(efSearch=max(count, ef))  # type: ignore[attr-defined]
        _, found = self._index.search(
            np.ascontiguousarray(query[None, :], dtype=np.float32), count, params=params
        )
        keys = np.asarray(found[0], dtype=np.int64)
        return keys[keys >= 0]


@dataclass
class AnnSlot:
    """Where an ANN lands once built (in the background); snapshots of the same keys share one."""

    ann: KeyANN | None = None


def build_ann(vectors: npt.NDArray[np.float32], *, neighbours: int = 32, ef_build: int = 80) -> KeyANN | None:
    """An HNSW index of the rows (None when faiss is not installed or there are no rows)."""
    if not ann_available() or not len(vectors):
        return None
    import faiss

    # 8-bit codes: a quarter of the vectors' memory, and faster than full floats to build and
    # search; the exact float32 re-rank of what it returns restores the ranking (recall@3
    # 0.992 at 100k, as with full floats).
    index = faiss.IndexHNSWSQ(
        vectors.shape[1],
        faiss.ScalarQuantizer.QT_8bit,  # type: ignore[arg-type]
        neighbours,
        faiss.METRIC_INNER_PRODUCT,
    )
    index.hnsw.efConstruction = ef_build
    data = np.ascontiguousarray(vectors, dtype=np.float32)
    index.train(data)
    index.add(data)
    return KeyANN(index, len(vectors))
