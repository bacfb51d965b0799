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
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["EF_SEARCH", "AnnSlot", "KeyANN", "ann_available", "breadth", "build_ann"]

EF_SEARCH = 256
"""The HNSW's search breadth at 1M keys and past (more when more keys are asked for): what
it costs per search against how often it misses a nearest key (`python -m bench search`:
recall@3)."""

EF_SMALL = 64
"""The breadth at 10k keys and below: there the graph is small enough that 64 finds the
nearest keys as often as 128 does (recall@3 0.999 against 1.000 on the bench's 10k store)."""


def breadth(size: int) -> int:
    """The search breadth for an HNSW of `size` keys: `EF_SMALL` up to 10k keys, then twice as
    broad for every 10× more keys, up to `EF_SEARCH` (128 at 100k: recall@3 0.997 on the
    bench's 100k store, as 256 gave before the graph was built with `ef_build` 160)."""
    grown = EF_SMALL * (max(size, 1) / 10_000) ** math.log10(2)
    return int(min(EF_SEARCH, max(EF_SMALL, round(grown))))


def ann_available() -> bool:
    """Whether the optional ANN library is installed."""
    return importlib.util.find_spec("faiss") is not None


class KeyANN:
    """HNSW over unit key vectors by inner product (= cosine); keys are their row numbers."""

    def __init__(self, index: Any, size: int) -> None:
        self._index, self.size = index, size

    def search(
        self, query: npt.NDArray[np.float32], count: int, ef: int | None = None
    ) -> npt.NDArray[np.int64]:
        """Row numbers of (about) the `count` keys nearest the query, nearest first (`ef`: the
        search breadth, at least `count`; None: `breadth` of this index's size)."""
        import faiss

        count = min(count, self.size)
        # Per-call parameters: concurrent searches never share a mutable efSearch.
        params = faiss.SearchParametersHNSW(efSearch=max(count, breadth(self.size) if ef is None else ef))  # type: ignore[attr-defined]
        _, found = self._index.search(
            np.ascontiguousarray(query[None, :], dtype=np.float32), count, params=params
        )
        keys = np.asarray(found[0], dtype=np.int64)
        return keys[keys >= 0]


@dataclass
class AnnSlot:
    """Where an ANN lands once built (in the background); snapshots of the same keys share one."""

    ann: KeyANN | None = None


def build_ann(
    vectors: npt.NDArray[np.float32], *, neighbours: int = 32, ef_build: int = 160
) -> KeyANN | None:
    """An HNSW index of the rows (None when faiss is not installed or there are no rows).

    `ef_build` 160, not 80: twice the build (18.6 s against 9.4 s at 100k, in the background),
    for a graph that finds the nearest keys at a narrower search (at 100k, recall@3 0.997 at
    breadth 96 against 0.993; 655 µs of CPU a search at 128 against 795 µs at 256 before)."""
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
