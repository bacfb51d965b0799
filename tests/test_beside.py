"""Work handed to a helper thread, and a search that looks up the stored runs in it while it
ranks (`retrieval.beside`, `retrieval.search`)."""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from flowmem.agents import served_index
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.retrieval.beside import QUEUED_MAX, Beside, Pending
from flowmem.retrieval.cover import Evidence
from flowmem.settings import Settings
from tests.factories import cancel, forward, induced, remind, until

WAIT = 30.0


def _name() -> str:
    return threading.current_thread().name


def test_work_runs_in_the_helper_and_its_value_or_error_reaches_the_caller() -> None:
    helper = Beside("helper-a")
    pending = helper.run(_name)
    until(lambda: pending.begun)
    assert pending.result() == "helper-a" and helper.handed == 1

    def fails() -> None:
        raise KeyError("no such task")

    failed = helper.run(fails)
    until(lambda: failed.begun)
    with pytest.raises(KeyError, match="no such task"):
        failed.result()


def test_work_the_helper_has_not_begun_is_run_by_its_caller_without_waiting() -> None:
    helper = Beside("helper-b")
    held, release = threading.Event(), threading.Event()

    def hold() -> str:
        held.set()
        assert release.wait(WAIT)
        return _name()

    first = helper.run(hold)
    assert held.wait(WAIT)  # the helper is busy with the first
    second = helper.run(_name)
    assert second.result() == _name()  # taken back: run here, not after the first
    release.set()
    assert first.result() == "helper-b"
    after = helper.run(_name)
    until(lambda: after.begun)
    assert after.result() == "helper-b"  # the helper skipped the one taken back, and goes on


def test_work_past_the_queue_s_bound_is_left_to_its_caller_and_cancelled_work_never_runs() -> None:
    helper = Beside("helper-c")
    held, release = threading.Event(), threading.Event()
    ran: list[int] = []

    def hold() -> None:
        held.set()
        assert release.wait(WAIT)

    first = helper.run(hold)
    assert held.wait(WAIT)
    queued = [helper.run(functools.partial(ran.append, i)) for i in range(QUEUED_MAX + 2)]
    assert helper.handed == 1 + QUEUED_MAX  # the last two were not handed
    for pending in queued[:2]:
        pending.cancel()
    queued[-1].result()
    assert ran == [QUEUED_MAX + 1]  # run by this thread, at once
    release.set()
    first.result()
    for pending in queued[2:]:
        pending.result()
    assert sorted(ran) == list(range(2, QUEUED_MAX + 2))  # the cancelled two never ran
    assert not queued[0].begun or queued[0].result() is None


def test_cancel_waits_for_work_the_helper_is_running() -> None:
    helper = Beside("helper-d")
    held, release, finished = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        held.set()
        assert release.wait(WAIT)
        finished.set()

    pending = helper.run(hold)
    assert held.wait(WAIT)
    threading.Timer(0.2, release.set).start()
    pending.cancel()
    assert finished.is_set()  # no work is left running once its caller has gone


def test_a_forked_child_starts_a_helper_of_its_own() -> None:
    helper = Beside("helper-e")
    stale = threading.Thread(target=lambda: None)  # the parent's helper as a child has it: not running
    helper._thread, helper._pid = stale, -7  # made in another process
    helper._queue.append(Pending(lambda: None))  # the parent's queued work: not the child's
    pending = helper.run(_name)
    until(lambda: pending.begun)
    assert pending.result() == "helper-e" and helper._thread is not stale and len(helper._queue) <= 1


def _hits(index: served_index.ServedIndex, tasks: list[str]) -> list[list[tuple[str, int, float]]]:
    return [[(h.workflow.id, h.workflow.version, h.score) for h in index.search(t, k=3)] for t in tasks]


def test_a_search_looks_up_the_stored_runs_beside_its_ranking_and_serves_the_same(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `ann_min` stored tasks (an HNSW of them), a search hands what it asks of the
    stored runs to its helper thread while it ranks: the same hits as in turn, for tasks that
    recur, of a known domain, and of none; a task of no known domain asks `familiar` once,
    in the helper."""
    store = induced(settings)
    failed = [remind(i).model_copy(update={"success": False, "id": f"remind-{i}"}) for i in range(8)]
    store_trajectories(store, failed, settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    index = served_index.ServedIndex(
        store,
        settings.namespace,
        floor=settings.floor,
        cover_weight=0.35,
        evidence_limit=100,
        ann_min=4,
        ann_wait=True,
    )
    tasks = [
        cancel(2).task,  # recurs
        forward(5).task,  # recurs
        "Remind me to call zed on friday",  # its kind only failed: a known domain
        "Please archive every message older than a year",  # a new task
        "what is the weather in Paris tomorrow",  # no known domain
        "write a poem about the sea",
    ]
    index.search(tasks[0])
    until(lambda: index._evidence.index.ann is not None)
    asked: list[str] = []
    familiar = Evidence.familiar

    def counted(self: Evidence, query: npt.NDArray[np.float32], floor: float) -> bool:
        asked.append(_name())
        return familiar(self, query, floor)

    monkeypatch.setattr(Evidence, "familiar", counted)
    beside = index._beside
    index._beside = None  # type: ignore[assignment]
    in_turn = _hits(index, tasks)
    asked_in_turn = list(asked)
    index._beside, handed = beside, beside.handed
    asked.clear()
    assert _hits(index, tasks) == in_turn
    assert beside.handed - handed == len(tasks)
    assert in_turn[0] and in_turn[1] and in_turn[2] and not in_turn[4] and not in_turn[5]
    # In turn, `floor_keeps` asks it of the tasks whose memories are all below the floor (those
    # of no known domain among them); beside, the lookup asks it of the tasks whose template no
    # stored run has, in the helper or (not begun in time) in the caller, and nothing asks again.
    unknown = [index._evidence._template(t) is None for t in tasks]
    assert unknown == [False, False, True, True, True, True]
    assert set(asked_in_turn) == {_name()} and len(asked_in_turn) >= 2
    assert len(asked) == sum(unknown)


def test_a_search_whose_ranking_fails_leaves_no_lookup_running(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = induced(settings)
    index = served_index.ServedIndex(
        store,
        settings.namespace,
        floor=settings.floor,
        cover_weight=0.35,
        evidence_limit=100,
        ann_min=4,
        ann_wait=True,
    )
    index.search("Cancel my next meeting with zed")
    until(lambda: index._evidence.index.ann is not None)
    cancelled: list[bool] = []
    cancel = Pending.cancel

    def watched(self: Pending[Any]) -> None:
        cancel(self)
        cancelled.append(True)

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("ranking failed")

    monkeypatch.setattr(Pending, "cancel", watched)
    monkeypatch.setattr(type(index._snapshot), "ranked", broken)
    with pytest.raises(RuntimeError, match="ranking failed"):
        index.search("Cancel my next meeting with zed")
    assert cancelled == [True]
