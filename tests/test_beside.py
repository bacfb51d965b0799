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
from flowmem.retrieval import beside as beside_module
from flowmem.retrieval import keys_seen
from flowmem.retrieval.beside import QUEUED_MAX, Beside, Pending, ahead
from flowmem.retrieval.cover import FAMILIAR_EF, Evidence
from flowmem.retrieval.search import SURE
from flowmem.settings import Settings
from flowmem.storage.evidence import newest_successes
from tests.factories import cancel, forward, induced, make_workflow, remind, until

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


def test_work_read_ahead_runs_in_its_own_thread_and_its_value_or_error_reaches_the_caller() -> None:
    read = ahead(_name, "reader-a")
    until(lambda: read.begun)
    assert read.result() == "reader-a"

    def fails() -> None:
        raise OSError("the store is gone")

    failed = ahead(fails, "reader-b")
    with pytest.raises(OSError, match="the store is gone"):
        failed.result()
    held, release = threading.Event(), threading.Event()

    def hold() -> str:
        held.set()
        assert release.wait(WAIT)
        return _name()

    busy = ahead(hold, "reader-c")
    assert held.wait(WAIT)
    done = threading.Thread(target=busy.cancel)  # dropped: waited for, as it is running
    done.start()
    done.join(0.2)
    assert done.is_alive()
    release.set()
    done.join(WAIT)
    assert not done.is_alive()


def test_a_reload_reads_the_evidence_beside_the_served_versions_and_a_failed_read_fails_the_reload(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(db=str(tmp_path / "db"))
    store = induced(settings)
    readers: list[tuple[str, int]] = []

    def counted(*args: Any, **kw: Any) -> Evidence:
        readers.append((_name(), args[2]))  # the thread, and how many runs are asked for
        return newest_successes(*args, **kw)

    monkeypatch.setattr(served_index, "newest_successes", counted)
    index = served_index.ServedIndex(store, settings.namespace, cover_weight=0.35, evidence_limit=100)
    assert index.search("email the report to kofi", k=3) is not None
    assert readers == [("MainThread", 0), ("flowmem-evidence", 100)]  # the reload's read: its own thread
    assert len(index._evidence.tasks) > 0
    served = store.served_rows(namespace=settings.namespace)
    assert index._rows.ids == served.ids

    def broken(*args: Any, **kw: Any) -> Evidence:
        if args[2]:  # the reload's read, not the empty evidence an index starts with
            raise OSError("the runs table is gone")
        return newest_successes(*args, **kw)

    monkeypatch.setattr(served_index, "newest_successes", broken)
    other = served_index.ServedIndex(store, settings.namespace, cover_weight=0.35, evidence_limit=100)
    with pytest.raises(OSError, match="the runs table is gone"):
        other.search("email the report to kofi", k=3)


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


TASKS = [
    cancel(2).task,  # recurs
    forward(5).task,  # recurs
    "Remind me to call zed on friday",  # its kind only failed: a known domain
    "Please archive every message older than a year",  # a new task
    "what is the weather in Paris tomorrow",  # no known domain
    "write a poem about the sea",
]


def _served(settings: Settings, *, failed: bool = True) -> served_index.ServedIndex:
    """A served index of forwarding and cancelling workflows (with failed reminding runs
    stored), past `ann_min` stored tasks (an HNSW of them, built before it is served)."""
    store = induced(settings)
    if failed:
        runs = [remind(i).model_copy(update={"success": False, "id": f"remind-{i}"}) for i in range(8)]
        store_trajectories(store, runs, settings.scrub)
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
    index.search(TASKS[0], k=3)
    until(lambda: index._evidence.index.ann is not None)
    return index


def _counting(monkeypatch: pytest.MonkeyPatch, breadths: list[int] | None = None) -> list[str]:
    """The threads the stored tasks are asked for the one nearest a task in (`familiar` asks
    it), from now on; each search's breadth into `breadths`, when given."""
    asked: list[str] = []
    nearest = Evidence.nearest_seen

    def counted(self: Evidence, query: npt.NDArray[np.float32], ef: int = FAMILIAR_EF) -> float:
        asked.append(_name())
        if breadths is not None:
            breadths.append(ef)
        return nearest(self, query, ef)

    monkeypatch.setattr(Evidence, "nearest_seen", counted)
    return asked


def _in_turn(index: served_index.ServedIndex) -> list[list[tuple[str, int, float]]]:
    beside, index._beside = index._beside, None  # type: ignore[assignment]
    try:
        return _hits(index, TASKS)
    finally:
        index._beside = beside


def test_a_search_looks_up_the_stored_runs_beside_its_ranking_and_serves_the_same(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `ann_min` stored tasks (an HNSW of them), a search hands what it asks of the
    stored runs to its helper thread while it ranks: the same hits as in turn, for tasks that
    recur, of a known domain, and of none; a task of no known domain asks `familiar` once
    (here the keys are not taken to be stored tasks: the ranking runs for every task)."""
    index = _served(settings)
    monkeypatch.setattr(Evidence, "keys_among", lambda self, keys, later: False)
    asked = _counting(monkeypatch)
    in_turn = _in_turn(index)
    asked_in_turn, handed = list(asked), index._beside.handed
    asked.clear()
    assert _hits(index, TASKS) == in_turn
    assert index._beside.handed - handed == len(TASKS)
    assert in_turn[0] and in_turn[1] and in_turn[2] and not in_turn[4] and not in_turn[5]
    # In turn, `floor_keeps` asks it of the tasks whose memories are all below the floor (those
    # of no known domain among them); beside, the lookup asks it of the tasks whose template no
    # stored run has, in the helper or (not begun in time) in the caller, and nothing asks again.
    unknown = [not index._evidence.knows(t) for t in TASKS]
    assert unknown == [False, False, True, True, True, True]
    assert set(asked_in_turn) == {_name()} and len(asked_in_turn) >= 2
    assert len(asked) == sum(unknown)


def test_a_task_of_no_known_domain_is_answered_by_the_stored_tasks_when_every_key_is_one(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When every served key is a stored task's vector and every memory is keyed by example
    tasks, a task whose template no run has asks the stored tasks first, in the caller: one
    that is of no known domain is served nothing without the ranking's answer; the others get
    what they get in turn. A memory keyed by its own text turns that off."""
    index = _served(settings)
    evidence, keys = index._evidence, index._snapshot.index.vectors
    assert not evidence.keys_among(keys, lambda work: False)  # not handed: not worked out
    evidence.work_out_keys(keys)
    assert evidence.keys_among(keys, lambda work: False)  # the induced keys are stored tasks
    breadths: list[int] = []
    asked = _counting(monkeypatch, breadths)
    in_turn = _in_turn(index)
    asked.clear()
    breadths.clear()
    handed = index._beside.handed
    assert _hits(index, TASKS) == in_turn
    # The four tasks of no template a run has, each asked in the caller, nothing beside: one
    # found a stored task above the floor (familiar: ranked, in turn); the others none within
    # SURE of the floor (nothing ranked).
    assert asked == [_name()] * 4 and breadths == [FAMILIAR_EF] * 4
    assert index._beside.handed - handed == 2  # the two recurring tasks' lookups, nothing else
    found = [evidence.nearest_seen(v) for v in index.store.embedder.embed(TASKS[2:])]
    assert found[0] >= settings.floor and max(found[1:]) < SURE * settings.floor
    waited: list[bool] = []
    result = Pending.result

    def watched(self: Pending[Any]) -> Any:
        waited.append(True)
        return result(self)

    monkeypatch.setattr(Pending, "result", watched)
    ranked: list[bool] = []
    rank = type(index._snapshot).ranked

    def counted(self: Any, *args: Any, **kw: Any) -> Any:
        ranked.append(True)
        return rank(self, *args, **kw)

    monkeypatch.setattr(type(index._snapshot), "ranked", counted)
    assert index.search(TASKS[4]) == [] and not ranked  # no known domain: nothing ranked
    assert index.search(TASKS[2]) and ranked == [True]  # a known domain: ranked
    assert waited == []  # nothing handed to the helper, nothing waited for
    # What the stored tasks' HNSW finds decides (`search._unknown`).
    ranked.clear()
    breadths.clear()

    def nearest(share: float) -> None:
        """The stored tasks' HNSW finds a stored task `share` of the floor."""

        def found(self: Evidence, query: npt.NDArray[np.float32], ef: int = FAMILIAR_EF) -> float:
            breadths.append(ef)
            return share * settings.floor

        monkeypatch.setattr(Evidence, "nearest_seen", found)

    handed = index._beside.handed
    nearest(0.85)  # nothing within SURE of the floor: nothing ranked
    assert index.search(TASKS[4]) == [] and not ranked
    nearest(0.95)  # within SURE of it (the HNSW may have missed one above it): ranked; no key
    assert index.search(TASKS[4]) == [] and ranked == [True]  # clears the floor: none served
    nearest(1.05)  # familiar: ranked and served
    assert index.search(TASKS[4]) and ranked == [True, True]
    assert breadths == [FAMILIAR_EF] * 3 and index._beside.handed == handed and waited == []
    nearest(0.85)  # of no known domain again
    # Some other text held by no stored run: its key is not a stored task's.
    index.store.put_workflow(
        make_workflow("weather_report", description="Report the weather in a city tomorrow")
    )
    # Even were its key a stored task's: a memory keyed by its own text is held to no floor.
    monkeypatch.setattr(Evidence, "keys_among", lambda self, keys, later: True)
    until(lambda: bool(index.search(TASKS[4])))  # served once the index reloads
    assert not index._snapshot.rows.by_example.all()
    assert [h.workflow.id for h in index.search(TASKS[4])] == ["weather_report"]


def test_a_search_whose_ranking_fails_leaves_no_lookup_running(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _served(settings, failed=False)
    cancelled: list[bool] = []
    drop = Pending.cancel

    def watched(self: Pending[Any]) -> None:
        drop(self)
        cancelled.append(True)

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("ranking failed")

    monkeypatch.setattr(Pending, "cancel", watched)
    monkeypatch.setattr(type(index._snapshot), "ranked", broken)
    with pytest.raises(RuntimeError, match="ranking failed"):
        index.search(cancel(2).task)
    assert cancelled == [True]


def test_keys_are_among_the_stored_tasks_only_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    seen = rng.normal(size=(500, 24)).astype(np.float32)
    stored = keys_seen.Prints(seen)
    keys = seen[rng.permutation(500)[:200]]
    assert keys_seen.all_among(keys, stored) and keys_seen.all_among(np.concatenate([keys, keys]), stored)
    assert keys_seen.all_among(keys[:0], stored)
    off = keys.copy()
    off.view(np.uint32)[17, 3] ^= 1  # one bit of one key
    assert not keys_seen.all_among(off, stored)
    assert not keys_seen.all_among(keys[:, :12].copy(), stored)  # other dimensions
    assert not keys_seen.all_among(keys, keys_seen.Prints(seen[:0]))
    odd = np.ascontiguousarray(seen[:, :23])  # 32-bit words
    assert keys_seen.all_among(odd[::-3].copy(), keys_seen.Prints(odd))
    assert not keys_seen.all_among(odd[:5] + 1, keys_seen.Prints(odd))


def test_at_exit_no_helper_begins_work_and_the_running_work_is_waited_for() -> None:
    helper = Beside("helper-f")
    held, release = threading.Event(), threading.Event()

    def hold() -> str:
        held.set()
        assert release.wait(WAIT)
        return "done"

    first = helper.run(hold)
    assert held.wait(WAIT)
    first.leave()  # left to the helper: nobody waits for it but `drain`
    threading.Timer(0.2, release.set).start()
    try:
        beside_module.drain(WAIT)
        assert first._done.is_set()  # waited for
        assert not helper.later(_name)  # nothing more is handed
        assert helper.run(_name).result() == _name()  # its caller runs it
    finally:
        beside_module._closing.clear()


def test_while_this_process_builds_an_hnsw_a_search_hands_nothing_to_its_helper(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = _served(settings)
    handed = index._beside.handed
    building = threading.Thread(target=lambda: None)
    monkeypatch.setattr(served_index, "_builds", {building})
    in_turn = _hits(index, TASKS)
    assert index._beside.handed == handed  # both cores are the build's: all in turn
    monkeypatch.setattr(served_index, "_builds", set())
    assert _hits(index, TASKS) == in_turn and index._beside.handed > handed
