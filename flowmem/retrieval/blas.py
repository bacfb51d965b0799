"""How many threads a BLAS product of one query runs on (the search's products, pure)."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

__all__ = ["ONE_BLAS_THREAD", "ONE_THREAD", "product"]

ONE_THREAD = 50_000
"""Below this many rows a product runs on one BLAS thread (two are bimodal there, FACTS.md);
above, memory bandwidth makes two threads faster."""


class _OneBlasThread:
    """One BLAS thread while any search runs a product: the process's setting is saved by the
    first search in and restored by the last one out, so concurrent searches never leave it
    changed (a plain `limit()` per call would restore one call's view over another's). The
    BLAS libraries are looked up once and set directly: a third of `limit()`'s cost per call."""

    def __init__(self) -> None:
        self._lock, self._users = threading.Lock(), 0
        self._blas: list[Any] | None = None
        self._saved: list[int] = []

    def __enter__(self) -> None:
        with self._lock:
            if self._users == 0:
                if self._blas is None:
                    found = ThreadpoolController().lib_controllers
                    self._blas = [lib for lib in found if lib.user_api == "blas"]
                self._saved = [lib.get_num_threads() for lib in self._blas]
                for lib in self._blas:
                    lib.set_num_threads(1)
            self._users += 1

    def include_loaded(self) -> None:
        """Look for BLAS libraries loaded since the first look (scipy's, once scikit-learn's
        SVD has imported it: each wheel brings its own OpenBLAS) and hold them to one thread
        too, from now on; one look costs ~0.8 ms (three libraries loaded: numpy's, scipy's,
        faiss's)."""
        with self._lock:
            if self._blas is None:  # not looked yet: the first `__enter__` finds them all
                return
            known = {lib.filepath for lib in self._blas}
            found = ThreadpoolController().lib_controllers
            new = [lib for lib in found if lib.user_api == "blas" and lib.filepath not in known]
            if self._users:  # inside: the new ones are set now, and restored by the last one out
                self._saved += [lib.get_num_threads() for lib in new]
                for lib in new:
                    lib.set_num_threads(1)
            self._blas += new

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                for lib, n in zip(self._blas or [], self._saved, strict=True):
                    lib.set_num_threads(n)


ONE_BLAS_THREAD = _OneBlasThread()
"""The one guard every search's product and every clustering's SVD share (one guard, so that
two of them never restore each other's setting)."""


def product(matrix: npt.NDArray[np.float32], query: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """`matrix @ query`: on one BLAS thread below `ONE_THREAD` rows, else on the BLAS's own."""
    threads: AbstractContextManager[Any] = ONE_BLAS_THREAD if len(matrix) < ONE_THREAD else nullcontext()
    with threads:
        found: npt.NDArray[np.float32] = matrix @ query
    return found
