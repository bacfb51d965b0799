from __future__ import annotations

from flowmem.demo import simulate
from flowmem.induction.cluster.cluster import cluster_tasks
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.plan.orchestrate import task_key
from flowmem.induction.plan.runplan import previous_clusters
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import cancel, forward


def test_runs_version_only_what_changed_and_keep_cluster_ids(settings: Settings, store: Store) -> None:
    store_trajectories(store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub)
    first = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert first.summary().versions_created == 2 and first.run.tag == first.run.id
    ids = {tuple(w.actions): w.id for w in store.list_workflows()}

    again = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert again.summary().versions_created == 0 and again.summary().skipped  # nothing new

    # Failed runs of forwarding tasks join that cluster: only it is re-induced, and only its
    # workflow gets a new version (with pitfalls), under the same id though clusters were refit.
    store_trajectories(store, [forward(i, skip_lookup=True, success=False) for i in range(6)], settings.scrub)
    third = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert third.summary().clusters_changed == 1 and third.summary().new_trajectories == 6
    [changed] = third.versions
    assert changed.id == ids[("mail.search", "contacts.lookup", "mail.forward")]
    assert (changed.version, changed.parent_version) == (2, 1) and changed.pitfalls
    assert {tuple(w.actions): w.id for w in store.list_workflows()} == ids
    assert [r.id for r in store.list_runs()] == [first.run.id, third.run.id]
    forced = run_induction(store, settings, RuleInducer(), namespace=settings.namespace, force=True)
    assert forced.summary().clusters_changed == 2 and forced.versions == []


def test_previous_clusters_come_from_the_current_workflows(settings: Settings, store: Store) -> None:
    runs = [forward(i) for i in range(6)]
    store_trajectories(store, runs, settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    [w] = store.list_workflows()
    assert previous_clusters([w], runs) == {"agent": {w.cluster_id: {task_key(t.task) for t in runs}}}


def test_a_small_agent_whose_tasks_share_one_term_induces_without_error(settings: Settings) -> None:
    # Release 0.1.0 crashed here: the orchestrator's few tasks shared a single term, and SVD
    # needs two ("Found array with 1 feature(s)").
    store = store_from(settings)
    store_trajectories(store, simulate(14, seed=4, skill=0.6), settings.scrub)
    report = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert report.versions and not report.result.failed
    # No term shared: nothing to split by, so one cluster (`cluster_tasks`), never all noise.
    assert cluster_tasks(["a b", "c d", "e f"]).labels.tolist() == [0, 0, 0]
