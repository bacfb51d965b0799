"""An approximate nearest-neighbour index of key vectors, for search past brute force's reach.

Optional: it needs `faiss-cpu` (`pip install 'flowmem[ann]'`); without it `build_ann` returns
None and search stays exact brute force. Chosen by measurement (docs/performance.md, 100k
keys × 384 on 2 cores): faiss's HNSW (M=32) over 8-bit codes built in 15 s and answered 256
neighbours in 0.4 ms (recall@3 0.99 once re-ranked); over full floats 18 s and 0.6 ms;
usearch's built in 52 s (f32) and answered in 1.1 ms, its int8 index lost recall (0.83).
Callers re-rank what it returns exactly (`retrieval.ranking`), so its approximations cost recall
only where a key it missed would have ranked. The served index builds it over its keys each
scaled by its version's rank factor then (`AnnSlot.scale`), so that it returns the keys of the
highest cosine × factor, what a search ranks by.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "ADD_CHUNK",
    "EF_SEARCH",
    "AnnSlot",
    "KeyANN",
    "KeyBase",
    "ann_available",
    "ann_identity",
    "breadth",
    "build_ann",
]

NEIGHBOURS = 32
"""The HNSW's links per node (`build_ann`)."""

EF_BUILD = 160
"""The HNSW's breadth while it is built (`build_ann`)."""

ADD_CHUNK = 2048
"""Rows added to the HNSW in one call (`build_ann`): what a stop waits for at most, ~0.5 s at
1M keys on 2 cores; the graph and its build time are as one call's (recall@3 and build time
measured at 10k and 100k with 1024, 4096 and all rows at once)."""

EF_SEARCH = 256
"""The HNSW's search breadth at 1M keys and past (more when more keys are asked for): what
it costs per search against how often it misses a nearest key (`python -m bench search`:
recall@3)."""

EF_SMALL = 40
"""The breadth at 10k keys and below. On 3,000 of the bench's tasks at 10k, recall@3 against
exact search 0.996 (0.999 at 64, 0.998 at 48), the search ~25% faster than at 64 (~16% at
48): the HNSW's time is its breadth's, and at 10k it is half a search's (docs/performance.md,
"Search at small sizes"); about what 100k gets at its own breadth (0.997)."""

EF_100K = 128
"""The breadth at 100k keys: recall@3 0.997 on the bench's 100k store, as 256 gave before the
graph was built with `ef_build` 160."""


def breadth(size: int) -> int:
    """The search breadth for an HNSW of `size` keys: `EF_SMALL` up to 10k keys, `EF_100K` at
    100k, `EF_SEARCH` from 1M, log-linear in the size between them."""
    decades = math.log10(max(size, 1))  # pure Python: ~1 µs, against ~20 µs by `np.interp`
    if decades <= 4.0:
        return EF_SMALL
    if decades >= 6.0:
        return EF_SEARCH
    if decades <= 5.0:
        return round(EF_SMALL + (EF_100K - EF_SMALL) * (decades - 4.0))
    return round(EF_100K + (EF_SEARCH - EF_100K) * (decades - 5.0))


def ann_available() -> bool:
    """Whether the optional ANN library is installed."""
    return importlib.util.find_spec("faiss") is not None


class KeyANN:
    """HNSW over unit key vectors by inner product (= cosine); keys are their row numbers."""

    def __init__(self, index: Any, size: int) -> None:
        self._index, self.size = index, size
        self.breadth = breadth(size)
        """Its search breadth when none is asked for (`breadth` of its size)."""
        self._params: dict[int, Any] = {}
        """Search parameters by breadth, made once each: read-only during a search, so
        concurrent searches share them (~3 µs a search to make)."""

    def search(
        self, query: npt.NDArray[np.float32], count: int, ef: int | None = None
    ) -> npt.NDArray[np.int64]:
        """Row numbers of (about) the `count` keys nearest the query, nearest first (`ef`: the
        search breadth, at least `count`; None: `breadth` of this index's size)."""
        import faiss

        count = min(count, self.size)
        breadth_ = max(count, self.breadth if ef is None else ef)
        params = self._params.get(breadth_)
        if params is None:  # per-call parameters: concurrent searches never share a mutable efSearch
            params = self._params.setdefault(breadth_, faiss.SearchParametersHNSW(efSearch=breadth_))  # type: ignore[attr-defined]
        distances = np.empty((1, count), dtype=np.float32)
        found = np.empty((1, count), dtype=np.int64)
        if query.dtype != np.float32 or not query.flags.c_contiguous:
            query = np.ascontiguousarray(query, dtype=np.float32)
        ptr = faiss.swig_ptr
        self._index.search_c(1, ptr(query), count, ptr(distances), ptr(found), params)
        keys: npt.NDArray[np.int64] = found[0]
        # Fewer than `count` found: -1 fills the rest, after what was found.
        return keys if not count or keys[-1] >= 0 else keys[keys >= 0]

    def write(self, path: Path) -> None:
        """The index written to a file (faiss's own format), as `read` reads it."""
        import faiss

        faiss.write_index(self._index, str(path))

    @classmethod
    def read(cls, path: Path, rows: int, dim: int) -> KeyANN:
        """The index `write` wrote to `path`, checked to be an HNSW of `rows` vectors of `dim`
        (ValueError otherwise; faiss's RuntimeError for a file it cannot read)."""
        import faiss

        index = faiss.read_index(str(path))
        if not isinstance(index, faiss.IndexHNSWSQ) or index.ntotal != rows or index.d != dim:
            raise ValueError(f"{path} is not an HNSW of {rows} vectors of {dim} dimensions")
        return cls(index, rows)

    @staticmethod
    def products(
        vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], keys: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float32]:
        """`vectors[keys] @ query` in float32, without copying the rows out or waking a BLAS
        thread: ~20 µs for a search's 64 keys of 10k, against ~45 µs by numpy on one BLAS
        thread (reading the rows is most of either)."""
        import faiss

        if vectors.dtype != np.float32 or not vectors.flags.c_contiguous:
            return np.asarray(vectors[keys] @ query, dtype=np.float32)
        out = np.empty(len(keys), dtype=np.float32)
        if not len(keys):
            return out
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        # Faiss would read past the rows: one reduction for both ends, a negative row being
        # past every row as an unsigned number.
        if int(keys.view(np.uint64).max()) >= len(vectors):
            raise IndexError(f"key rows out of range for {len(vectors)} vectors")
        if query.dtype != np.float32 or not query.flags.c_contiguous:
            query = np.ascontiguousarray(query, dtype=np.float32)
        ptr, dim = faiss.swig_ptr, vectors.shape[1]
        # faiss runs this loop over queries as an OpenMP parallel region: for one query, a team
        # whose other threads only join its closing barrier, which on a busy machine waits for
        # them to get a core (p90 ~8 ms against ~27 µs, at load 4 on 2 cores). So this thread
        # runs it alone; the count is this thread's own (OpenMP's), restored after.
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            faiss.fvec_inner_products_by_idx(ptr(out), ptr(query), ptr(vectors), ptr(keys), dim, 1, len(keys))  # type: ignore[attr-defined]
        finally:
            faiss.omp_set_num_threads(threads)
        return out


@dataclass(frozen=True)
class KeyBase:
    """Who owns the keys an ANN is built over: a key matrix laid out version by version."""

    ids: Sequence[str]
    """Per version: its workflow's id."""
    versions: npt.NDArray[np.int64]
    """Per version: its number."""
    lo: npt.NDArray[np.int64]
    """Per version: its first key."""
    hi: npt.NDArray[np.int64]
    """Per version: one past its last key."""
    keys: int
    """How many keys."""
    origin: object | None = None
    """What the versions were picked among (`ranking.Columns.candidates`), None: not known."""
    tags: npt.NDArray[np.int64] | None = None
    """Per version: its position among `origin`'s versions: two bases of one origin map their
    versions by these numbers (`ann_reuse.borrow`), not by their ids."""


@dataclass
class AnnSlot:
    """Where an ANN lands once built (in the background); snapshots of the same keys share one,
    and a later snapshot of other keys may borrow it (`retrieval.ann_reuse`)."""

    ann: KeyANN | None = None
    base: KeyBase | None = None
    """The keys it is built over, once a build is started (what a borrower maps)."""
    scale: npt.NDArray[np.float64] | None = None
    """Per key, the factor its vector is scaled by in the ANN (None: none is)."""


def build_ann(
    vectors: npt.NDArray[np.float32],
    *,
    scale: npt.NDArray[np.float64] | None = None,
    neighbours: int = NEIGHBOURS,
    ef_build: int = EF_BUILD,
    stop: threading.Event | None = None,
) -> KeyANN | None:
    """An HNSW index of the rows, each scaled by its `scale` when given (the served index's
    keys by their versions' rank factors: `ranking.Snapshot.boost`), by inner product (None
    when faiss is not installed, there are no rows, or `stop` was set before it was done).

    `ef_build` 160, not 80: twice the build (18.6 s against 9.4 s at 100k, in the background),
    for a graph that finds the nearest keys at a narrower search (at 100k, recall@3 0.997 at
    breadth 96 against 0.993; 655 µs of CPU a search at 128 against 795 µs at 256 before).

    The rows are added `ADD_CHUNK` at a time, and `stop` is looked at between two: a build in
    a background thread must be back in Python, not inside faiss, when the interpreter
    finalizes, or the process aborts (`served_index.stop_builds`)."""
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
    data = np.ascontiguousarray(vectors if scale is None else vectors * scale[:, None], dtype=np.float32)
    index.train(data)
    for start in range(0, len(data), ADD_CHUNK):
        if stop is not None and stop.is_set():
            return None
        index.add(data[start : start + ADD_CHUNK])
    return KeyANN(index, len(vectors))


def ann_identity(vectors: npt.NDArray[np.float32], scale: npt.NDArray[np.float64] | None = None) -> str:
    """What `build_ann` builds of these rows (and `scale`), as a hash of them, its parameters
    and faiss's version: two builds of the same identity answer alike (the graphs may differ,
    as a build on several threads inserts in its own order; search re-ranks exactly). SHA-256
    of the rows: ~0.2 s at 100k × 384, against a build's 20–40 s."""
    import faiss

    digest = hashlib.sha256(f"hnsw-sq8 {faiss.__version__} {NEIGHBOURS} {EF_BUILD} {vectors.shape}".encode())
    digest.update(np.ascontiguousarray(vectors, dtype=np.float32).data.cast("B"))
    if scale is not None:
        digest.update(np.ascontiguousarray(scale, dtype=np.float64).data.cast("B"))
    return digest.hexdigest()
