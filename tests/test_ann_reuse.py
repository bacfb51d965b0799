"""A reload that changes the served versions keeps serving the ANN it replaces (through a map of
keys, `retrieval.ann_reuse`) and, for a change of status alone, does not read the workflows
table (`ServedRows.restatus`); what it serves is what a whole read and brute force serve."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from flowmem.agents.served_index import ServedIndex
from flowmem.jobs.factories import store_from
from flowmem.models import InductionRun, UsageStats
from flowmem.policy.lifecycle import Transition
from flowmem.retrieval import ann_reuse
from flowmem.retrieval.ann import AnnSlot
from flowmem.retrieval.ann_reuse import borrow, key_base
from flowmem.settings import Settings
from flowmem.storage import Store
from flowmem.storage.served import ServedRows
from tests.served_seed import CASES, QUERIES, seed
from tests.served_seed import seeded_workflow as _workflow
from tests.served_seed import task_text as _task


def _base(ids: list[str], versions: list[int], counts: list[int]) -> Any:
    owners = np.repeat(np.arange(len(ids), dtype=np.int64), counts)
    return key_base(ids, np.array(versions, dtype=np.int64), owners)


def test_the_map_follows_each_version_to_its_new_keys() -> None:
    """Kept versions' keys map to where they are now, a version gone maps to -1, and the keys
    of a new version, or of one whose key count differs, are the extra keys."""
    base = _base(["a", "b", "c", "d"], [1, 1, 1, 2], [2, 1, 3, 1])  # keys 0-1 a, 2 b, 3-5 c, 6 d
    now = _base(["a", "c", "d", "e"], [1, 1, 2, 1], [2, 3, 2, 1])  # d's count differs, e new
    found = borrow(AnnSlot(), base, now)
    assert found.remap.tolist() == [0, 1, -1, 2, 3, 4, -1]
    assert found.extra.tolist() == [5, 6, 7]
    assert found.gone == 2
    assert found.keys(np.array([6, 3, 2, 0])).tolist() == [2, 0]
    same = borrow(AnnSlot(), base, base)
    assert same.remap.tolist() == list(range(7)) and not len(same.extra) and same.gone == 0
    assert same.close and same.useful


def test_how_far_a_borrowed_ann_may_drift(monkeypatch: pytest.MonkeyPatch) -> None:
    """Close: few extra keys and few of its keys gone; useful: it holds half the keys or more."""
    base = _base([f"w{i}" for i in range(8)], [1] * 8, [1] * 8)
    two_gone = borrow(AnnSlot(), base, _base([f"w{i}" for i in range(2, 8)], [1] * 6, [1] * 6))
    assert two_gone.close and two_gone.useful  # 2 of 8 gone: GONE_MAX
    three_gone = borrow(AnnSlot(), base, _base([f"w{i}" for i in range(3, 8)], [1] * 5, [1] * 5))
    assert not three_gone.close and three_gone.useful
    new = _base([f"w{i}" for i in range(12)], [1] * 12, [1] * 12)
    assert borrow(AnnSlot(), base, new).close
    monkeypatch.setattr(ann_reuse, "EXTRA_MAX", 3)
    assert not borrow(AnnSlot(), base, new).close
    mostly_new = _base([f"w{i}" for i in range(4, 20)], [1] * 16, [1] * 16)
    assert not borrow(AnnSlot(), base, mostly_new).useful  # 4 of its keys served, 12 extra


def _hits(index: ServedIndex) -> list[list[tuple[str, int, float]]]:
    return [
        [(h.workflow.id, h.workflow.version, h.score) for h in index.search(q, **case)]
        for q in QUERIES
        for case in CASES
    ]


def _same(got: list[list[tuple[str, int, float]]], want: list[list[tuple[str, int, float]]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert [h[:2] for h in g] == [h[:2] for h in w]
        assert np.allclose([h[2] for h in g], [h[2] for h in w], rtol=0, atol=2**-15)


def _exact(store: Store) -> ServedIndex:
    """Brute force over a whole read: what every search below must serve."""
    return ServedIndex(store, "default", ann_min=1_000_000)


def _counting(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    whole = store.served_rows

    def counted(**kw: Any) -> ServedRows:
        reads.append("read")
        return whole(**kw)

    monkeypatch.setattr(store, "served_rows", counted)
    return reads


def _with_ann(settings: Settings) -> tuple[Store, ServedIndex]:
    """The seeded store, and an index that builds its ANN at once from its first key (faiss
    needed: skipped without it)."""
    pytest.importorskip("faiss")
    store = store_from(settings)
    seed(store)
    return store, ServedIndex(store, "default", ann_min=0, ann_wait=True)


def test_a_status_change_borrows_the_ann_and_reads_no_workflow(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retirement through the process's own store: the next search reads the lifecycle log,
    not the workflows table, searches the ANN built before it through the map (no new one is
    built), and serves what brute force over a whole read serves."""
    store, index = _with_ann(settings)
    _same(_hits(index), _hits(_exact(store)))
    first = index._snapshot
    assert first.slot.ann is not None and first.slot.base is not None
    reads = _counting(store, monkeypatch)
    gone = [(first.rows.ids[i], int(first.rows.versions[i])) for i in (0, 7, 30)]
    store.record_transitions([Transition(w, v, "active", "retired", "test") for w, v in gone])
    got = _hits(index)
    snap = index._snapshot
    assert reads == [] and index.reloads == 2
    assert snap.slot.ann is None and snap.slot.base is None  # no new ANN
    assert snap.borrowed is not None and snap.borrowed.slot is first.slot
    assert snap.borrowed.gone == sum(int(first.index._hi[i] - first.index._lo[i]) for i in (0, 7, 30))
    assert not {(w.id, w.version) for w in index.served()} & set(gone)
    _same(got, _hits(_exact(store)))


def test_new_versions_are_scored_beside_the_borrowed_ann(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another induction run's versions: read whole, their keys scored exactly beside the ANN
    of the keys before (served as brute force serves them); past `EXTRA_MAX` such keys a new
    ANN is built, over every key, and later snapshots borrow that one."""
    store, index = _with_ann(settings)
    _hits(index)
    first = index._snapshot
    rng = random.Random(3)
    added = [_workflow(i, 1, rng, status="active") for i in range(200, 206)]
    keys = {w.id: store.embedder.embed([_task(rng), _task(rng)]) for w in added}
    store.commit_run(InductionRun(id="more"), added, keys=keys)
    got = _hits(index)
    snap = index._snapshot
    assert snap.borrowed is not None and snap.borrowed.slot is first.slot and snap.slot.ann is None
    assert len(snap.borrowed.extra) == 12 and snap.borrowed.gone == 0
    _same(got, _hits(_exact(store)))
    monkeypatch.setattr(ann_reuse, "EXTRA_MAX", 12)
    more = [_workflow(i, 1, rng, status="active") for i in range(300, 302)]
    store.commit_run(
        InductionRun(id="more-2"), more, keys={w.id: store.embedder.embed([_task(rng)]) for w in more}
    )
    got = _hits(index)
    snap = index._snapshot
    assert snap.slot.ann is not None and snap.slot.base is not None  # 14 extra: built anew
    assert snap.slot.ann.size == len(snap.index.vectors)
    _same(got, _hits(_exact(store)))
    store.record_transitions([Transition(more[0].id, 1, "active", "retired", "test")])
    _hits(index)
    assert index._snapshot.borrowed is not None and index._snapshot.borrowed.slot is snap.slot


def test_restatus_takes_what_a_whole_read_reads(settings: Settings) -> None:
    """The rows a change of status alone gives equal a whole read's, column by column; a
    version served again, or a whole read that left out a run not recorded, needs a whole read."""
    store = store_from(settings)
    seed(store)
    rows = store.served_rows()
    taken = [(rows.ids[i], int(rows.versions[i])) for i in (2, 3, 50)]
    changes = [Transition(w, v, "active", "retired", "test") for w, v in taken[:2]]
    changes.append(Transition(*taken[2], "active", "deprecated", "test"))
    store.record_transitions(changes)
    after = rows.restatus(store.live_statuses())
    whole = store.served_rows()
    assert after is not None and len(after) == len(whole) < len(rows)
    for name in ("ids", "statuses", "stats", "agent_names", "scope_names"):
        assert getattr(after, name) == getattr(whole, name), name
    for name in (
        "versions",
        "agents",
        "scopes",
        "keys",
        "owners",
        "shares",
        "subroutine",
        "by_example",
        "picked",
    ):
        assert np.array_equal(getattr(after, name), getattr(whole, name)), name
    assert after.table.equals(whole.table)
    assert after.workflows(list(range(len(after)))) == whole.workflows(list(range(len(whole))))
    store.record_transitions([Transition(*taken[0], "retired", "active", "test")])
    assert after.restatus(store.live_statuses()) is None  # served again: not in these rows
    assert whole.restatus(store.live_statuses()) is None
    torn = store.served_rows()
    assert torn.candidates is not None
    object.__setattr__(
        torn, "candidates", torn.candidates.__class__(**{**vars(torn.candidates), "torn": True})
    )
    assert torn.restatus(store.live_statuses()) is None


def test_an_ann_that_never_landed_is_built_anew(settings: Settings) -> None:
    """An ANN whose build failed stays None: a snapshot that would borrow it builds its own
    rather than scoring every key from then on."""
    store, index = _with_ann(settings)
    _hits(index)
    first = index._snapshot
    first.slot.ann = None  # as a build that raised leaves it
    store.record_transitions(
        [Transition(first.rows.ids[4], int(first.rows.versions[4]), "active", "retired", "t")]
    )
    got = _hits(index)
    snap = index._snapshot
    assert snap.slot.ann is not None and snap.slot.ann.size == len(snap.index.vectors)
    _same(got, _hits(_exact(store)))


def test_a_status_change_and_outcomes_together(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """A retirement and outcomes between two searches (the lifecycle log and the usage table
    both moved): the rows are taken without the workflows table, with the new usage."""
    store = store_from(settings)
    seed(store)
    index = ServedIndex(store, "default")
    _hits(index)
    rows = index._snapshot.rows
    reads = _counting(store, monkeypatch)
    kept, gone = (rows.ids[9], int(rows.versions[9])), (rows.ids[10], int(rows.versions[10]))
    store.record_transitions([Transition(*gone, "active", "retired", "t")])
    store.add_usage({kept: UsageStats(served=5, successes=5)})
    got = _hits(index)
    assert reads == []
    served = {(w.id, w.version): w for w in index.served()}
    assert gone not in served and served[kept].stats == store.usage()[kept]
    _same(got, _hits(_exact(store)))


def test_outcomes_that_move_many_factors_build_an_ann_scaled_by_them(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ANN holds each key scaled by its version's rank factor when built. Outcomes that
    raise more keys' factors than `BOOSTED` (here 3) build a new one, scaled by the factors
    then, the old one searched until it lands; what is served is what brute force serves."""
    from flowmem.retrieval import ranking

    store, index = _with_ann(settings)
    _hits(index)
    first = index._snapshot
    assert first.slot.scale is not None and np.array_equal(first.slot.scale, first.key_factors)
    monkeypatch.setattr(ranking, "BOOSTED", 3)
    rows = first.rows
    store.add_usage({(rows.ids[i], int(rows.versions[i])): UsageStats(served=1, successes=1) for i in (1, 2)})
    _hits(index)
    assert index._snapshot.slot is first.slot  # two versions' keys scored beside it
    grown = [i for i in range(3, 40) if rows.stats[i] == UsageStats()][:8]
    store.add_usage({(rows.ids[i], int(rows.versions[i])): UsageStats(served=2, successes=2) for i in grown})
    got = _hits(index)
    snap = index._snapshot
    assert snap.slot is not first.slot and snap.slot.ann is not None
    assert snap.slot.scale is not None and np.array_equal(snap.slot.scale, snap.key_factors)
    _same(got, _hits(_exact(store)))
