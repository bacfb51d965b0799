from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from flowmem.agents import WorkflowMemory, ann_cache, served_index
from flowmem.cli import app
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory, UsageStats
from flowmem.policy.lifecycle import rank_factor
from flowmem.retrieval import ann
from flowmem.retrieval.serving import above_floor
from flowmem.server.api import create_app
from flowmem.settings import EMBEDDER_FLOORS, Settings
from flowmem.storage import Store
from tests.factories import WORKBENCH, forward, induced, make_workflow, remind, revise, run, until


def test_search_and_context_serve_the_fitting_workflow(settings: Settings) -> None:
    induced(settings)
    with WorkflowMemory.open(settings) as memory:
        hits = memory.search("Forward the latest email about 'roadmap' to zed")
        assert hits[0].workflow.actions == ["mail.search", "contacts.lookup", "mail.forward"]
        # k is a maximum: the cancelling workflow scores far below the first, so it is left out.
        assert len(hits) == 1
        unbounded = {"relevance_gap": None, "relevance_ratio": None}
        with WorkflowMemory.open(settings.model_copy(update=unbounded)) as padded:
            both = padded.search("Forward the latest email about 'roadmap' to zed")
        assert settings.relevance_gap is not None
        assert len(both) == 2 and both[0].score - both[1].score > settings.relevance_gap
        assert (
            memory.search("Cancel my next meeting with zed", k=1)[0].workflow.actions[-1]
            == "calendar.cancel_event"
        )
        assert memory.search("anything", agent="nobody") == []
        with memory.record("Forward the latest email about 'roadmap' to zed", id="served") as run:
            text = memory.context(run.task, k=1)
            run.finish(success=True)
        assert "mail.forward(email_id={email_id}, to={to})" in text and "{placeholder}" in text
    served = store_from(settings).get_trajectory("served").workflows_used
    assert [(r.id, r.version) for r in served] == [(hits[0].workflow.id, 1)]


UNKNOWN = [
    "what is the weather in Paris tomorrow",
    "write a poem about the sea",
    "how do I reset my password",
]
"""Tasks from no domain the store knows."""


def test_a_task_from_no_known_domain_gets_nothing_everywhere(settings: Settings) -> None:
    assert settings.relevance_floor is None and settings.floor == EMBEDDER_FLOORS["hashing"]  # the default
    induced(settings)
    with WorkflowMemory.open(settings) as memory:
        for task in UNKNOWN:
            assert memory.search(task) == [] and memory.context(task) == "", task
            assert [f for f in memory.search_workflow_sync(task) if f.kind == "workflow"] == [], task
        assert memory.search("Forward the latest email about 'roadmap' to zed")  # a known one does
    api = TestClient(create_app(settings))  # the API, MCP and dashboard search one such index
    for task in UNKNOWN:
        found = api.get("/v1/workflows/search", params={"task": task})
        assert found.status_code == 200 and found.json() == [], task
    with WorkflowMemory.open(settings.model_copy(update={"relevance_floor": 0.0})) as memory:
        assert all(memory.search(task) for task in UNKNOWN)  # without a floor: the nearest, however far


def test_a_task_that_recurs_is_served_however_far_its_example_values_take_it(settings: Settings) -> None:
    # Long random values: a new task of this kind is 0.15-0.22 similar to every stored one, below
    # the floor, but it is the same task up to its values (`cover.task_template`: with 20 task
    # texts a word only one of them holds is a value): it recurs. Every task here is noise to
    # HDBSCAN (no denser region): one cluster holds them (`cluster_tasks`).
    values = random.Random(7)

    def ping(i: int) -> Trajectory:
        host, via = f"{values.getrandbits(64):016x}", f"{values.getrandbits(64):016x}"
        steps: list[tuple[str, dict[str, Any], str | None]] = [
            ("net.route", {"via": via}, None),
            ("net.ping", {"host": host}, None),
        ]
        return run(f"Ping {host} {via}", steps, True, id=f"ping-{i}")

    store_trajectories(store_from(settings), [ping(i) for i in range(20)], settings.scrub)
    run_induction(store_from(settings), settings, RuleInducer(), namespace=settings.namespace)
    task = ping(20).task
    with WorkflowMemory.open(settings) as memory:
        (hit,) = memory.search(task, k=1)
        assert hit.workflow.actions == ["net.route", "net.ping"] and hit.similarity < settings.floor
    with WorkflowMemory.open(settings.model_copy(update={"cover_weight": None})) as memory:
        assert memory.search(task) == []  # without the recurrence rule: below the floor, nothing


def test_a_task_whose_kind_only_failed_so_far_is_of_a_known_domain(settings: Settings) -> None:
    failed = [remind(i).model_copy(update={"success": False, "id": f"remind-{i}"}) for i in range(8)]
    store = induced(settings)
    store_trajectories(store, failed, settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    task = "Remind me to call zed on friday"  # no memory of its kind; the runs of its kind failed
    with WorkflowMemory.open(settings) as memory:
        assert max(h.similarity for h in memory.search(task)) < settings.floor  # served all the same
        assert all(memory.search(t) == [] for t in UNKNOWN)
    with WorkflowMemory.open(settings.model_copy(update={"cover_weight": None})) as memory:
        assert memory.search(task) == []  # no runs read for serving: the memories' keys alone


def test_the_floor_holds_a_task_to_its_nearest_example_keyed_memory_only() -> None:
    assert above_floor([0.5, 0.2, 0.1], [True, True, False], 0.4) == [True, True, True]
    assert above_floor([0.3, 0.2, 0.1], [True, True, False], 0.4) == [False, False, True]
    assert above_floor([0.3, 0.9], [True, False], 0.4) == [False, True]  # a memory keyed by its own text
    assert above_floor([0.3, 0.2], [True, True], 0.0) == [True, True]  # no floor
    assert above_floor([], [], 0.4) == []


def test_a_task_searched_verbatim_gets_the_workflow_holding_most_of_its_runs_first(
    settings: Settings,
) -> None:
    # Task 0 is solved twice the usual way and once another way: two workflows hold its runs.
    other = run(
        forward(0).task,
        [("contacts.lookup", {"name": "ana"}, None), ("mail.compose", {"to": "ana@corp.test"}, None)],
        True,
        id="fwd-0-compose",
    )
    again = forward(0).model_copy(update={"id": "fwd-0-again"})
    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(8)] + [again, other], settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    with WorkflowMemory.open(settings) as memory:
        first, second = memory.search(forward(0).task, k=2)
    assert first.workflow.actions == ["mail.search", "contacts.lookup", "mail.forward"]
    assert second.workflow.actions == ["contacts.lookup", "mail.compose"]
    # Both hold the task itself (cosine 1); the one with 2 of its 3 runs scores higher.
    assert first.score == pytest.approx(1 - 0.05 / 3) and second.score == pytest.approx(1 - 0.05 * 2 / 3)


def test_outcomes_move_the_ranking() -> None:
    assert rank_factor(UsageStats()) == 1.0
    good, bad = UsageStats(served=10, successes=9, failures=1), UsageStats(served=10, successes=1, failures=9)
    assert rank_factor(good) > 1.0 > rank_factor(bad) >= 0.5


def test_a_run_committed_by_another_process_is_served_at_the_first_search_after_the_check_interval(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index asks the store for its version at most every `check_every` seconds: on the
    index's own clock, held still here (no wall-clock limit), a commit of another process is
    not served before that interval and is served by the first search after it."""
    clock = [1000.0]
    monkeypatch.setattr(served_index, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    store = induced(settings)
    memory = WorkflowMemory.open(settings)
    [before] = memory.search("Cancel my next meeting with zed", k=1)
    assert before.workflow.version == 1 and memory.index.reloads == 1
    script = textwrap.dedent(
        f"""
        from flowmem import Settings, InductionRun, store_from
        store = store_from(Settings(db={settings.db!r}))
        w = store.get_workflow({before.workflow.id!r})
        change = {{"version": 2, "parent_version": 1, "pitfalls": ["look before you cancel"]}}
        v2 = w.model_copy(update=change)
        # As an induction run commits a revision: keyed by the same source tasks.
        import numpy as np
        served, vectors, owners, _ = store.workflow_index()
        keys = {{w.id: vectors[np.asarray(owners) == [x.id for x in served].index(w.id)]}}
        store.commit_run(InductionRun(id="other-process"), [v2], keys=keys)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=600)
    clock[0] += memory.index.check_every / 2  # within the interval: the store is not asked
    [hit] = memory.search("Cancel my next meeting with zed", k=1)
    assert hit.workflow.version == 1 and memory.index.reloads == 1
    clock[0] += memory.index.check_every / 2  # the interval is over: the next search asks
    [hit] = memory.search("Cancel my next meeting with zed", k=1)
    assert hit.workflow.version == 2 and [p.text for p in hit.workflow.pitfalls] == ["look before you cancel"]
    assert memory.index.reloads == 2
    assert store.get_run("other-process").tag == "other-process"
    memory.close()


def test_an_outcome_reloads_the_usage_alone_and_a_status_change_what_it_must(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Usage alone changed (an outcome reported): the next search serves the new stats, read
    from the usage table without reading the workflows table again. A status change that
    takes a version out is served without reading it either (`ServedRows.restatus`); one that
    serves a version again reads it."""
    from flowmem.policy.lifecycle import Transition

    store = induced(settings)
    task = "Forward the latest email about 'roadmap' to zed"
    unbounded = settings.model_copy(update={"relevance_gap": None, "relevance_ratio": None})
    with WorkflowMemory.open(unbounded) as memory:
        first, second = memory.search(task, k=2)
        assert first.workflow.stats == UsageStats() and memory.index.reloads == 1
        reads: list[str] = []
        full = memory.store.served_rows

        def counted(**kw: Any) -> Any:
            reads.append("read")
            return full(**kw)

        monkeypatch.setattr(memory.store, "served_rows", counted)
        key = (first.workflow.id, first.workflow.version)
        memory.store.add_usage({key: UsageStats(served=3, successes=1, failures=2)})
        hit, _ = memory.search(task, k=2)
        assert hit.workflow.id == first.workflow.id and memory.index.reloads == 2 and reads == []
        assert hit.workflow.stats == UsageStats(served=3, successes=1, failures=2)
        assert hit.score == pytest.approx(hit.similarity * rank_factor(hit.workflow.stats))
        assert hit.score < first.score  # more failures than successes: ranked lower
        change = Transition(second.workflow.id, second.workflow.version, "active", "retired", reason="test")
        memory.store.record_transitions([change])
        assert [h.workflow.id for h in memory.search(task, k=2)] == [first.workflow.id]
        assert memory.index.reloads == 3 and reads == []
        back = Transition(second.workflow.id, second.workflow.version, "retired", "active", reason="test")
        memory.store.record_transitions([back])
        again = memory.search(task, k=2)
        assert [h.workflow.id for h in again] == [first.workflow.id, second.workflow.id]
        assert memory.index.reloads == 4 and reads == ["read"]
        assert again[0].workflow.stats == UsageStats(served=3, successes=1, failures=2)
    assert store.usage()[key] == UsageStats(served=3, successes=1, failures=2)


def whole_reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each read of the store's usage table whole (not by ids)."""
    whole: list[int] = []
    read = store.usage

    def counted(**kw: Any) -> Any:
        if kw.get("ids") is None:
            whole.append(1)
        return read(**kw)

    monkeypatch.setattr(store, "usage", counted)
    return whole


def test_its_own_outcomes_are_served_without_reading_the_usage_table(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outcomes this process's store wrote are served from what it wrote (`usage_since`),
    without reading the usage table; another store's commit among them, or alone, is read."""
    store = induced(settings)
    task = "Forward the latest email about 'roadmap' to zed"
    unbounded = settings.model_copy(update={"relevance_gap": None, "relevance_ratio": None})
    with WorkflowMemory.open(unbounded) as memory:
        first, second = memory.search(task, k=2)
        whole = whole_reads(memory.store, monkeypatch)
        one, two = (first.workflow.id, first.workflow.version), (second.workflow.id, second.workflow.version)
        memory.store.add_usage({one: UsageStats(served=2, successes=2)})
        memory.store.add_usage({one: UsageStats(served=1, failures=1), two: UsageStats(served=1, failures=1)})
        hits = {h.workflow.id: h.workflow.stats for h in memory.search(task, k=2)}
        assert hits[one[0]] == UsageStats(served=3, successes=2, failures=1)
        assert hits[two[0]] == UsageStats(served=1, failures=1)
        assert whole == [] and memory.index.reloads == 2
        store.add_usage({two: UsageStats(served=1, successes=1)})  # another store object
        memory.store.add_usage({one: UsageStats(served=1, successes=1)})
        hits = {h.workflow.id: h.workflow.stats for h in memory.search(task, k=2)}
        assert hits[one[0]] == UsageStats(served=4, successes=3, failures=1)
        assert hits[two[0]] == UsageStats(served=2, successes=1, failures=1)
        assert whole == [1]
    assert memory.store.usage_since(0, 0) is None


def test_an_outcome_keeps_the_built_workflows_of_the_versions_it_did_not_change(settings: Settings) -> None:
    """The snapshot an outcome makes (`Snapshot.with_stats`) shares the cache of built
    `Workflow`s rather than copying it: a version whose stats did not change is served as
    built, the changed one is built anew with its stats, and the snapshot before it still
    serves its own."""
    induced(settings)
    task = "Forward the latest email about 'roadmap' to zed"
    unbounded = settings.model_copy(update={"relevance_gap": None, "relevance_ratio": None})
    with WorkflowMemory.open(unbounded) as memory:
        first, second = memory.search(task, k=2)
        old = memory.index._snapshot
        one = (first.workflow.id, first.workflow.version)
        memory.store.add_usage({one: UsageStats(served=1, successes=1)})
        found = {h.workflow.id: h.workflow for h in memory.search(task, k=2)}
        new = memory.index._snapshot
        assert new is not old and new.built is old.built
        assert found[second.workflow.id] is second.workflow
        assert found[first.workflow.id].stats.successes == first.workflow.stats.successes + 1
        at = next(
            i
            for i, (w, v) in enumerate(zip(old.rows.ids, old.rows.versions.tolist(), strict=True))
            if (w, v) == one
        )
        assert old.workflow(at).stats == first.workflow.stats
        assert new.workflow(at).stats == found[first.workflow.id].stats


def test_figures_over_a_whole_read_read_as_one_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    """The figures an outcome of this process's own adds are kept over the usage table's whole
    read (`served._Layered`), not merged into a copy of it, until there are `_LAYERED_MAX`."""
    from flowmem.storage import served

    monkeypatch.setattr(served, "_LAYERED_MAX", 3)
    one, two, three = UsageStats(served=1), UsageStats(served=2), UsageStats(served=3)
    base = {("a", 1): one, ("b", 1): two}
    layered = served._Layered.over(base, {("b", 1): three, ("c", 1): one})
    assert isinstance(layered, served._Layered)
    assert dict(layered) == {("a", 1): one, ("b", 1): three, ("c", 1): one} == layered.flat()
    assert len(layered) == 3 and layered.get(("d", 1)) is None and ("a", 1) in layered
    more = served._Layered.over(layered, {("d", 1): two, ("e", 1): two})
    assert type(more) is dict
    assert more == {("a", 1): one, ("b", 1): three, ("c", 1): one, ("d", 1): two, ("e", 1): two}
    assert base == {("a", 1): one, ("b", 1): two}


def test_its_own_compaction_of_the_usage_table_is_read_as_no_change(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every `USAGE_COMPACT_EVERY` outcomes the store compacts the usage table: commits of its
    own that change no figure, so the search after them reads the table no more than after
    any other of its outcomes (`lance_ops.compaction_only`); a compaction with another
    writer's commit among its versions is not taken for one."""
    from flowmem.storage.lance_ops import compaction_only, lance_dataset
    from flowmem.storage.version_state import USAGE_COMPACT_EVERY

    store = induced(settings)
    task = "Forward the latest email about 'roadmap' to zed"
    with WorkflowMemory.open(settings) as memory:
        (hit,) = memory.search(task, k=1)
        whole = whole_reads(memory.store, monkeypatch)
        key = (hit.workflow.id, hit.workflow.version)
        table = memory.store._usage_table(settings.namespace)
        memory.store.add_usage({key: UsageStats(served=1, successes=1)})
        for i in range(USAGE_COMPACT_EVERY - 1):  # other versions': a file each, then compacted
            memory.store.add_usage({(f"other{i}", 1): UsageStats(served=1, failures=1)})
        assert len(lance_dataset(table.uri).get_fragments()) == 1
        (after,) = memory.search(task, k=1)
        assert after.workflow.stats == UsageStats(served=1, successes=1)
        assert whole == []
    dataset = lance_dataset(table.uri)
    before = dataset.version
    store.add_usage({("another", 1): UsageStats(served=1, failures=1)})  # another writer's commit
    dataset = lance_dataset(table.uri)
    between = dataset.version
    dataset.optimize.compact_files()
    assert dataset.version > between
    assert compaction_only(dataset, between, dataset.version)
    assert not compaction_only(dataset, before, dataset.version)
    assert not compaction_only(dataset, dataset.version, dataset.version)


def test_a_run_read_between_its_commit_and_its_record_is_served_once_recorded(settings: Settings) -> None:
    """`commit_run` appends a run's versions, then records the run. A served index that reads in
    between leaves them out (they may be a crashed run's), and no served table moves when the
    run is recorded: the runs table's version is asked while such rows are left out, and its
    move brings a whole read that serves them."""
    from flowmem.models import InductionRun, now
    from flowmem.storage import rows as stored

    store = store_from(settings)
    store.commit_run(InductionRun(id="r1"), [make_workflow("w1", status="active")])
    index = served_index.ServedIndex(store_from(settings), settings.namespace, check_every=0)
    assert [h.workflow.id for h in index.search("anything", k=5)] == ["w1"]
    made = make_workflow("w2", status="active")
    late = made.model_copy(update={"provenance": made.provenance.model_copy(update={"run_id": "r2"})})
    version = store._append_workflows(settings.namespace, [late])  # the commit, not yet its record
    assert [h.workflow.id for h in index.search("anything", k=5)] == ["w1"]
    reloads = index.reloads
    assert [h.workflow.id for h in index.search("anything", k=5)] == ["w1"] and index.reloads == reloads
    run = InductionRun(id="r2").model_copy(
        update={"finished_at": now(), "tag": "r2", "table_version": version}
    )
    store._runs().add([stored.run_to_row(run)])
    assert sorted(h.workflow.id for h in index.search("anything", k=5)) == ["w1", "w2"]
    assert index._rows.candidates is not None and index._rows.candidates.runs is None


def test_outcomes_keep_the_usage_table_in_few_files(settings: Settings) -> None:
    """Each outcome is a merge commit that adds a file to the usage table; every
    `USAGE_COMPACT_EVERY` of them the store compacts it, so that reading it (every outcome
    does, and every reload after one) does not slow down file by file until `flowmem maintain`."""
    from flowmem.storage.lance_ops import lance_dataset
    from flowmem.storage.version_state import USAGE_COMPACT_EVERY

    store = store_from(settings)
    count = 2 * USAGE_COMPACT_EVERY + 3
    for i in range(count):  # outcomes of distinct versions: each leaves a file of its own
        store.add_usage({(f"w{i}", 1): UsageStats(served=1, successes=1)})
    store.add_usage({("w0", 1): UsageStats(served=1, failures=1)})
    usage = store.usage()
    assert len(usage) == count and usage[("w0", 1)] == UsageStats(served=2, successes=1, failures=1)
    table = store._usage_table(settings.namespace)
    assert len(lance_dataset(table.uri).get_fragments()) <= USAGE_COMPACT_EVERY


def test_usage_is_read_for_some_workflows_or_all(settings: Settings) -> None:
    """`usage(ids=...)` reads those workflows' versions alone (what an outcome adds to); each
    `UsageStats` is shared by the versions with the same figures, and by later reads (a served
    index compares two reads by identity first)."""
    store = store_from(settings)
    one, other = UsageStats(served=2, successes=1), UsageStats(served=1, failures=1)
    store.put_usage({("a", 1): one, ("a", 2): other, ("it's", 1): one, ("b", 1): one})
    assert store.usage(ids=["a", "it's"]) == {("a", 1): one, ("a", 2): other, ("it's", 1): one}
    assert store.usage(ids=[]) == {}
    everything = store.usage()
    assert len(everything) == 4 and everything[("a", 1)] is everything[("b", 1)]
    assert store.usage()[("a", 1)] is everything[("a", 1)]  # and by the next read
    store.add_usage({("it's", 1): UsageStats(served=1, successes=1)})
    assert store.usage()[("it's", 1)] == UsageStats(served=3, successes=2)
    import numpy as np

    rng = np.random.default_rng(3)  # many versions, a few figures: one object per figures
    figures = rng.integers(0, 3, size=(120, 3)).tolist()
    many = {
        (f"w{i % 60}", 1 + i // 60): UsageStats(served=s + f + extra, successes=s, failures=f)
        for i, (s, f, extra) in enumerate(figures)
    }
    store.put_usage(many)
    read = store.usage()
    assert {key: read[key] for key in many} == many and len(read) == 4 + len(many)
    assert len({id(u) for u in read.values()}) == len(set(read.values()))


def test_an_outcome_changes_the_stats_of_its_versions_alone(settings: Settings) -> None:
    """A change of the usage table is applied to the versions whose figures changed (found by
    id and version), the rest kept as read, their built `Workflow`s too; the same stats as a
    whole read of the store."""
    import numpy as np

    from flowmem.policy.lifecycle import DEFAULT_PARAMS
    from flowmem.retrieval.ranking import Snapshot

    store = induced(settings)
    rows = store.served_rows()
    snap = Snapshot.of(rows)
    built = snap.workflows([0, 1])
    key = (rows.ids[0], int(rows.versions[0]))
    won = UsageStats(served=2, successes=2)
    new, changed = rows.with_usage({**rows.usage, key: won, ("not-served", 1): UsageStats(served=1)})
    assert changed == [0] and new.stats[0] == won and new.stats[1:] == rows.stats[1:]
    after = snap.with_stats(new, changed, DEFAULT_PARAMS)
    assert after.factors[0] == rank_factor(won) and np.array_equal(after.factors[1:], snap.factors[1:])
    assert after.workflow(1) is built[1] and after.workflow(0).stats == won  # kept; built anew
    store.put_usage({key: won})
    assert store.served_rows().stats == new.stats  # as a whole read gives them
    back, changed = new.with_usage(rows.usage)  # the figures gone: the row's own stats again
    assert changed == [0] and back.stats == rows.stats


def test_another_process_change_is_reloaded_in_the_background_and_an_own_one_at_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Past `background_from` (here: always), a change another process made is served once its
    reload lands, the snapshot before it served meanwhile; a failed reload is logged and tried
    again; a change made through the index's own store is served at the next search."""
    induced(settings)
    mine, other = store_from(settings), store_from(settings)  # `other`: as another process's
    index = served_index.ServedIndex(mine, settings.namespace, check_every=0.0, background_from=0)
    task = "Cancel my next meeting with zed"
    [hit] = index.search(task, k=1)
    wid = hit.workflow.id
    assert hit.workflow.version == 1 and index.reloads == 1
    revise(other, wid, 2, "look before you cancel")
    full = mine.served_rows

    def away(**kw: Any) -> Any:
        raise OSError("store away")

    monkeypatch.setattr(mine, "served_rows", away)
    assert index.search(task, k=1)[0].workflow.version == 1  # the reload fails behind it
    until(lambda: index._pending is None)
    assert "reloading the served index" in caplog.text and "store away" in caplog.text
    assert index.reloads == 1
    monkeypatch.setattr(mine, "served_rows", full)
    assert index.search(task, k=1)[0].workflow.version == 1  # tried again, behind it
    until(lambda: index.reloads == 2)
    [hit] = index.search(task, k=1)
    assert hit.workflow.version == 2 and [p.text for p in hit.workflow.pitfalls] == ["look before you cancel"]
    revise(mine, wid, 3, "look twice")  # through the index's own store: served at once
    [hit] = index.search(task, k=1)
    assert hit.workflow.version == 3 and index.reloads == 3


def test_another_process_outcome_is_read_behind_the_search(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `background_from` (here: always), another process's outcome is read in a background
    thread like any other change of its (a whole read of the usage table: ~0.3 s at 100k
    versions with usage), the stats before it served meanwhile; the index's own outcome is
    served at the next search, read on the searching thread."""
    induced(settings)
    mine, other = store_from(settings), store_from(settings)  # `other`: as another process's
    index = served_index.ServedIndex(mine, settings.namespace, check_every=0.0, background_from=0)
    task = "Cancel my next meeting with zed"
    [hit] = index.search(task, k=1)
    key = (hit.workflow.id, hit.workflow.version)
    threads: list[str] = []
    read = mine.usage

    def where(**kw: Any) -> Any:
        threads.append(threading.current_thread().name)
        return read(**kw)

    monkeypatch.setattr(mine, "usage", where)
    other.add_usage({key: UsageStats(served=1, successes=1)})
    assert index.search(task, k=1)[0].workflow.stats == hit.workflow.stats  # served meanwhile
    until(lambda: index._pending is None)
    assert threads == ["flowmem-reload"]
    assert index.search(task, k=1)[0].workflow.stats == UsageStats(served=1, successes=1)
    mine.add_usage({key: UsageStats(served=1, failures=1)})  # the index's own: at once
    assert index.search(task, k=1)[0].workflow.stats == UsageStats(served=2, successes=1, failures=1)
    assert threads[1:] and set(threads[1:]) == {threading.current_thread().name}


def test_new_evidence_is_served_once_its_ann_is_built(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The stored runs read anew at an induction run's commit, past `ann_min` stored tasks, are
    served once their ANN is built, those before (with theirs) meanwhile: new ones served at
    once would score every stored run until it is. A build that fails serves them without."""
    induced(settings)
    mine, other = store_from(settings), store_from(settings)  # `other`: as another process's
    index = served_index.ServedIndex(
        mine, settings.namespace, check_every=0.0, cover_weight=0.35, evidence_limit=100, ann_min=4
    )
    gate, failing = threading.Event(), threading.Event()
    built = ann.build_ann

    def gated(vectors: Any, **kw: Any) -> Any:
        assert gate.wait(30)
        if failing.is_set():
            raise MemoryError("no room for it")
        return built(vectors, **kw)

    monkeypatch.setattr(ann_cache, "build_ann", gated)
    gate.set()
    task = "Cancel my next meeting with zed"
    index.search(task, k=1)
    until(lambda: index._evidence.index.ann is not None)
    first = index._evidence
    wid = index.search(task, k=1)[0].workflow.id
    for version, failed in ((2, False), (3, True)):
        gate.clear()
        if failed:
            failing.set()
        store_trajectories(other, [remind(version)], settings.scrub)  # a new stored run, then a commit
        revise(other, wid, version, f"look {version} times")
        assert index.search(task, k=1)[0].workflow.version == version  # the new version served
        before = index._evidence
        assert before.index.ann is not None and remind(version).task not in before.tasks
        gate.set()
        until(lambda: remind(version).task in index._evidence.tasks)  # noqa: B023
        assert (index._evidence.index.ann is None) == failed
    assert first.index.ann is not None and "building an ANN" in caplog.text and "no room" in caplog.text


def test_a_store_that_is_not_local_is_asked_behind_the_search(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On object storage (here: a local store said not to be one), the store is asked for its
    versions in a background thread: a search does not wait on it, a change it finds is served
    once read, a failed ask is logged and asked again; a change through the index's own store
    is served at the next search."""
    induced(settings)
    mine, other = store_from(settings), store_from(settings)  # `other`: as another process's
    index = served_index.ServedIndex(mine, settings.namespace, check_every=0.0)
    task = "Cancel my next meeting with zed"
    [hit] = index.search(task, k=1)  # the first load waits for the store
    wid = hit.workflow.id
    monkeypatch.setattr(mine, "versions_local", lambda: False)
    gate, asked = threading.Event(), mine.served_version

    def held(**kw: Any) -> Any:
        gate.wait(60)  # the network, held
        return asked(**kw)

    monkeypatch.setattr(mine, "served_version", held)
    revise(other, wid, 2, "look before you cancel")
    for _ in range(3):  # served while the one ask is held
        assert index.search(task, k=1)[0].workflow.version == 1
    assert index._pending is not None and index.reloads == 1
    gate.set()
    until(lambda: index.reloads == 2)
    [hit] = index.search(task, k=1)
    assert hit.workflow.version == 2 and [p.text for p in hit.workflow.pitfalls] == ["look before you cancel"]

    def away(**kw: Any) -> Any:
        raise OSError("network away")

    until(lambda: index._pending is None)  # the check the last search started, answered
    monkeypatch.setattr(mine, "served_version", away)
    assert index.search(task, k=1)[0].workflow.version == 2
    until(lambda: index._pending is None)
    assert "asking the store" in caplog.text and "network away" in caplog.text
    monkeypatch.setattr(mine, "served_version", asked)
    revise(mine, wid, 3, "look twice")  # through the index's own store: asked and served at once
    [hit] = index.search(task, k=1)
    assert hit.workflow.version == 3 and index.reloads == 3


@pytest.mark.skipif(not WORKBENCH.exists(), reason="shared WorkBench data not present")
@pytest.mark.xdist_group("workbench")  # shares workbench_ingested, made once
def test_cli_search_on_workbench(tmp_path: Path, workbench_ingested: tuple[Path, int, str]) -> None:
    ingested, code, _ = workbench_ingested  # `flowmem ingest` of WorkBench
    assert code == 0
    shutil.copytree(ingested, tmp_path / "db")
    env = {"FLOWMEM_DB": str(tmp_path / "db")}
    runner = CliRunner()
    assert runner.invoke(app, ["induce"], env=env).exit_code == 0
    result = runner.invoke(
        app, ["search", "forward the latest email about the budget to olga", "--json"], env=env
    )
    hits = json.loads(result.output)
    assert 1 <= len(hits) <= 3 and {"id", "version", "name", "steps", "score"} <= set(hits[0])
    assert "email.forward_email" in [s["action"] for s in hits[0]["steps"]]
    assert hits[0]["score"] >= hits[-1]["score"]


def test_within_gap_keeps_the_memories_close_to_the_first() -> None:
    from flowmem.retrieval.serving import within_gap

    assert within_gap([0.9, 0.8, 0.61, 0.59], 0.3) == 3
    assert within_gap([0.9, 0.8, 0.61, 0.59], None) == 4
    assert within_gap([0.9, 0.2], 0.0) == 1 and within_gap([], 0.3) == 0


def test_within_gap_ratio_keeps_the_memories_scoring_a_share_of_the_first() -> None:
    from flowmem.retrieval.serving import within_gap

    assert within_gap([0.8, 0.61, 0.59], None, 0.75) == 2  # 0.6 is three quarters of 0.8
    assert within_gap([0.4, 0.31, 0.29], 0.3, 0.75) == 2  # the ratio binds where the gap does not
    assert within_gap([0.9, 0.7, 0.59], 0.3, 0.5) == 2  # and the gap where the ratio does not
    scaled = [s * 0.5 for s in (0.8, 0.61, 0.59)]
    assert within_gap(scaled, None, 0.75) == within_gap([0.8, 0.61, 0.59], None, 0.75)  # scale-free
    assert within_gap([-0.1, -0.2], None, 0.75) == 2  # no positive first score: no ratio bound


def test_a_commit_through_the_same_store_is_served_at_once_another_processs_after_check_every(
    settings: Settings,
) -> None:
    from flowmem.agents.served_index import ServedIndex

    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(8)], settings.scrub)
    index = ServedIndex(store, settings.namespace, check_every=3600)
    task = "Forward the latest email about 'roadmap' to zed"
    assert index.search(task) == []
    other = store_from(settings)  # another Store object: as another process would commit
    other.put_workflow(make_workflow("elsewhere"))
    assert index.search(task) == []  # not looked for before check_every
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    hits = index.search(task)
    assert hits and hits[0].workflow.actions == ["mail.search", "contacts.lookup", "mail.forward"]
    assert "elsewhere" in {w.id for w in index.served()}  # the rebuild read the store whole
