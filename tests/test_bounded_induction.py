"""A full induction run in bounded memory: the namespace read in batches of columns, each
agent's clusters fitted on a bounded sample of its task texts, every other run placed with
that fit, and each cluster's runs read by id when it is induced (`induction.plan.bounded`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.pitfalls.contrast import SERVED
from flowmem.induction.plan.bounded import ClusterMembers
from flowmem.induction.plan.orchestrate import task_key
from flowmem.jobs import induce as induce_job
from flowmem.jobs.induce import cluster_input, prepare_run, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory
from flowmem.settings import Settings
from flowmem.storage import Store, scans
from tests.inmemory import induce_drafts, plan_clusters

RUNS = simulate(250, seed=3)
"""413 runs of five agents, 50 to 103 distinct task texts each."""


def _stored(store: Store, settings: Settings, runs: list[Trajectory] = RUNS) -> None:
    store_trajectories(store, runs, settings.scrub)


def _reads(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Record each read of whole trajectories from now on: (what read, trajectories built)."""
    calls: list[tuple[str, int]] = []

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def spied(*args: Any, **kwargs: Any) -> Any:
            found = method(*args, **kwargs)
            calls.append((name, len(found)))
            return found

        return spied

    for name in ("get_trajectories", "list_trajectories"):
        monkeypatch.setattr(store, name, wrap(name, getattr(store, name)))
    monkeypatch.setattr(induce_job, "trajectories_by_id", wrap("by_id", scans.trajectories_by_id))
    monkeypatch.setattr(induce_job, "spilled", wrap("spilled", scans.spilled))  # a group of one pass
    return calls


def _shape(c: Any) -> tuple[Any, ...]:
    return (c.key, c.scope, c.kind, [t.id for t in c.successes], [t.id for t in c.failures])


def _content(w: Any) -> tuple[Any, ...]:
    return (w.id, w.name, w.kind, w.steps, w.pitfalls, w.source_trajectory_ids)


def test_a_sample_that_covers_the_namespace_gives_todays_clusters_and_workflows(
    settings: Settings, store: Store
) -> None:
    _stored(store, settings)
    everything = store.list_trajectories(limit=None)
    kw: dict[str, Any] = {"params": settings.cluster_params, "literal_share": settings.literal_share}
    today = plan_clusters(everything, subroutines=settings.subroutines, **kw)
    assert any(c.kind == "subroutine" for c in today.clusters)  # sub-routines are compared too

    plan = prepare_run(store, settings, namespace=settings.namespace)
    assert all(isinstance(c, ClusterMembers) for c in plan.changed)  # ids, read when induced
    loaded = [cluster_input(store, c) for c in plan.changed]
    assert [_shape(c) for c in loaded] == [_shape(c) for c in today.clusters]
    assert plan.clusters.memberships == today.memberships and plan.placed == today.placed
    assert plan.fingerprints == today.fingerprints()
    index, before = loaded[0].literals, today.clusters[0].literals
    assert (index.total, index.counts, index.vocabulary, index.categorical) == (
        before.total,
        before.counts,
        before.vocabulary,
        before.categorical,
    )

    drafts = induce_drafts(
        everything, RuleInducer(), subroutines=settings.subroutines, embedder=store.embedder, **kw
    )
    report = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert sorted(map(_content, report.versions)) == sorted(map(_content, drafts.workflows))


def test_past_the_sample_every_run_is_placed_and_each_cluster_is_read_by_id(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings.model_copy(update={"cluster_sample": 30})
    monkeypatch.setattr(scans, "READ_CHUNK", 40)  # clusters read together up to 40 runs
    _stored(store, settings)
    reads = _reads(store, monkeypatch)
    plan = prepare_run(store, settings, namespace=settings.namespace)
    assert not reads  # planning reads columns only
    texts = {a: {task_key(t.task) for t in RUNS if t.agent == a} for a in {t.agent for t in RUNS}}
    for agent, keys in texts.items():
        assert len(plan.clusters.clusterings[agent].texts) == min(30, len(keys))  # fitted on the sample
        fitted = set().union(*plan.clusters.memberships[agent].values())
        placed = set().union(*plan.placed.get(agent, {}).values())
        assert fitted | placed == keys and not fitted & placed  # every text in one cluster
    tasks = [c for c in plan.changed if c.kind == "task"]
    members = [i for c in tasks for i in (*c.successes, *c.failures)]
    assert sorted(members) == sorted(t.id for t in RUNS if t.success is not None)  # every run, once
    assert plan.fit is not None and plan.fit.texts == sum(map(len, texts.values()))
    big = max(tasks, key=lambda c: len(c.successes) + len(c.failures))
    assert len(big.successes) + len(big.failures) > 30 and plan.sizes[big.key] == (
        len(big.successes),
        len(big.failures),
    )
    given = cluster_input(store, big)  # induced from a sample of 30 of its runs, in their order
    chosen = [t.id for t in given.successes] + [t.id for t in given.failures]
    assert len(chosen) == 30 and set(chosen) <= {*big.successes, *big.failures}
    assert [i for i in big.successes if i in set(chosen)] == [t.id for t in given.successes]

    reads.clear()
    report = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    # Every cluster read: in one pass over the namespace, then a group at a time (`scans.one_pass`).
    assert report.versions and reads and all(name == "spilled" for name, _ in reads)
    # A group of clusters, or one larger: its sample of 30 and a contrast of 30 at most.
    assert max(n for _, n in reads) <= 2 * 30
    to_read = {i for c in plan.changed if isinstance(c, ClusterMembers) for i in c.runs()}
    # Each run read once or twice as a member, and once more for each other cluster that it is
    # served to (k - 1 at most) or whose failures it joins (`induction.pitfalls.contrast`).
    assert len(to_read) <= sum(n for _, n in reads) < (2 + SERVED) * len(to_read)

    more = simulate(3, seed=4)  # a few new runs join the fitted clusters: no refit
    _stored(store, settings, more)
    again = prepare_run(store, settings, namespace=settings.namespace)
    assert again.refit is None and again.new_trajectories == len(more)


def test_the_full_read_is_batched_and_never_builds_every_trajectory(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stored(store, settings)
    batches: list[int] = []
    batched = scans.trajectory_batches

    def small(store: Store, columns: Any, *, namespace: str, batch_size: int = 0) -> Iterator[dict[str, Any]]:
        for batch in batched(store, columns, namespace=namespace, batch_size=64):
            batches.append(len(batch["id"]))
            assert "vector" not in batch
            yield batch

    monkeypatch.setattr(induce_job, "trajectory_batches", small)
    monkeypatch.setattr(scans, "READ_CHUNK", 40)
    reads = _reads(store, monkeypatch)
    report = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert report.versions and reads
    assert max(batches) == 64 and sum(batches) == len(RUNS)
    assert all(name == "spilled" for name, _ in reads)  # one pass, then a group at a time
    # Never the namespace: a group of clusters, or one larger with its contrast
    # (`induction.pitfalls.contrast`).
    assert max(n for _, n in reads) < len(RUNS) / 2
