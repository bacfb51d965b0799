"""Same runs and settings give the same workflows, bit for bit, on any CPU (docs/induction.md,
"Determinism").

numpy picks its sort kernels by CPU at run time (`NPY_DISABLE_CPU_FEATURES` switches them on
one machine), OpenBLAS its BLAS kernels (`OPENBLAS_CORETYPE`), and Python salts its string
hashes per process (`PYTHONHASHSEED`). The shared sets are induced and evaluated in
subprocesses under each, and everything they produce must be equal; the data-free tests pin
the tie-breaks those rely on, so they run without ../shared/data too.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flowmem.demo import simulate
from flowmem.induction.cluster import cluster
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.plan.orchestrate import in_run_order
from flowmem.models import Trajectory
from flowmem.retrieval.nearest import ExampleIndex, snap_cosines
from tests.factories import WORKBENCH
from tests.inmemory import induce_drafts
from tests.processes import Command, CommandRun

ROOT = Path(__file__).resolve().parents[1]
TAU2 = WORKBENCH.parent / "tau2_oracle_trajectories.jsonl.gz"
WORKBENCH_TRAIN, WORKBENCH_TEST = (0, 1, 2, 3), (9,)
"""The WorkBench slice: 1,682 training runs of its 69 templates (276 distinct tasks; their
clusters came out differently per sort kernel before), one instance (415 runs) to test on;
the whole of tau2 (145 / 64 runs)."""


def _cpu_flags() -> set[str]:
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return set()
    line = next((x for x in cpuinfo.read_text().splitlines() if x.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def _variants() -> dict[str, dict[str, str]]:
    """Name -> the environment of one subprocess; the first is the reference."""
    flags = _cpu_flags()
    variants = {"default": {"PYTHONHASHSEED": "0"}}
    if "avx2" in flags:  # numpy's AVX2 kernels off (and AVX-512's with them), baseline BLAS
        variants["no AVX2"] = {
            "NPY_DISABLE_CPU_FEATURES": "X86_V3",
            "OPENBLAS_CORETYPE": "Prescott",
            "PYTHONHASHSEED": "1",
        }
    if "avx512f" in flags:  # numpy's AVX-512 kernels off: its AVX2 ones; OpenBLAS's AVX2 kernel
        variants["no AVX-512"] = {
            "NPY_DISABLE_CPU_FEATURES": "X86_V4",
            "OPENBLAS_CORETYPE": "Haswell",
            "PYTHONHASHSEED": "2",
        }
    if len(variants) == 1:  # not x86: at least another hash seed
        variants["hash seed 1"] = {"PYTHONHASHSEED": "1"}
    return variants


def _outcome(path: Path, split: Callable[[Trajectory], bool | None]) -> dict[str, Any]:
    """What inducing and evaluating one set gives: the drafts, their keys, the clusters'
    members and every figure `flowmem eval` reports (timings left out). `split` says train
    (True), test (False) or neither (None)."""
    from unittest import mock

    from flowmem.jobs import evaluate as evaluating
    from flowmem.jobs import induce as induce_job
    from flowmem.settings import Settings

    settings = Settings()
    runs = evaluating.load(path, settings)
    train, test = [t for t in runs if split(t) is True], [t for t in runs if split(t) is False]
    results = []
    real = induce_job.run_induction

    def recording(*args: Any, **kwargs: Any) -> Any:  # keeps what `evaluate` induced
        results.append(real(*args, **kwargs))
        return results[-1]

    with mock.patch.object(evaluating, "run_induction", recording):
        report = evaluating.evaluate(train, test, RuleInducer(), settings=settings, k=3)
    (result,) = (r.result for r in results)
    return {
        "workflows": {w.id: w.model_dump(mode="json", exclude={"created_at"}) for w in result.workflows},
        "keys": result.keys,
        "clusters": {a: {str(c): sorted(k) for c, k in m.items()} for a, m in result.memberships.items()},
        "eval": report.model_dump(mode="json", include={"flowmem", "raw", "inputs"}),
    }


def _child() -> None:
    """Run in a subprocess: the outcomes of both sets as JSON on stdout."""
    out = {
        "workbench": _outcome(
            WORKBENCH,
            lambda t: (
                True
                if t.meta["instance"] in WORKBENCH_TRAIN
                else (False if t.meta["instance"] in WORKBENCH_TEST else None)
            ),
        ),
        "tau2": _outcome(TAU2, lambda t: t.meta["split"] == "train"),
    }
    json.dump(out, sys.stdout, sort_keys=True)


def _differences(reference: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Where two outcomes differ, named (ids, figures), for the assertion message."""
    found = []
    for name in sorted(reference):
        a, b = reference[name], other[name]
        ids_a, ids_b = set(a["workflows"]), set(b["workflows"])
        if ids_a != ids_b:
            found.append(
                f"{name}: ids only here {sorted(ids_a - ids_b)[:5]}, only there {sorted(ids_b - ids_a)[:5]}"
            )
        changed = sorted(i for i in ids_a & ids_b if a["workflows"][i] != b["workflows"][i])
        if changed:
            found.append(f"{name}: {len(changed)} workflows differ in content, e.g. {changed[:5]}")
        if a["keys"] != b["keys"]:
            found.append(f"{name}: retrieval keys differ")
        if a["clusters"] != b["clusters"]:
            found.append(f"{name}: cluster members differ")
        for part in ("flowmem", "raw"):
            for key, value in a["eval"][part].items():
                if b["eval"][part].get(key) != value:
                    found.append(f"{name}: {part} {key} {value} vs {b['eval'][part].get(key)}")
    return found


def variant_commands() -> dict[str, Command]:
    """One command per variant (`_variants`), each printing its outcomes as JSON."""
    kernels = {"NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE"}
    clean = {k: v for k, v in os.environ.items() if k not in kernels}
    argv = [sys.executable, "-m", "tests.test_determinism"]
    return {
        name: Command(argv, {**clean, "LANCEDB_LOG": "error", **env}, ROOT)
        for name, env in _variants().items()
    }


@pytest.fixture(scope="module")
def determinism_children(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, CommandRun]]:
    """`variant_commands`, every one started at once, each in a process of its own."""
    runs = {
        name: CommandRun(command, tmp_path_factory.mktemp("determinism"))
        for name, command in variant_commands().items()
    }
    yield runs
    for run in runs.values():
        run.stop()


@pytest.mark.skipif(not (WORKBENCH.exists() and TAU2.exists()), reason="needs ../shared/data")
@pytest.mark.slow
def test_the_shared_sets_induce_and_score_the_same_under_every_cpu_kernel_and_hash_seed(
    determinism_children: dict[str, CommandRun],
) -> None:
    variants = _variants()
    assert list(determinism_children) == list(variants)  # variant_commands(), started by the fixture
    outcomes = {}
    for name, child in determinism_children.items():
        done = child.result()
        assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
        outcomes[name] = json.loads(done.stdout)
    reference = outcomes["default"]
    # Real, non-trivial output to compare (113 and 47 workflows at the commit that set these bounds).
    assert len(reference["workbench"]["workflows"]) > 50 and len(reference["tau2"]["workflows"]) > 30
    assert reference["workbench"]["eval"]["flowmem"]["cluster_ari"] > 0.6  # real clusters (0.70)
    for name, outcome in outcomes.items():
        assert not _differences(reference, outcome), (
            f"{name} ({variants[name]}): {_differences(reference, outcome)}"
        )


@contextmanager
def _ties_reversed() -> Iterator[None]:
    """hdbscan's edge sort giving equal weights in the opposite order of a stable sort (as
    another CPU's sort kernel may)."""
    from hdbscan import hdbscan_ as impl

    class Numpy:
        def __getattr__(self, name: str) -> Any:
            return getattr(np, name)

        @staticmethod
        def argsort(values: Any, *args: Any, **kwargs: Any) -> Any:
            values = np.asarray(values)
            return len(values) - 1 - np.argsort(values[::-1], kind="stable")

    real = impl.np
    impl.np = Numpy()
    try:
        yield
    finally:
        impl.np = real


def test_clusters_do_not_depend_on_the_order_hdbscan_sorts_tied_edges_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tasks = [t.task for t in simulate(150, seed=0)]
    before = cluster.cluster_tasks(tasks)
    with _ties_reversed():
        after = cluster.cluster_tasks(tasks)
    assert len(before.members()) > 10
    assert before.texts == after.texts
    assert before.labels.tolist() == after.labels.tolist()
    assert before.placed() == after.placed()
    # The data has ties whose order matters: hdbscan's own order gives other clusters.
    monkeypatch.setattr(cluster, "canonical_linkage", contextlib.nullcontext)
    with _ties_reversed():
        assert cluster.cluster_tasks(tasks).labels.tolist() != before.labels.tolist()


def test_the_same_runs_read_in_another_order_give_the_same_workflows() -> None:
    runs = simulate(100, seed=1)
    shuffled = runs[:]
    random.Random(0).shuffle(shuffled)
    first, second = (induce_drafts(r, RuleInducer(), subroutines=True) for r in (runs, shuffled))
    assert len(first.workflows) > 15
    assert [w.model_dump(exclude={"created_at"}) for w in first.workflows] == [
        w.model_dump(exclude={"created_at"}) for w in second.workflows
    ]
    assert first.keys == second.keys


def test_projected_points_lie_on_a_grid_where_every_distance_is_exact() -> None:
    tasks = [t.task for t in simulate(80, seed=3)]
    points = cluster.cluster_tasks(tasks).points
    assert points is not None
    assert np.array_equal(points, cluster.snap(points))
    scaled = points * 2.0**cluster.GRID_BITS
    assert np.array_equal(scaled, np.rint(scaled))
    # Exact: any summation order (BLAS, pairwise, reversed) gives the same bits.
    gram = points @ points.T
    by_hand = np.array(
        [
            [sum(float(x) * float(y) for x, y in zip(p, q, strict=True)) for q in points[:20]]
            for p in points[:20]
        ]
    )
    assert np.array_equal(gram[:20, :20], by_hand)
    # BLAS noise (1e-13 between kernels) on the SVD's output rounds away.
    noise = np.random.default_rng(0).uniform(-1e-13, 1e-13, size=points.shape)
    assert np.array_equal(cluster.snap(points + noise), points)


def test_a_task_shared_by_two_workflows_ranks_them_by_position_whatever_the_blas_row_path() -> None:
    # Identical key vectors at every offset of the product (a BLAS kernel sums the tail rows of
    # a matrix-vector product in another order than the rest): equal cosines must stay equal.
    rng = np.random.default_rng(7)
    shared = rng.standard_normal(384).astype(np.float32)
    shared /= np.linalg.norm(shared)
    checked = 0
    for n in range(2, 40):
        vectors = rng.standard_normal((n, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        twins = rng.choice(n, size=2, replace=False)
        vectors[twins] = shared
        query = (shared + 0.3 * vectors[(twins[0] + 1) % n]).astype(np.float32)
        query /= np.linalg.norm(query)
        exact = float(shared.astype(np.float64) @ query.astype(np.float64)) * 2**16
        if abs(exact - np.floor(exact) - 0.5) < 0.01:  # within float32 noise of a rounding boundary
            continue
        checked += 1
        scores = ExampleIndex(vectors, np.arange(n), n).similarities(query)
        assert scores[twins[0]] == scores[twins[1]], n
        order = [i for i, _ in ExampleIndex(vectors, np.arange(n), n).search(query, n)]
        assert order.index(min(twins)) < order.index(max(twins))
    assert checked > 30
    assert snap_cosines(np.array([0.1], dtype=np.float32)).tolist() == [round(0.1 * 2**16) / 2**16]


if __name__ == "__main__":
    _child()


def test_runs_sharing_one_timestamp_are_induced_in_id_order_whatever_order_they_are_read_in() -> None:
    # One agent logging a batch at once gives its runs one `created_at`: the id breaks the tie
    # (`orchestrate.in_run_order`), so the order the store hands them over in does not matter.
    stamp = simulate(1, seed=0)[0].created_at
    runs = [t.model_copy(update={"created_at": stamp}) for t in simulate(100, seed=2)]
    results = []
    for seed in range(3):
        shuffled = runs[:]
        random.Random(seed).shuffle(shuffled)
        assert [t.id for t in in_run_order(shuffled)] == sorted(t.id for t in runs)
        results.append(induce_drafts(shuffled, RuleInducer(), subroutines=True))
    assert len(results[0].workflows) > 15
    dumps = [[w.model_dump(exclude={"created_at"}) for w in r.workflows] for r in results]
    assert dumps[0] == dumps[1] == dumps[2]
