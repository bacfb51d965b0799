"""Trajectories are stored by appending (flowmem/storage/appends.py): each key once, whoever
writes it, and a store that alone writes never reads the table's keys again."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

import pytest

from flowmem.jobs.factories import store_from
from flowmem.models import Trajectory
from flowmem.settings import Settings
from flowmem.storage import Store, appends, lance_ops

T = TypeVar("T")


def traj(i: int, namespace: str = "default") -> Trajectory:
    return Trajectory.model_validate(
        {"id": f"t-{i}", "task": f"task {i % 7}", "namespace": namespace, "steps": [{"action": "a"}]}
    )


def copies(store: Store, namespace: str = "default") -> Counter[str]:
    return Counter(t.id for t in store.list_trajectories(limit=None, namespace=namespace))


def test_a_store_that_writes_alone_reads_the_keys_once_and_appends(store: Store) -> None:
    for lo in range(0, 50, 10):
        assert len(store.insert_trajectories(traj(i) for i in range(lo, lo + 10))) == 10
    assert len(store.insert_trajectories(traj(i) for i in range(45, 55))) == 5  # 45-49 are stored
    assert store._known.refreshes == 1 and store._known.checks == 0
    assert copies(store) == Counter({f"t-{i}": 1 for i in range(55)})


def test_what_another_store_wrote_is_seen_before_the_next_append(settings: Settings) -> None:
    a, b = store_from(settings), store_from(settings)
    assert len(a.insert_trajectories([traj(1)])) == 1
    assert len(b.insert_trajectories([traj(2), traj(3)])) == 2
    assert len(a.insert_trajectories([traj(2), traj(3), traj(4)])) == 1  # b's two are stored
    b.compact_trajectories(keep=timedelta(0))  # a compaction moves the version, not the keys
    assert len(a.insert_trajectories([traj(4), traj(5), traj(2, namespace="other")])) == 2
    assert (a._known.refreshes, a._known.catch_ups) == (1, 2)  # one full read, then the news
    assert copies(a) == Counter({f"t-{i}": 1 for i in range(1, 6)})
    assert copies(a, "other") == Counter({"t-2": 1})


def test_after_another_writer_a_store_reads_only_the_fragments_added_since(settings: Settings) -> None:
    a, b = store_from(settings), store_from(settings)
    assert len(a.insert_trajectories(traj(i) for i in range(300))) == 300  # one fragment
    assert len(b.insert_trajectories([traj(300)])) == 1
    assert len(a.insert_trajectories([traj(301)])) == 1
    read = a._known.keys_read
    assert len(b.insert_trajectories([traj(302), traj(301)])) == 1
    assert len(a.insert_trajectories([traj(303), traj(302)])) == 1  # b's 302 is known: not stored twice
    assert a._known.keys_read - read == 2  # b's new row and a's own last append, of 303
    assert (a._known.refreshes, a._known.catch_ups) == (1, 2)
    assert copies(a) == Counter({f"t-{i}": 1 for i in range(304)})


def test_stores_writing_the_same_keys_at_once_store_each_once_and_tell_one_writer(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four stores (four connections, as four processes have) write overlapping batches at
    once. Each key ends stored once, and exactly one writer is told it stored it. (Before
    appends, concurrent merges stored 1,524-1,685 rows for these 1,037 keys.) The overlap is
    made, not hoped for: each writer's first append waits until all four have looked at the
    table, so three of them commit after another's append of the same keys."""
    stores = [store_from(settings) for _ in range(4)]
    for s in stores:
        s.prepare()
    told = [0] * len(stores)
    looked = threading.Barrier(len(stores))
    first = threading.local()
    retry = lance_ops.retry_conflicts

    def append_when_all_looked(call: Callable[[], T]) -> T:
        if not getattr(first, "done", False):  # a writer's first call is its first append
            first.done = True
            looked.wait()
        return retry(call)

    monkeypatch.setattr(appends, "retry_conflicts", append_when_all_looked)

    def write(k: int) -> None:
        try:
            for b in range(6):
                told[k] += len(
                    stores[k].insert_trajectories(traj(b * 100 + i + 37 * k % 50) for i in range(100))
                )
        except BaseException:
            looked.abort()  # the others do not wait for this one
            raise

    threads = [threading.Thread(target=write, args=(k,)) for k in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = {f"t-{b * 100 + i + 37 * k % 50}" for k in range(4) for b in range(6) for i in range(100)}
    found = copies(store_from(settings))
    assert set(found) == expected and max(found.values()) == 1
    assert sum(told) == len(expected)
    assert sum(s._known.checks for s in stores) >= 3  # every first append but one was checked


def test_a_frequent_compaction_rewrites_only_small_fragments_and_costs_no_key_read(store: Store) -> None:
    store.insert_trajectories(traj(i) for i in range(60))  # one fragment of 60 rows
    for i in range(60, 70):
        store.insert_trajectories([traj(i)])  # ten of one row
    table = store._trajectories()
    big = [f for f in table.to_lance().get_fragments() if f.count_rows() == 60]
    assert len(big) == 1 and len(table.to_lance().get_fragments()) == 11
    store.compact_trajectories(keep=timedelta(0), target_rows=50)
    after = store._trajectories().to_lance().get_fragments()
    assert [(f.fragment_id, f.count_rows()) for f in after] == [
        (big[0].fragment_id, 60),
        (after[1].fragment_id, 10),
    ]
    assert len(store.insert_trajectories([traj(5), traj(70)])) == 1
    assert store._known.refreshes == 1 and store._known.checks == 0  # the compaction moved no key
    assert copies(store) == Counter({f"t-{i}": 1 for i in range(71)})


def test_an_append_lance_refuses_as_incompatible_is_tried_again(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lance refuses an append that another writer's commit (an overwrite: a racing creation of
    the table) makes impossible to rebase; nothing of it was committed, so it is tried again."""
    store = store_from(settings)
    store.prepare()
    refused: list[int] = []

    def add_once_refused(call: Callable[[], T]) -> T:
        if not refused:
            refused.append(1)
            raise RuntimeError("lance error: Incompatible transaction: This Append transaction is ...")
        return call()

    monkeypatch.setattr(appends, "retry_conflicts", add_once_refused)
    assert len(store.insert_trajectories(traj(i) for i in range(5))) == 5
    assert refused and store.count_trajectories() == 5
