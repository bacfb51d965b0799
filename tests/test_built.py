"""Served versions kept built ahead (`retrieval.built`): which, how much memory, and that a
search serving one builds nothing, and serves what is live."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Sequence

import numpy as np
import pytest

from flowmem.agents import WorkflowMemory
from flowmem.models import UsageStats, Workflow
from flowmem.retrieval.built import Built, estimate, to_keep
from flowmem.settings import Settings
from tests.factories import induced, make_workflow


class _Rows:
    """Columns enough to build from: a workflow per position, counted as built."""

    def __init__(self, count: int) -> None:
        self.stats: list[UsageStats] = [UsageStats() for _ in range(count)]
        self.asked: list[list[int]] = []

    def workflows(self, positions: Sequence[int]) -> list[Workflow]:
        self.asked.append(list(positions))
        return [make_workflow(f"w{i}", stats=self.stats[i]) for i in positions]


def test_the_most_served_are_kept_first_as_many_as_the_budget_holds() -> None:
    sizes = np.array([100, 100, 100, 100])
    each = int(estimate(sizes)[0])
    assert to_keep([0, 5, 5, 9], sizes, 3 * each) == [3, 1, 2]  # ties by position
    assert to_keep([0, 5, 5, 9], sizes, 3 * each - 1) == [3, 1]
    assert to_keep([0, 5, 5, 9], sizes, 10 * each) == [3, 1, 2, 0]
    assert to_keep([0, 5, 5, 9], sizes, 0) == []
    # The budget is in a row: a small version after a large one that does not fit is not kept.
    assert to_keep([9, 5], np.array([10_000, 0]), int(estimate(np.array([0]))[0])) == []


def test_the_estimate_is_about_what_the_built_workflows_take(settings: Settings) -> None:
    """`estimate` of a store's served versions (from their rows' text) against what building
    them takes (`tracemalloc`): within 0.8–1.6× (it is a budget, not a bound)."""
    store = induced(settings)
    rows = store.served_rows(namespace=settings.namespace)
    positions = list(range(len(rows)))
    rows.workflows(positions)  # what a first build makes once (its reader, its validator)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    built = [rows.workflows(positions) for _ in range(50)]
    taken = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(built) * len(rows) >= 100
    estimated = int(estimate(rows.text_bytes()).sum()) * len(built)
    assert 0.8 * taken <= estimated <= 1.6 * taken, (estimated, taken)


def test_a_kept_version_is_served_as_built_until_its_stats_change_and_then_built_anew_in_its_place() -> None:
    rows, built = _Rows(4), Built(recent=1)
    built.keep([2, 0], lambda: rows)
    assert built.kept.is_set() and rows.asked == [[2, 0]]
    first = built.found([0, 1, 2], rows.stats)
    assert sorted(first) == [0, 2]
    for i in (1, 3):  # recent hits: one kept at most, the kept ones never dropped for them
        built.add({i: rows.workflows([i])[0]}, rows.stats)
    assert sorted(built.found([0, 1, 2, 3], rows.stats)) == [0, 2, 3]
    rows.stats = [*rows.stats[:2], UsageStats(served=1), rows.stats[3]]  # an outcome of version 2
    assert sorted(built.found([0, 2], rows.stats)) == [0]
    built.add({2: rows.workflows([2])[0]}, rows.stats)
    built.add({3: rows.workflows([3])[0]}, rows.stats)  # a recent hit: it would drop 2 were 2 one
    again = built.found([0, 2], rows.stats)
    assert again[0] is first[0] and again[2].stats == UsageStats(served=1)


def test_a_version_built_twice_at_once_is_served_as_the_first_built() -> None:
    rows, built = _Rows(2), Built()
    mine = rows.workflows([0])[0]
    built.add({0: mine}, rows.stats)  # a search built it while `keep` was building it too
    built.keep([0, 1], lambda: rows)
    assert built.found([0], rows.stats)[0] is mine
    assert rows.asked == [[0], [1]]


def test_keeping_stops_once_other_versions_are_served(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowmem.retrieval import built as module

    monkeypatch.setattr(module, "CHUNK", 2)
    rows, built = _Rows(6), Built()
    serving: list[_Rows | None] = [rows, rows, None]
    built.keep(list(range(6)), lambda: serving.pop(0))
    assert rows.asked == [[0, 1], [2, 3]] and built.kept.is_set()


def test_a_search_builds_no_kept_version_and_serves_its_live_stats(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    induced(settings)
    task = "Forward the latest email about 'roadmap' to zed"
    with WorkflowMemory.open(settings) as memory:
        memory.search(task)
        snap = memory.index._snapshot
        assert snap.built.kept.wait(60) and len(snap.built) == len(snap)
        rows = type(snap.rows)
        asked: list[list[int]] = []
        real = rows.workflows

        def counted(self: object, positions: Sequence[int]) -> list[Workflow]:
            asked.append(list(positions))
            return real(self, positions)  # type: ignore[arg-type]

        monkeypatch.setattr(rows, "workflows", counted)
        hit = memory.search(task, k=1)[0]
        assert asked == []
        memory.store.add_usage({(hit.workflow.id, hit.workflow.version): UsageStats(served=1, successes=1)})
        again = memory.search(task, k=1)[0]
        assert again.workflow.stats == UsageStats(served=1, successes=1) and len(asked) == 1
        assert memory.index._snapshot.built is snap.built


def test_nothing_is_kept_ahead_with_no_budget(settings: Settings) -> None:
    induced(settings)
    with WorkflowMemory.open(settings.model_copy(update={"keep_built_mb": 0})) as memory:
        memory.search("Forward the latest email about 'roadmap' to zed")
        built = memory.index._snapshot.built
        assert not built.started and len(built) <= 3
