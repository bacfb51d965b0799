from __future__ import annotations

from flowmem.induction.rule import RuleInducer
from flowmem.runner import induce_namespace, previous_clusters
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.test_induction import cancel, forward


def test_runs_version_only_what_changed_and_keep_cluster_ids(settings: Settings, store: Store) -> None:
    store.add_trajectories([forward(i) for i in range(8)] + [cancel(i) for i in range(8)])
    first = induce_namespace(store, settings, RuleInducer())
    assert first.summary()["versions_created"] == 2 and first.run.tag == first.run.id
    ids = {tuple(w.actions): w.id for w in store.list_workflows()}

    again = induce_namespace(store, settings, RuleInducer())
    assert again.summary()["versions_created"] == 0  # nothing new: nothing stored

    # Failed runs join the forwarding cluster: only that workflow gets a new version (with
    # its pitfalls), under the same id although the clusters were refit.
    store.add_trajectories([forward(i, skip_lookup=True, success=False) for i in range(8, 14)])
    third = induce_namespace(store, settings, RuleInducer())
    [changed] = third.versions
    assert changed.id == ids[("mail.search", "contacts.lookup", "mail.forward")]
    assert (changed.version, changed.parent_version) == (2, 1) and changed.pitfalls
    assert {tuple(w.actions): w.id for w in store.list_workflows()} == ids
    assert [r.id for r in store.list_runs()] == [first.run.id, again.run.id, third.run.id]


def test_previous_clusters_come_from_the_current_workflows(settings: Settings, store: Store) -> None:
    runs = [forward(i) for i in range(6)]
    store.add_trajectories(runs)
    induce_namespace(store, settings, RuleInducer())
    [w] = store.list_workflows()
    assert previous_clusters([w], runs) == {"agent": {w.cluster_id: {t.task for t in runs}}}
