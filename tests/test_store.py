from __future__ import annotations

import pytest

from flowmem.jobs.factories import store_from
from flowmem.models import InductionRun, PriorOutcome, Trajectory, WorkflowRef
from flowmem.retrieval.embed import HashingEmbedder
from flowmem.settings import Settings
from flowmem.storage import NotFoundError, Store, StoreError, VersionConflictError
from tests.factories import make_workflow


def traj(i: int, namespace: str = "default", **kw: object) -> Trajectory:
    return Trajectory.model_validate(
        {
            "id": f"it's-{i}",
            "task": f"task number {i}",
            "namespace": namespace,
            "steps": [{"action": "a", "args": {"n": i}}, {"action": "b", "observation": "ok"}],
            "success": i % 2 == 0,
            **kw,
        }
    )


def test_trajectories_are_idempotent_by_namespace_and_id(store: Store) -> None:
    assert len(store.insert_trajectories([traj(i) for i in range(5)])) == 5
    assert len(store.insert_trajectories([traj(i) for i in range(8)] + [traj(7)])) == 3
    assert len(store.insert_trajectories([traj(1, namespace="other")])) == 1
    assert store.count_trajectories() == 8
    assert store.count_trajectories(namespace="other") == 1
    got = store.get_trajectory("it's-3")
    assert got == traj(3).model_copy(update={"created_at": got.created_at})
    assert got.steps[0].args == {"n": 3}
    with pytest.raises(NotFoundError):
        store.get_trajectory("it's-3", namespace="nobody")


def test_list_is_newest_first_and_filters_by_agent(store: Store) -> None:
    store.insert_trajectories([traj(i, agent="x" if i < 3 else "y") for i in range(6)])
    listed = store.list_trajectories(limit=4)
    assert len(listed) == 4
    assert [t.created_at for t in listed] == sorted((t.created_at for t in listed), reverse=True)
    assert {t.id for t in store.list_trajectories(agent="x", limit=None)} == {"it's-0", "it's-1", "it's-2"}
    assert [t.id for t in store.iter_trajectories()][0] == "it's-0"


def test_workflow_history_v1_v2_v3_with_parents_and_diff(store: Store) -> None:
    for v in (1, 2, 3):
        store.put_workflow(make_workflow(version=v, steps=v + 1))
    history = store.history("forward_latest")
    assert [(w.version, w.parent_version) for w in history] == [(1, None), (2, 1), (3, 2)]
    assert store.get_workflow("forward_latest").version == 3
    assert store.get_workflow("forward_latest", 1).actions == ["mail.search", "contacts.lookup"]
    d = store.diff("forward_latest", 1, 3)
    assert [c.op for c in d.steps] == ["equal", "equal", "added", "added"]
    assert [c.new.action for c in d.steps if c.op == "added" and c.new] == ["mail.forward", "mail.read"]
    assert store.diff("forward_latest", 2, 2).unchanged


def test_changed_step_is_aligned_with_the_changed_args() -> None:
    from flowmem.induction.render.diff import diff_workflows
    from flowmem.models import WorkflowStep

    a = make_workflow(steps=3)
    steps = list(a.steps)
    steps[1] = WorkflowStep(action="contacts.lookup", args={"name": "{recipient}", "exact": True})
    b = a.model_copy(update={"version": 2, "parent_version": 1, "steps": steps, "pitfalls": ["x"]})
    d = diff_workflows(a, b)
    assert [c.op for c in d.steps] == ["equal", "changed", "equal"]
    assert d.steps[1].changed_args == ["exact"]
    assert [f.field for f in d.fields] == ["pitfalls"]


def test_versions_are_never_overwritten_or_skipped(store: Store) -> None:
    store.put_workflow(make_workflow(version=1))
    with pytest.raises(VersionConflictError, match="exists"):
        store.put_workflow(make_workflow(version=1, steps=3))
    with pytest.raises(VersionConflictError, match="next version is v2"):
        store.put_workflow(make_workflow(version=3))
    with pytest.raises(VersionConflictError, match="next version is v1"):
        store.put_workflow(make_workflow("new", version=2))
    assert [w.version for w in store.history("forward_latest")] == [1]


def test_commit_run_tags_and_rollback_restores_while_keeping_history(store: Store) -> None:
    run1 = store.commit_run(InductionRun(id="run-1"), [make_workflow(version=1), make_workflow("other", 1)])
    run2 = store.commit_run(InductionRun(id="run-2"), [make_workflow(version=2, steps=3)])
    run3 = store.commit_run(InductionRun(id="run-3"), [make_workflow(version=3, steps=4)])
    assert (run1.tag, run1.counts["versions_created"]) == ("run-1", 2)
    assert run2.base_version == run1.table_version and run3.base_version == run2.table_version
    assert store.get_workflow("forward_latest").version == 3

    rb = store.rollback("run-2", note="bad abstraction")
    # The table is back where it was before run-2 ...
    assert [w.version for w in store.history("forward_latest")] == [1]
    assert {w.id for w in store.list_workflows()} == {"forward_latest", "other"}
    # ... as a new table version, and what it undid is still reachable by its run tags.
    assert rb.table_version is not None and run3.table_version is not None
    assert rb.kind == "rollback" and rb.rolled_back_run == "run-2" and rb.table_version > run3.table_version
    assert [w.version for w in store.list_workflows(at="run-3") if w.id == "forward_latest"] == [3]
    assert [w.version for w in store.list_workflows(at="run-2") if w.id == "forward_latest"] == [2]
    versions = store.table_versions()
    assert [v.tags for v in versions if v.tags] == [["run-1"], ["run-2"], ["run-3"], [rb.id]]
    assert [r.id for r in store.list_runs()] == ["run-1", "run-2", "run-3", rb.id]
    with pytest.raises(StoreError, match="already rolled back"):
        store.rollback("run-2")
    # After a rollback, induction continues from the restored state.
    store.put_workflow(make_workflow(version=2, steps=4))
    assert [w.version for w in store.history("forward_latest")] == [1, 2]


def test_rollback_of_one_namespace_leaves_another_untouched(store: Store) -> None:
    store.commit_run(InductionRun(id="a1", namespace="a"), [make_workflow(namespace="a")])
    store.commit_run(InductionRun(id="b1", namespace="b"), [make_workflow(namespace="b")])
    store.rollback("a1", namespace="a")
    assert store.list_workflows(namespace="a") == []
    assert [w.namespace for w in store.list_workflows(namespace="b")] == ["b"]
    with pytest.raises(NotFoundError):
        store.rollback("b1", namespace="a")
    with pytest.raises(StoreError, match="namespace"):
        store.commit_run(InductionRun(id="a2", namespace="a"), [make_workflow(namespace="b")])


def test_unknown_lookups_raise_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        store.get_workflow("nope")
    store.put_workflow(make_workflow())
    with pytest.raises(NotFoundError, match="no version 9"):
        store.get_workflow("forward_latest", 9)
    with pytest.raises(NotFoundError):
        store.list_workflows(at="no-such-tag")


def test_a_store_refuses_vectors_of_another_embedder(settings: Settings) -> None:
    store_from(settings).insert_trajectories([traj(1)])
    other = Store(settings, embedder=HashingEmbedder(dim=64))
    with pytest.raises(StoreError, match="embedder"):
        other.count_trajectories()


def test_filters_quote_ids_safely(store: Store) -> None:
    store.insert_trajectories([traj(1, id="x' OR '1'='1")])
    store.insert_trajectories([traj(2)])
    assert store.get_trajectory("x' OR '1'='1").task == "task number 1"
    with pytest.raises(StoreError, match="control"):
        store.get_trajectory("a\x00b")


def test_an_interrupted_commit_is_invisible_then_repaired(store: Store) -> None:
    store.commit_run(InductionRun(id="ok"), [make_workflow(version=1)])
    # What a process killed between writing its versions and recording its run leaves behind:
    torn = make_workflow(version=2, steps=3)
    torn = torn.model_copy(update={"provenance": torn.provenance.model_copy(update={"run_id": "killed"})})
    version = store._append_workflows("default", [torn])
    store._workflows("default").tags.create("killed", version)
    assert [w.version for w in store.history("forward_latest")] == [1]  # readers never see it
    assert store.get_workflow("forward_latest").version == 1
    # The next commit drops it first, so version 2 is free again.
    store.commit_run(InductionRun(id="next"), [make_workflow(version=2, steps=4)])
    assert [(w.version, len(w.steps)) for w in store.history("forward_latest")] == [(1, 2), (2, 4)]
    assert {t for v in store.table_versions() for t in v.tags} == {"ok", "next"}


def test_set_outcome_returns_what_the_run_had_and_refuses_an_unknown_run(store: Store) -> None:
    served = [WorkflowRef(id="forward_latest", version=2)]
    store.insert_trajectories([traj(1, workflows_used=served), traj(2, namespace="other")])
    before = store.set_outcome("it's-1", success=True, feedback="confirmed")
    assert before == PriorOutcome(success=False, workflows_used=served)
    again = store.set_outcome("it's-1", success=False)
    assert again == PriorOutcome(success=True, workflows_used=served)
    run = store.get_trajectory("it's-1")
    assert (run.success, run.feedback, run.steps[0].args) == (False, "confirmed", {"n": 1})  # steps kept
    with pytest.raises(NotFoundError):
        store.set_outcome("it's-2", success=True)  # another namespace's run
    with pytest.raises(NotFoundError):
        store.set_outcome("nobody", success=True)
    assert store.get_trajectory("it's-2", namespace="other").success is True  # untouched
