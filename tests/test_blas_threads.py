"""One BLAS thread, numpy's and scipy's, while a clustering's SVD is fitted or applied, and
every BLAS's setting as it was once it is done (`retrieval.blas.ONE_BLAS_THREAD`)."""

from __future__ import annotations

from typing import Any

import pytest
from sklearn.decomposition import TruncatedSVD
from threadpoolctl import ThreadpoolController, threadpool_info, threadpool_limits  # type: ignore[import-untyped]

from flowmem.induction.cluster.cluster import cluster_tasks
from flowmem.retrieval.blas import _OneBlasThread

TASKS = [
    f"{verb} the {thing} of {who}"
    for verb in ("archive", "send", "update")
    for thing in ("report", "invoice")
    for who in ("ana", "li", "bo", "kim")
]


def _blas_threads() -> dict[str, int]:
    """Each BLAS library's thread count, by its file."""
    return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


def test_a_clusterings_svd_runs_on_one_thread_of_each_blas_and_leaves_them_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[dict[str, int]] = []
    fit, transform = TruncatedSVD.fit, TruncatedSVD.transform

    def fitted(self: Any, *args: Any, **kw: Any) -> Any:
        seen.append(_blas_threads())
        return fit(self, *args, **kw)

    def applied(self: Any, *args: Any, **kw: Any) -> Any:
        seen.append(_blas_threads())
        return transform(self, *args, **kw)

    monkeypatch.setattr(TruncatedSVD, "fit", fitted)
    monkeypatch.setattr(TruncatedSVD, "transform", applied)
    with threadpool_limits(2, user_api="blas"):
        before = _blas_threads()
        assert len(before) >= 2 and set(before.values()) == {2}  # numpy's and scipy's, two each
        clustering = cluster_tasks(TASKS)
        clustering.project(["archive the report of eve"])
        assert _blas_threads() == before
    assert len(seen) == 3  # the fit, the fit's own projection, a new text's
    assert all(threads == dict.fromkeys(before, 1) for threads in seen)


def test_a_blas_loaded_after_the_first_look_is_held_to_one_thread_from_then_on() -> None:
    """A library `include_loaded` finds while the guard is held is set to one thread at once
    and restored by the last one out."""
    guard = _OneBlasThread()
    libraries = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    first, later = libraries[0], libraries[1]
    with threadpool_limits(2, user_api="blas"):
        guard.include_loaded()  # before any look: nothing to add to
        assert guard._blas is None
        with guard:
            guard._blas, guard._saved = [first], [guard._saved[0]]  # as if `later` loaded since
            assert (first.get_num_threads(), later.get_num_threads()) == (1, 1)
            later.set_num_threads(2)
            guard.include_loaded()
            assert later.get_num_threads() == 1
            with guard:
                pass
            assert (first.get_num_threads(), later.get_num_threads()) == (1, 1)
        assert (first.get_num_threads(), later.get_num_threads()) == (2, 2)
        guard.include_loaded()  # known already: nothing added twice
        held = [lib.filepath for lib in guard._blas or []]
        loaded = {lib.filepath for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"}
        assert held[:2] == [first.filepath, later.filepath]  # (faiss's, where loaded, after them)
        assert len(held) == len(set(held)) and set(held) == loaded


PROBE = """
import sys
from flowmem.retrieval.blas import ONE_BLAS_THREAD
with ONE_BLAS_THREAD:  # the guard's first look, before scikit-learn brings scipy's BLAS
    pass
assert "scipy" not in sys.modules
from sklearn.decomposition import TruncatedSVD
from threadpoolctl import threadpool_info, threadpool_limits
from flowmem.induction.cluster.cluster import cluster_tasks
seen = []
fit = TruncatedSVD.fit
def fitted(self, *args, **kw):
    seen.append(sorted(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"))
    return fit(self, *args, **kw)
TruncatedSVD.fit = fitted
with threadpool_limits(2, user_api="blas"):
    cluster_tasks(TASKS)
print(seen)
"""


def test_a_fresh_process_holds_scipys_blas_to_one_thread_though_it_loads_after_the_first_look() -> None:
    """In a process whose guard first looked before scipy was loaded (an agent that searched
    before it induced), the clustering's SVD still runs on one thread of every BLAS: scipy's
    is looked for and held too (`include_loaded`)."""
    import json
    import subprocess
    import sys

    code = f"TASKS = {json.dumps(TASKS)}\n{PROBE}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(seen) == 1 and len(seen[0]) >= 2 and set(seen[0]) == {1}, seen
