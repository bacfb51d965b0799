"""Incremental induction runs: new tasks placed in the stored clusters, only changed clusters
induced, and a refit (with its reason) when the new runs change the clustering materially."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from flowmem.demo import simulate
from flowmem.induction.base import cluster_key
from flowmem.induction.cluster.assign import NearestLabels, material, nearest_labels
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.plan.bounded import ClusterMembers
from flowmem.induction.plan.increment import Memberships, thaw
from flowmem.induction.plan.orchestrate import InductionResult, task_key
from flowmem.induction.plan.runplan import Limits, open_run
from flowmem.jobs.incremental import assign_run, merge_with_current, settings_signature
from flowmem.jobs.induce import RunReport, cluster_input, prepare_run, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import InductionRun, RunState, Trajectory
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import cancel, forward, make_workflow


def _induce(store: Store, settings: Settings, *, force: bool = False) -> RunReport:
    return run_induction(store, settings, RuleInducer(), namespace=settings.namespace, force=force)


def _cluster(placed: Memberships, fitted: Memberships, t: Trajectory) -> int | None:
    """The stable cluster id a run's task is in (None: in none)."""
    key = task_key(t.task)
    for source in (placed, fitted):
        for cid, keys in source.get(t.agent, {}).items():
            if key in keys:
                return cid
    return None


def test_new_runs_join_the_stored_clusters_and_only_theirs_are_induced(
    settings: Settings, store: Store
) -> None:
    store_trajectories(store, simulate(300, seed=0), settings.scrub)
    first = _induce(store, settings)
    assert first.plan.refit == "the first run"
    before = {w.id: w for w in store.list_workflows()}
    new = simulate(4, seed=1)
    store_trajectories(store, new, settings.scrub)

    second = _induce(store, settings)
    plan = second.plan
    assert plan.refit is None and second.summary().refit is None
    assert second.summary().new_trajectories == len(new) and len(plan.fingerprints) == len(
        first.plan.fingerprints
    )
    # Every new run is placed in a stored cluster whose runs are of its own kind of task.
    fitted = first.plan.clusters.memberships
    old = store.list_trajectories(limit=None)
    touched = set()
    for t in new:
        cid = _cluster(plan.placed, fitted, t)
        kinds = Counter(
            r.group
            for r in old
            if r.agent == t.agent and r.id != t.id and _cluster(plan.placed, fitted, r) == cid
        )
        assert kinds.most_common(1)[0][0] == t.group
        touched.add(f"{t.agent}-c{cid}")
    # Only the clusters that gained runs changed; the others were not even read.
    assert {c.key for c in plan.changed} | set(plan.deferred) == touched
    assert all(
        {*c.successes, *c.failures} & {t.id for t in new if t.success is not None} for c in plan.changed
    )
    # The workflows of clusters without new runs are served as they were: no new version.
    after = {w.id: w for w in store.list_workflows()}
    assert after.keys() == before.keys()
    for wid, w in before.items():
        if cluster_key(wid, set(plan.fingerprints)) not in touched:
            assert (after[wid].version, after[wid].content_hash()) == (w.version, w.content_hash())
    assert {v.id for v in second.versions} <= {w.id for w in second.result.workflows}


def test_the_clusters_it_induces_are_built_as_a_refit_builds_them(settings: Settings, store: Store) -> None:
    store_trajectories(store, simulate(300, seed=0), settings.scrub)
    _induce(store, settings)
    store_trajectories(store, simulate(12, seed=1), settings.scrub)
    last = store.list_runs()[-1]
    placed = prepare_run(store, settings, namespace=settings.namespace, min_change=0)
    assert placed.refit is None and len(placed.changed) > 5
    fitted = thaw(last.state.clusters) or {}
    everything = store.list_trajectories(limit=None)  # the order plan_clusters sees them in
    full = LiteralIndex.build(everything, max_share=settings.literal_share)
    for planned in placed.changed:
        assert isinstance(
            planned, ClusterMembers
        )  # placed clusters are their members' ids, read when induced
        c = cluster_input(store, planned)
        index = c.literals
        assert (index.total, index.counts, index.categorical, index.vocabulary) == (
            full.total,
            full.counts,
            full.categorical,
            full.vocabulary,
        )
        members = [
            t for t in everything if t.agent == c.agent and _cluster(placed.placed, fitted, t) == c.cluster_id
        ]
        assert [t.id for t in c.successes] == [t.id for t in members if t.success is True]
        assert [t.id for t in c.failures] == [t.id for t in members if t.success is False]
        assert c.scope == ("task" if c.agent == "orchestrator" else "subtask")


def test_a_few_runs_of_a_big_cluster_wait_until_they_are_worth_inducing(
    settings: Settings, store: Store
) -> None:
    # 40 runs of five forwarding tasks (one subject, i = 0, 6, 12, ...): one cluster.
    store_trajectories(
        store, [forward(6 * i) for i in range(40)] + [cancel(i) for i in range(8)], settings.scrub
    )
    _induce(store, settings)
    [fwd] = [w for w in store.list_workflows() if "mail.forward" in w.actions]
    assert len(fwd.source_trajectory_ids) == 40
    store_trajectories(
        store, [forward(240, skip_lookup=True, success=False)], settings.scrub
    )  # 1 of 40: under 5%
    waiting = _induce(store, settings)
    assert waiting.plan.refit is None and waiting.plan.deferred == (fwd.id,) and not waiting.plan.changed
    assert waiting.versions == [] and waiting.summary().clusters_deferred == 1
    first, recorded = store.list_runs()
    assert recorded.id == waiting.run.id and recorded.counts["new_trajectories"] == 1
    assert recorded.state.fingerprints[fwd.id] == first.state.fingerprints[fwd.id]  # still owed
    store_trajectories(
        store, [forward(i, skip_lookup=True, success=False) for i in (246, 252)], settings.scrub
    )
    now = _induce(store, settings)
    [cluster] = now.plan.changed
    assert cluster.key == fwd.id and len(cluster.failures) == 3 and not now.plan.deferred
    [v2] = now.versions
    assert (v2.id, v2.version) == (fwd.id, 2) and v2.pitfalls  # the failures taught a pitfall


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("many", "tasks new since the clusters were fitted"),
        ("agent", "a new agent, triage_agent"),
        ("settings", "the clustering settings changed"),
        ("force", "every cluster is induced again"),
    ],
)
def test_a_material_change_refits_and_says_why(
    settings: Settings, store: Store, change: str, reason: str
) -> None:
    store_trajectories(store, [forward(i) for i in range(12)] + [cancel(i) for i in range(6)], settings.scrub)
    _induce(store, settings)
    force = False
    if change == "many":
        store_trajectories(
            store,
            [
                cancel(i).model_copy(update={"id": f"c{i}", "task": f"Cancel the standup on day {i}"})
                for i in range(4)
            ],
            settings.scrub,
        )
    elif change == "agent":
        store_trajectories(
            store,
            [forward(i).model_copy(update={"id": f"t{i}", "agent": "triage_agent"}) for i in range(3)],
            settings.scrub,
        )
    elif change == "settings":
        settings = settings.model_copy(update={"min_cluster_size": 4})
        store_trajectories(store, [forward(12)], settings.scrub)
    else:
        force = True
    report = _induce(store, settings, force=force)
    assert report.plan.refit is not None and reason in report.plan.refit
    assert report.summary().refit == report.plan.refit
    assert report.run.state.refit == report.plan.refit


def test_a_store_whose_last_run_kept_no_placements_is_refit(settings: Settings, store: Store) -> None:
    store_trajectories(store, [forward(i) for i in range(6)], settings.scrub)
    ns = settings.namespace
    last = InductionRun(id="r1", namespace=ns, state=RunState.from_stored({"clusters": {}}))
    opening = open_run(InductionRun(id="r2", namespace=ns), last, total=6, reinduce=set(), force=False)
    limits = Limits(signature=settings_signature(settings), min_tasks=settings.min_cluster_size)
    why = assign_run(store, settings, opening, {}, limits=limits)
    assert why == "the last run kept no clustering to place new tasks in"


def test_a_draft_like_a_bigger_clusters_workflow_joins_it() -> None:
    big = make_workflow("agent-c0", cluster_id=0, source_trajectory_ids=["a", "b", "c"])
    big = big.model_copy(
        update={"provenance": big.provenance.model_copy(update={"run_id": "r1"}), "status": "active"}
    )
    other = make_workflow("agent-c2", steps=3, cluster_id=2, source_trajectory_ids=["x"])
    other = other.model_copy(update={"provenance": other.provenance.model_copy(update={"run_id": "r1"})})
    draft = make_workflow("agent-c1", cluster_id=1, source_trajectory_ids=["d"])
    result = InductionResult(workflows=[draft], keys={"agent-c1": {"task d": 1}})
    task_of = {"a": "task a", "b": "task a", "c": "task c", "d": "task d", "x": "task x"}
    result, carried = merge_with_current(
        result,
        {"agent-c0": big, "agent-c2": other},
        keys={"agent-c0", "agent-c1", "agent-c2"},
        induced={"agent-c1"},
        task_of=task_of,
    )
    assert carried == {"agent-c0", "agent-c2"}
    merged = {w.id: w for w in result.workflows}
    assert merged.keys() == {"agent-c0", "agent-c2"}  # the draft joined the bigger cluster's workflow
    assert merged["agent-c0"].source_trajectory_ids == ["a", "b", "c", "d"]
    assert merged["agent-c0"].status == "candidate" and merged["agent-c0"].version == 1
    assert result.keys["agent-c0"] == {"task a": 2, "task c": 1, "task d": 1}


def test_nearest_labels_and_material_change() -> None:
    known = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]], dtype=np.float32)
    assert nearest_labels(known, [5, 6, 7], np.array([[0.9, 0.1], [0.1, 2.0], [1.0, 1.1]])) == [5, 6, 7]
    assert nearest_labels(np.zeros((0, 2)), [], np.ones((2, 2))) == [-1, -1]
    assert material((10, 0), (11, 0))  # under 20 runs any new run counts
    assert not material((100, 0), (104, 0)) and material((100, 0), (105, 0))
    assert material((30, 10), (30, 10))  # same counts, other runs: always
    assert material((1, 0), (1, 0), min_change=0.5)


def test_nearest_labels_from_parts_in_any_order_are_those_found_at_once() -> None:
    rng = np.random.default_rng(0)
    known = rng.normal(size=(60, 8)).astype(np.float32)
    known[[17, 41]] = known[5]  # equal cosines: the first of the known list wins
    labels = rng.integers(0, 6, size=60).tolist()
    labels[5], labels[17], labels[41] = 7, 8, 9
    new = np.vstack([rng.normal(size=(25, 8)), known[[41, 5]], np.zeros((1, 8))]).astype(np.float32)
    whole = nearest_labels(known, labels, new)
    assert whole[25:27] == [7, 7]
    parts = NearestLabels(new, labels, chunk=4)
    for ranks in np.array_split(rng.permutation(60), 7):  # parts in another order
        parts.add(ranks, known[ranks])
    assert parts.labels() == whole
    assert NearestLabels(new, []).labels() == [-1] * len(new)


def test_prepare_run_after_a_rollback_starts_from_the_run_before(settings: Settings, store: Store) -> None:
    store_trajectories(store, [forward(i) for i in range(12)] + [cancel(i) for i in range(6)], settings.scrub)
    first = _induce(store, settings)
    store_trajectories(
        store, [forward(i, skip_lookup=True, success=False) for i in range(30, 33)], settings.scrub
    )  # known tasks
    second = _induce(store, settings)
    assert second.plan.refit is None and second.versions
    store.rollback(second.run.id)
    plan = prepare_run(store, settings, namespace=settings.namespace)
    assert plan.last is not None and plan.last.id == first.run.id
    assert plan.refit is None and [c.key for c in plan.changed] == [second.plan.changed[0].key]
