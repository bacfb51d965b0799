"""What an incremental induction run reads: a few columns of every trajectory in batches, the
vectors only of the texts it places and those it compares them with (in batches too), the
steps only when it induces a cluster, and whole trajectories only of the clusters it induces,
by id; and what a `flowmem` command imports before it needs it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any, cast

import numpy as np
import pytest

from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.plan.bounded import ClusterMembers
from flowmem.induction.plan.increment import Columns, Placement
from flowmem.induction.plan.runplan import Limits, open_run, place
from flowmem.jobs import incremental
from flowmem.jobs import induce as induce_job
from flowmem.jobs.incremental import settings_signature
from flowmem.jobs.induce import RunReport, prepare_run, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import InductionRun
from flowmem.settings import Settings
from flowmem.storage import Store, scans
from flowmem.storage.lance_ops import quote, select
from tests.factories import cancel, forward
from tests.processes import READY_LIMIT

_WHOLE = (
    "trajectory_scan",
    "get_trajectories",
    "list_trajectories",
    "iter_trajectories",
)
"""The store's reads of every trajectory at once, or of whole trajectories: a run makes none."""

Reads = list[tuple[str, tuple[str, ...], list[int]]]
"""(what read, the columns or ids, each batch's rows)."""


def _spy(
    store: Store, monkeypatch: pytest.MonkeyPatch, *, batch: int | None = None, shuffle: bool = False
) -> Reads:
    """Record every trajectory read a run makes from now on: the store's own reads, each batched
    read's columns and its batches' sizes (at most `batch` rows, when given; the vectors'
    batches in another order than the columns', with `shuffle`), and the reads by id."""
    reads: Reads = []

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def spied(*args: Any, **kwargs: Any) -> Any:
            reads.append((name, tuple(args[0]) if args else (), []))
            return method(*args, **kwargs)

        return spied

    def batches(store: Store, columns: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        sizes: list[int] = []
        reads.append(("batches", tuple(columns), sizes))
        options: dict[str, Any] = {**kwargs, **({"batch_size": batch} if batch else {})}
        found = scans.trajectory_batches(store, columns, **options)
        if shuffle and "vector" in columns:
            found = iter(list(found)[::-1])
        for b in found:
            sizes.append(len(b["id"]))
            yield b

    def by_id(store: Store, ids: list[str], **kwargs: Any) -> Any:
        reads.append(("by_id", tuple(ids), []))
        return scans.trajectories_by_id(store, ids, **kwargs)

    for name in _WHOLE:
        monkeypatch.setattr(store, name, wrap(name, getattr(store, name)))
    monkeypatch.setattr(incremental, "trajectory_batches", batches)
    monkeypatch.setattr(induce_job, "trajectories_by_id", by_id)
    return reads


def _induce(store: Store, settings: Settings) -> RunReport:
    return run_induction(store, settings, RuleInducer(), namespace=settings.namespace)


def _forwards_and_cancels(store: Store, settings: Settings) -> None:
    # 40 runs of five forwarding tasks (one cluster) and 8 cancellations (another).
    store_trajectories(
        store, [forward(6 * i) for i in range(40)] + [cancel(i) for i in range(8)], settings.scrub
    )
    _induce(store, settings)


def test_a_run_that_only_defers_reads_no_steps_and_no_whole_trajectory(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forwards_and_cancels(store, settings)
    store_trajectories(
        store, [forward(240, skip_lookup=True, success=False)], settings.scrub
    )  # 1 of 40: waits
    reads = _spy(store, monkeypatch)
    report = _induce(store, settings)
    assert report.plan.deferred and not report.plan.changed
    # A known task: nothing to place, so not even the vectors are read.
    assert [(name, columns) for name, columns, _ in reads] == [("batches", incremental._COLUMNS)]
    assert "steps" not in incremental._COLUMNS and "vector" not in incremental._COLUMNS


def test_a_run_reads_whole_trajectories_only_of_the_clusters_it_induces(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _forwards_and_cancels(store, settings)
    store_trajectories(store, [cancel(100)], settings.scrub)  # a cluster of 8 runs: any new run counts
    reads = _spy(store, monkeypatch)
    report = _induce(store, settings)
    [changed] = report.plan.changed
    assert isinstance(changed, ClusterMembers)  # its members' ids, read when it is induced
    runs = set(changed.successes + changed.failures)
    assert "cancel-100" in runs and not any(r.startswith("fwd-") for r in runs)
    assert [name for name, _, _ in reads if name != "batches"] == ["by_id"]  # no store read of every run
    [ids] = [ids for name, ids, _ in reads if name == "by_id"]
    assert set(ids) == runs
    batched = [columns for name, columns, _ in reads if name == "batches"]
    assert batched[0] == incremental._COLUMNS and batched[-1] == incremental._LITERAL_COLUMNS
    assert all("vector" not in c or c == ("id", "vector") for c in batched)
    # The literal index still counts every trajectory of the namespace, as a refit's does.
    assert changed.literals.total == store.count_trajectories()


def _every_column(store: Store, columns: list[str], *, namespace: str) -> dict[str, Any]:
    """Some columns of every trajectory of a namespace read at once, in `list_trajectories`
    order: a list each, `vector` as one float32 matrix (what an incremental run read before
    it read in batches)."""
    where = f"namespace = {quote(namespace)}"
    table = select(store._trajectories(), where, sorted({*columns, "created_at", "id"}))
    table = table.sort_by([("created_at", "descending"), ("id", "ascending")])
    out: dict[str, Any] = {}
    for name in columns:
        if name == "vector":
            flat = table[name].combine_chunks().flatten().to_numpy() if table.num_rows else []
            out[name] = np.asarray(flat, dtype=np.float32).reshape(table.num_rows, store.embedder.dim)
        else:
            out[name] = table[name].to_pylist()
    return out


def test_every_read_is_in_batches_and_places_as_every_vector_held_at_once(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_trajectories(store, simulate(300, seed=0), settings.scrub)
    _induce(store, settings)
    store_trajectories(store, simulate(12, seed=1), settings.scrub)  # new tasks to place
    ns, total = settings.namespace, store.count_trajectories()
    # What placing the new runs gives with every run's vector held at once (as it was read).
    held = _every_column(store, ["id", "agent", "task", "success", "vector"], namespace=ns)
    last = store.list_runs(namespace=ns)[-1]
    opening = open_run(InductionRun(id="r", namespace=ns), last, total=total, reinduce=set(), force=False)
    limits = Limits(signature=settings_signature(settings), min_tasks=settings.min_cluster_size, min_change=0)
    columns = Columns(held["id"], held["agent"], held["task"], held["success"], held["vector"])
    expected = place(opening, columns, limits)
    assert isinstance(expected, Placement) and expected.placed != cast(
        Any, last.state.placed
    )  # some were placed

    reads = _spy(store, monkeypatch, batch=64, shuffle=True)
    plan = prepare_run(store, settings, namespace=ns, min_change=0)
    assert plan.refit is None and plan.changed
    assert dict(plan.placed) == expected.placed and dict(plan.fingerprints) == expected.fingerprints
    assert [c.key for c in plan.changed] == [f"{a}-c{c}" for a, c in expected.chosen]
    assert list(plan.deferred) == expected.deferred
    assert not [name for name, _, _ in reads if name != "batches"]  # nothing read whole, nothing by id yet
    batched = [(columns, sizes) for name, columns, sizes in reads if name == "batches"]
    assert [c for c, _ in batched] == [
        incremental._COLUMNS,
        incremental._VECTORS,  # the new texts' rows
        incremental._VECTORS,  # the known texts' rows, compared a batch at a time
        incremental._LITERAL_COLUMNS,
    ]
    for _, sizes in batched:  # every pass reads every row, never more than a batch at a time
        assert sum(sizes) == total and max(sizes) <= 64 and len(sizes) > 1


def test_importing_flowmem_loads_no_agent_runtime_until_a_name_is_used() -> None:
    script = (
        "import sys, flowmem, flowmem.jobs.induce, flowmem.storage\n"
        "assert 'flowmem.agents' not in sys.modules, 'agents loaded by import'\n"
        "from flowmem import WorkflowMemory, Store, store_from\n"
        "from flowmem.agents import WorkflowMemory as W\n"
        "assert WorkflowMemory is W and Store is flowmem.storage.Store\n"
        "assert set(flowmem.__all__) <= set(dir(flowmem))\n"
        "try:\n    flowmem.nothing_of_that_name\nexcept AttributeError:\n    pass\n"
        "else:\n    raise SystemExit('no AttributeError')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=READY_LIMIT)
    assert done.returncode == 0, done.stderr
