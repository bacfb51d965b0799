"""Clustering task texts with HDBSCAN, assigning new ones, and keeping cluster ids stable.

Measured on WorkBench (docs/clustering.md): clustering the *distinct* task texts (a task run
several times is one point, so repeats do not pass for a cluster) with word 1–2-gram TF-IDF
(terms of at least min_cluster_size tasks), SVD to 64 dimensions and HDBSCAN gives ARI ≈ 0.83
against the 69 templates; the same pipeline on every run, or on the hashing embedder's
vectors, stays below 0.8.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from flowmem.retrieval.blas import ONE_BLAS_THREAD

__all__ = [
    "GRID_BITS",
    "ClusterParams",
    "Clustering",
    "canonical_linkage",
    "cluster_tasks",
    "match_clusters",
    "snap",
]

GRID_BITS = 16
"""The projected vectors are rounded to multiples of 2^-GRID_BITS (`snap`): see there."""


@dataclass(frozen=True)
class ClusterParams:
    """Clustering settings."""

    min_cluster_size: int = 3
    """Fewest distinct tasks that make a cluster (small, so online learning starts early)."""
    min_samples: int = 2
    """HDBSCAN min_samples: how conservative the density estimate is."""
    dims: int = 64
    """SVD dimensions before HDBSCAN."""
    epsilon: float = 0.3
    """HDBSCAN cluster_selection_epsilon: clusters closer than this merge."""
    method: str = "eom"
    """HDBSCAN cluster_selection_method: `eom` or `leaf`."""
    min_df: int | None = None
    """Terms must occur in this many distinct tasks to count; default min_cluster_size (a
    term shared by fewer tasks than make a cluster cannot characterise one)."""


@dataclass
class Clustering:
    """A fitted clustering of distinct task texts; labels are -1 for noise."""

    texts: list[str]
    """The distinct task texts that were clustered."""
    labels: npt.NDArray[np.int64]
    """Cluster label per distinct text (-1: noise, waiting for a cluster to form)."""
    model: Any = field(default=None, repr=False)
    """(vectorizer, svd, hdbscan) for assigning new texts; None when nothing was fitted."""
    points: npt.NDArray[np.float64] | None = field(default=None, repr=False)
    """The texts' projected unit vectors (what HDBSCAN clustered); None when nothing was fitted."""

    def label_of(self) -> dict[str, int]:
        """Task text -> label."""
        return {t: int(label) for t, label in zip(self.texts, self.labels, strict=True)}

    def placed(self) -> dict[str, int]:
        """Task text -> label, where a noise text takes the label of the clustered text nearest
        to it (cosine of the projected vectors); -1 only when there is no cluster at all.

        HDBSCAN leaves a text it cannot put in a dense region as noise, yet a successful run
        of it still shows how that task is done: induction gives it to the nearest cluster,
        where it is a variant of its own if it solves the task another way."""
        labels = self.labels.copy()
        clustered = np.flatnonzero(labels >= 0)
        noise = np.flatnonzero(labels < 0)
        if self.points is not None and len(clustered) and len(noise):
            nearest = np.argmax(self.points[noise] @ self.points[clustered].T, axis=1)
            labels[noise] = labels[clustered[nearest]]
        return {t: int(label) for t, label in zip(self.texts, labels, strict=True)}

    def members(self) -> dict[int, list[str]]:
        """Label -> its task texts (noise excluded)."""
        out: dict[int, list[str]] = {}
        for t, label in zip(self.texts, self.labels, strict=True):
            if label >= 0:
                out.setdefault(int(label), []).append(t)
        return out

    def project(self, texts: Sequence[str]) -> npt.NDArray[np.float64]:
        """New texts in the fit's projection (what `points` holds for the fitted ones)."""
        if self.model is None:
            raise ValueError("nothing was fitted")
        vectorizer, svd, _ = self.model
        return _project(vectorizer.transform(list(texts)), svd)

    def assign(self, texts: Sequence[str]) -> list[int]:
        """Labels for new texts without refitting (HDBSCAN approximate_predict); -1 if none fits."""
        if self.model is None or not texts:
            return [-1] * len(texts)
        import hdbscan

        vectorizer, svd, clusterer = self.model
        points = _project(vectorizer.transform(list(texts)), svd)
        labels, _ = hdbscan.approximate_predict(clusterer, points)
        return [int(x) for x in labels]


def snap(points: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """`points` rounded to the nearest multiple of 2^-GRID_BITS (|coordinates| <= 1).

    The SVD runs on BLAS, whose kernels differ by CPU in the last bits (1e-13 measured between
    OpenBLAS's Haswell and SkylakeX kernels); snapped, two machines agree unless a coordinate
    lies within that noise of a rounding boundary (about one fit in 1,500 at 500 texts, and
    then only a near-tie may go another way). On the grid every difference, product and sum
    over 64 coordinates is exact in float64 (40 of its 53 bits at most), so HDBSCAN's
    distances and the cosines of `Clustering.placed` are the same on any machine and in any
    summation order, and ties are ties (broken by `canonical_linkage`)."""
    snapped: npt.NDArray[np.float64] = np.ldexp(np.rint(np.ldexp(points, GRID_BITS)), -GRID_BITS)
    return snapped


@functools.cache
def _scipy_blas() -> None:
    """scipy's BLAS (loaded by scikit-learn's SVD, an OpenBLAS of its own) held to one thread
    by `ONE_BLAS_THREAD` too: looked for once a process, once scikit-learn is imported."""
    import scipy.linalg  # type: ignore[import-untyped]  # noqa: F401  # loads its BLAS

    ONE_BLAS_THREAD.include_loaded()


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    """One BLAS thread, numpy's and scipy's, while an SVD is fitted or applied. A fit's dense
    products are of a few hundred to a few thousand texts by ~74 columns, where a second thread
    gains nothing on a quiet machine (300-20,000 texts on 2 cores, the same labels) and only
    spins and waits for a core on a busy one: two induction test modules took 9.3 s of CPU
    against 13.0 s with two busy processes beside them, 8.7-8.9 against 10.5-11.0 s quiet."""
    _scipy_blas()
    with ONE_BLAS_THREAD:
        yield


def _project(matrix: Any, svd: Any) -> npt.NDArray[np.float64]:
    with _one_blas_thread():
        points = np.asarray(svd.transform(matrix), dtype=np.float64)
    norms = np.linalg.norm(points, axis=1, keepdims=True)
    unit: npt.NDArray[np.float64] = np.divide(points, norms, out=np.zeros_like(points), where=norms > 0)
    return snap(unit)


_LINKAGE_LOCK = threading.Lock()


@contextmanager
def canonical_linkage() -> Iterator[None]:
    """While HDBSCAN fits, its minimum spanning tree reaches the single-linkage step in one
    total order: by weight, then by the node each edge adds (its text's place in sorted order).

    hdbscan sorts the tree's edges with numpy's default sort, which is not stable: equal
    weights (common, as a mutual-reachability distance is often a point's core distance) come
    out in an order that depends on the CPU's sort kernel (AVX-512, AVX2, baseline), and the
    order in which tied edges merge changes which clusters HDBSCAN selects. The edges are
    re-sorted here, at the one call (`hdbscan.hdbscan_.label`) every tree-building path makes
    after its sort."""
    from hdbscan import hdbscan_ as impl

    with _LINKAGE_LOCK:
        label = impl.label

        def canonical(tree: npt.NDArray[np.float64]) -> Any:
            # Prim's tree adds each node once (column 1), so (weight, node) is a total order.
            order = np.lexsort((tree[:, 0], tree[:, 1], tree[:, 2]))
            return label(np.ascontiguousarray(tree[order]))

        impl.label = canonical
        try:
            yield
        finally:
            impl.label = label


def cluster_tasks(tasks: Sequence[str], params: ClusterParams | None = None) -> Clustering:
    """Cluster the distinct texts among `tasks`.

    Where no cluster forms (fewer texts than a cluster's minimum, no term shared, or no region
    denser than the rest), every text is in one cluster, 0, rather than noise: no successful run
    is left out of induction, and the inducer tells that cluster's runs apart by what they do
    (`rule.variants`). A later fit splits it once denser regions appear."""
    import hdbscan
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    p = params or ClusterParams()
    texts = sorted(set(tasks))
    one_group = Clustering(texts, np.zeros(len(texts), dtype=np.int64))
    if len(texts) < p.min_cluster_size:
        return one_group
    try:
        vectorizer = TfidfVectorizer(
            ngram_range=(1, 2), min_df=p.min_df or p.min_cluster_size, sublinear_tf=True
        )
        matrix = vectorizer.fit_transform(texts)
    except ValueError:  # no term shared by enough tasks: fall back to every term
        matrix = None
    if matrix is None or matrix.shape[1] < 2:  # SVD needs two terms at least
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
        try:
            matrix = vectorizer.fit_transform(texts)
        except ValueError:  # no word at all (e.g. only one-letter tokens)
            matrix = None
        if matrix is None or matrix.shape[1] < 2:
            return one_group
    dims = max(1, min(p.dims, matrix.shape[1] - 1, len(texts) - 1))
    # Tiny inputs make sklearn's explained-variance ratio divide by zero; that figure is unused.
    with np.errstate(divide="ignore", invalid="ignore"), _one_blas_thread():
        svd = TruncatedSVD(dims, random_state=0).fit(matrix)
    points = _project(matrix, svd)

    def fit(single: bool) -> Any:
        return hdbscan.HDBSCAN(
            min_cluster_size=p.min_cluster_size,
            min_samples=min(p.min_samples, p.min_cluster_size),
            cluster_selection_epsilon=p.epsilon,
            cluster_selection_method=p.method,
            allow_single_cluster=single,
            prediction_data=True,
        ).fit(points)

    with canonical_linkage():
        clusterer = fit(False)
        if (clusterer.labels_ < 0).all():  # HDBSCAN never returns one cluster unless allowed to
            clusterer = fit(True)
    labels = clusterer.labels_.astype(np.int64)
    if (labels < 0).all():  # no denser region anywhere: nothing to split by, so one group
        labels[:] = 0
    return Clustering(texts, labels, (vectorizer, svd, clusterer), points)


def match_clusters(
    previous: Mapping[int, set[str]], current: Mapping[int, set[str]], *, next_id: int
) -> dict[int, int]:
    """Map current cluster labels to stable ids: a current cluster takes the id of the previous
    cluster it overlaps most (Jaccard of members, greedy, best pair first); an unmatched
    cluster gets a fresh id from `next_id` on."""
    pairs = []
    for new, members in current.items():
        for old, before in previous.items():
            shared = len(members & before)
            if shared:
                pairs.append((shared / len(members | before), new, old))
    pairs.sort(key=lambda x: (-x[0], x[1], x[2]))
    mapping: dict[int, int] = {}
    taken: set[int] = set()
    for _, new, old in pairs:
        if new not in mapping and old not in taken:
            mapping[new] = old
            taken.add(old)
    for new in sorted(current):
        if new not in mapping:
            mapping[new] = next_id
            next_id += 1
    return mapping
