"""What an incremental induction run reads: a few columns of every trajectory, the steps only
when it induces a cluster, and whole trajectories only of the clusters it induces; and what a
`flowmem` command imports before it needs it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.induce import RunReport, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import cancel, forward
from tests.processes import READY_LIMIT

_READS = (
    "trajectory_columns",
    "trajectory_scan",
    "get_trajectories",
    "list_trajectories",
    "iter_trajectories",
)


def _spy(store: Store) -> list[tuple[str, tuple[Any, ...]]]:
    """Record every trajectory read the store makes from now on: (method, arguments)."""
    calls: list[tuple[str, tuple[Any, ...]]] = []

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def spied(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, args))
            return method(*args, **kwargs)

        return spied

    for name in _READS:
        setattr(store, name, wrap(name, getattr(store, name)))
    return calls


def _induce(store: Store, settings: Settings) -> RunReport:
    return run_induction(store, settings, RuleInducer(), namespace=settings.namespace)


def _forwards_and_cancels(store: Store, settings: Settings) -> None:
    # 40 runs of five forwarding tasks (one cluster) and 8 cancellations (another).
    store_trajectories(
        store, [forward(6 * i) for i in range(40)] + [cancel(i) for i in range(8)], settings.scrub
    )
    _induce(store, settings)


def test_a_run_that_only_defers_reads_no_steps_and_no_whole_trajectory(
    settings: Settings, store: Store
) -> None:
    _forwards_and_cancels(store, settings)
    store_trajectories(
        store, [forward(240, skip_lookup=True, success=False)], settings.scrub
    )  # 1 of 40: waits
    calls = _spy(store)
    report = _induce(store, settings)
    assert report.plan.deferred and not report.plan.changed
    assert [name for name, _ in calls] == ["trajectory_columns"]
    assert "steps" not in calls[0][1][0]


def test_a_run_reads_whole_trajectories_only_of_the_clusters_it_induces(
    settings: Settings, store: Store
) -> None:
    _forwards_and_cancels(store, settings)
    store_trajectories(store, [cancel(100)], settings.scrub)  # a cluster of 8 runs: any new run counts
    calls = _spy(store)
    report = _induce(store, settings)
    [changed] = report.plan.changed
    runs = {t.id for t in [*changed.successes, *changed.failures]}
    assert "cancel-100" in runs and not any(r.startswith("fwd-") for r in runs)
    names = [name for name, _ in calls]
    assert sorted(names) == ["get_trajectories", "trajectory_columns", "trajectory_scan"]
    [(_, (ids,))] = [c for c in calls if c[0] == "get_trajectories"]
    assert set(ids) == runs
    [(_, (columns,))] = [c for c in calls if c[0] == "trajectory_columns"]
    assert "steps" not in columns
    # The literal index still counts every trajectory of the namespace, as a refit's does.
    assert changed.literals.total == store.count_trajectories()


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
