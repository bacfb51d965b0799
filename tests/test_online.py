"""The online loop's learning: outcomes move versions between candidate, active, deprecated."""

from __future__ import annotations

import time

from flowmem.agents import WorkflowMemory
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import prepare_run
from flowmem.jobs.ingest import store_trajectories
from flowmem.jobs.learn import learn
from flowmem.models import InductionRun, Trajectory, UsageStats, WorkflowRef
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import forward, make_workflow

TASK = "Forward the latest email about 'Q3 numbers' to olga"


def outcomes(store: Store, version: int, results: list[bool], *, tag: str) -> None:
    used = [WorkflowRef(id="agent-c0", version=version)]
    runs = [
        forward(i).model_copy(update={"id": f"{tag}{i}", "workflows_used": used, "success": ok})
        for i, ok in enumerate(results)
    ]
    store_trajectories(store, runs, store.settings.scrub)


def test_candidate_promoted_then_superseded_and_every_transition_recorded(settings: Settings) -> None:
    store = store_from(settings)
    store.commit_run(InductionRun(id="r1"), [make_workflow("agent-c0", cluster_id=0)])
    assert store.get_workflow("agent-c0").status == "candidate"
    outcomes(store, 1, [True] * 7 + [False], tag="a")
    first = learn(store, namespace=settings.namespace)
    assert [(t.version, t.old, t.new) for t in first.transitions] == [(1, "candidate", "active")]

    store.commit_run(InductionRun(id="r2"), [make_workflow("agent-c0", 2, steps=3, cluster_id=0)])
    with WorkflowMemory.open(settings) as memory:
        served = {memory.search(f"{TASK} #{i}", k=1)[0].workflow.version for i in range(60)}
        assert served == {1, 2}  # the candidate is on trial for a share of the requests
        outcomes(store, 2, [True] * 9, tag="b")
        second = learn(store, namespace=settings.namespace)
        time.sleep(0.3)  # the agent's index asks the store again after 0.25 s
        assert sorted((t.version, t.new) for t in second.transitions) == [
            (1, "deprecated"),
            (2, "active"),
        ]
        assert {memory.search(f"{TASK} #{i}", k=1)[0].workflow.version for i in range(20)} == {2}
    assert [(w.version, w.status) for w in store.history("agent-c0")] == [(1, "deprecated"), (2, "active")]
    log = store.transitions(workflow_id="agent-c0")
    assert [(r.version, r.new, r.cause) for r in log] == [
        (1, "active", "promoted"),
        (1, "deprecated", "superseded"),
        (2, "active", "promoted"),
    ]
    assert all(r.reason for r in log) and learn(store, namespace=settings.namespace).transitions == []


def test_failing_version_is_deprecated_not_served_and_queued_for_reinduction(settings: Settings) -> None:
    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(6)], settings.scrub)
    from flowmem.induction.inducers.rule import RuleInducer
    from flowmem.jobs.induce import run_induction

    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    [w] = store.list_workflows()
    used = [WorkflowRef(id=w.id, version=w.version)]
    failed = [
        Trajectory.model_validate(
            {
                **forward(i).model_dump(),
                "id": f"f{i}",
                "success": False,
                "workflows_used": [u.model_dump() for u in used],
            }
        )
        for i in range(8)
    ]
    store_trajectories(store, failed, settings.scrub)
    learnt = learn(store, namespace=settings.namespace)
    assert [t.new for t in learnt.transitions] == ["deprecated"] and learnt.reinduce == [w.id]
    assert store.get_workflow(w.id).status == "deprecated"
    with WorkflowMemory.open(settings) as memory:
        assert memory.search(TASK) == []  # a deprecated version is not served
    plan = prepare_run(store, settings, namespace=settings.namespace)
    assert [c.cluster_id for c in plan.changed] == [w.cluster_id]  # re-induced, failures included
    assert len(plan.changed[0].failures) == 8 and plan.revive == {w.id}
    # Its failures teach nothing new (they leave the workflow nowhere): the draft says the
    # same, yet a new version comes back on trial rather than leaving the cluster unserved.
    report = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    [v2] = report.versions
    assert (v2.id, v2.version, v2.parent_version, v2.status) == (w.id, 2, 1, "candidate")
    assert v2.content_hash() == w.content_hash()
    with WorkflowMemory.open(settings) as memory:
        assert [h.workflow.version for h in memory.search(TASK)] == [2]
    again = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert again.plan.skipped and not again.versions  # revived once, not on every run


def test_finish_and_report_outcome_move_the_stats_at_once(settings: Settings) -> None:
    store = store_from(settings)
    store.commit_run(InductionRun(id="r1"), [make_workflow("agent-c0", cluster_id=0)])
    key = ("agent-c0", 1)
    with WorkflowMemory.open(settings) as memory:
        for i, ok in enumerate([True, True, False]):
            with memory.record(f"{TASK} #{i}", id=f"run{i}") as run:
                assert memory.context(run.task)
                run.finish(success=ok)
        memory.flush()
        assert store.usage()[key] == UsageStats(served=3, successes=2, failures=1)
        before = memory.search(TASK, k=1)[0].score
        memory.report_outcome("run2", success=True, feedback="it did work")
        assert store.usage()[key] == UsageStats(served=3, successes=3, failures=0)
        memory.report_outcome("run2", success=True)  # no change: counted once
        assert store.usage()[key] == UsageStats(served=3, successes=3, failures=0)
        time.sleep(0.3)  # the agent's index asks the store again after 0.25 s
        assert memory.search(TASK, k=1)[0].score > before  # the ranking moved without a learn run
    # The learn flow's exact recount agrees.
    learn(store, namespace=settings.namespace)
    assert store.usage()[key] == UsageStats(served=3, successes=3, failures=0)
