"""The served index returns what the per-workflow implementation returned, on a seeded store.

`tests/fixtures/served_index_expected.json` was written by the implementation of commit
0dbc2d1 (one `Workflow` object per served version, one matrix-vector product over every key)
with `python -m tests.test_index_scale`: every search below must give the same workflows, in
the same order, with the same scores.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flowmem.agents.served_index import ServedIndex
from flowmem.jobs.factories import store_from
from flowmem.models import InductionRun, Workflow
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import make_workflow
from tests.served_seed import AGENTS, CASES, QUERIES, seed
from tests.served_seed import seeded_workflow as _workflow
from tests.served_seed import task_text as _task

EXPECTED = Path(__file__).parent / "fixtures" / "served_index_expected.json"


def results(index: ServedIndex) -> list[list[list[Any]]]:
    """Per query and case: the hits as [id, version, score, similarity]."""
    out = []
    for query in QUERIES:
        for case in CASES:
            hits = index.search(query, **case)
            out.append([[h.workflow.id, h.workflow.version, h.score, h.similarity] for h in hits])
    return out


def _index(settings: Settings, gap: float | None, **kw: Any) -> ServedIndex:
    store = store_from(settings)
    seed(store)
    return ServedIndex(store, settings.namespace, gap=gap, **kw)


@pytest.mark.parametrize("ann", [False, True], ids=["brute-force", "ann"])
@pytest.mark.parametrize("gap", [None, 0.25])
def test_the_columnar_index_serves_what_the_previous_one_served(
    settings: Settings, gap: float | None, ann: bool
) -> None:
    if ann:
        pytest.importorskip("faiss")
    expected = json.loads(EXPECTED.read_text())[str(gap)]
    index = _index(settings, gap, ann_min=0 if ann else 20_000, ann_wait=True)
    got = results(index)
    assert (index._snapshot.slot.ann is not None) == ann
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert [h[:2] for h in g] == [h[:2] for h in e]
        # Cosines are compared rounded to 2^-16 (`nearest.snap_cosines`): half a step, times a
        # rank factor below 2.
        assert np.allclose([h[2:] for h in g], [h[2:] for h in e], rtol=0, atol=2**-16) if g else not e


def test_served_lists_the_same_versions_with_live_stats_and_status(settings: Settings) -> None:
    index = _index(settings, None)
    served = index.served()
    expected = json.loads(EXPECTED.read_text())["served"]
    assert [[w.id, w.version, w.status, w.stats.successes] for w in served] == expected
    assert all(isinstance(w, Workflow) for w in served)


def test_overlapping_searches_restore_the_blas_threads_the_last_one_out() -> None:
    from threadpoolctl import threadpool_info  # type: ignore[import-untyped]

    from flowmem.retrieval.blas import ONE_BLAS_THREAD

    first, second = ONE_BLAS_THREAD, ONE_BLAS_THREAD
    first.__enter__()
    # The BLAS libraries loaded when the first search ran (not one a later import brought).
    known = {lib.filepath for lib in first._blas or []}
    first.__exit__(None, None, None)

    def blas() -> list[int]:
        return [
            int(i["num_threads"])
            for i in threadpool_info()
            if i["filepath"] in known and i["user_api"] == "blas"
        ]

    before = blas()
    first.__enter__()
    second.__enter__()  # another search, overlapping
    first.__exit__(None, None, None)
    assert set(blas()) <= {1}  # still inside the second one
    second.__exit__(None, None, None)
    assert blas() == before


def test_served_rows_key_a_version_without_keys_by_its_vector_as_workflow_index_does(store: Store) -> None:

    for i in range(5):
        store.put_workflow(make_workflow(f"w{i}", status="active"))
    store._workflows("default").update(where="id = 'w1' OR id = 'w3'", values={"keys": None})
    served, matrix, owners, shares = store.workflow_index()
    found = store.served_rows()
    assert found.ids == [w.id for w in served] and np.array_equal(found.keys, matrix)
    assert found.owners.tolist() == owners and found.shares.tolist() == shares


if __name__ == "__main__":  # write the expectations from the implementation checked out now
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        base = Settings(db=f"{tmp}/db")
        out: dict[str, Any] = {
            str(g): results(_index(base.model_copy(update={"db": f"{tmp}/{g}"}), g)) for g in [None, 0.25]
        }
        out["served"] = [
            [w.id, w.version, w.status, w.stats.successes]
            for w in _index(base.model_copy(update={"db": f"{tmp}/s"}), None).served()
        ]
    EXPECTED.write_text(json.dumps(out) + "\n")
    sys.exit(0)


def test_a_hit_is_built_from_its_row_as_the_store_reads_that_version(settings: Settings) -> None:
    """`ServedRows.workflow` reads a few columns and validates once: the same `Workflow`, field
    for field and in its JSON, as the store's own read of the version with its live state."""
    index = _index(settings, None)
    store = index.store
    rows = store.served_rows()
    expected = {(w.id, w.version): w for i in sorted(set(rows.ids)) for w in store.history(i)}
    assert len(rows) > 100
    for i in range(len(rows)):
        got = rows.workflow(i)
        want = expected[(got.id, got.version)]
        assert got == want
        assert got.model_dump_json() == want.model_dump_json()
    assert any(w.stats.served for w in expected.values())
    assert any(w.status == "candidate" for w in expected.values())


def test_the_served_sources_are_those_of_the_served_workflows(settings: Settings, tmp_path: Path) -> None:
    """`ServedIndex.sources` reads the served versions' source runs from their column: the ids
    every served `Workflow` holds, none missing, none more (what `search_workflow` leaves out of
    the recorded procedures it returns); none for a namespace nothing is served in."""
    index = _index(settings, None)
    rng = random.Random(3)
    sourced = [
        _workflow(
            200 + i, 1, rng, status=["active", "candidate", "deprecated"][i % 3], source_trajectory_ids=ids
        )
        for i, ids in enumerate([[f"run{i}#0", f"run{i + 1}", "shared", "shared"] for i in range(12)] + [[]])
    ]
    keys = {w.id: index.store.embedder.embed([_task(rng)]) for w in sourced}
    index.store.commit_run(InductionRun(id="seed-3"), sourced, keys=keys)
    want = {rid for w in index.served() for rid in w.source_trajectory_ids}
    assert len(want) > 10 and "run0#0" in want and "run2#0" not in want  # a deprecated version's
    assert index.sources() == want
    assert index.count() == len(index.served()) > 100
    empty = ServedIndex(store_from(Settings(db=str(tmp_path / "empty"))), "default")
    assert empty.sources() == frozenset() and empty.served() == [] and empty.count() == 0

    # `drawn_from`: the versions induced from some of these runs, each workflow once, with
    # how many distinct ones (a duplicate id counted once), as a filter of `served()` gives.
    runs = {"run3", "run4", "shared", "run5#0", "nowhere"}
    for agent, scope in [(None, None), (AGENTS[1], "subtask"), (AGENTS[0], "task"), ("nobody", None)]:
        want_drawn: dict[str, int] = {}
        for w in index.served():
            fits = agent in (None, w.agent) and scope in (None, w.scope)
            if fits and w.id not in want_drawn and (n := len(runs & set(w.source_trajectory_ids))):
                want_drawn[w.id] = n
        got = index.drawn_from(runs, agent=agent, scope=scope)
        assert [(w.id, n) for w, n in got] == list(want_drawn.items())
        assert all(w == next(s for s in index.served() if s.id == w.id) for w, _ in got)
    assert len(index.drawn_from(runs)) >= 4 and index.drawn_from(set()) == []
    assert empty.drawn_from(runs) == []
