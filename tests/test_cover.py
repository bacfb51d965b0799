"""Serving chosen with the nearest past runs when a task recurs (`flowmem.retrieval.cover`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from flowmem.agents import WorkflowMemory
from flowmem.agents.served_index import ServedIndex
from flowmem.jobs.evaluate import retrieve
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory
from flowmem.retrieval.cover import Evidence, cover, nearest, task_template
from flowmem.settings import Settings
from flowmem.storage.evidence import newest_successes
from tests.factories import induced, run

SEARCH, LOOKUP, FORWARD = "mail.search", "contacts.lookup", "mail.forward"
FIND, CANCEL = "calendar.find_events", "calendar.cancel_event"


def test_cover_adds_what_the_runs_did_and_stops_when_nothing_helps() -> None:
    forward, cancel, noise = [SEARCH, LOOKUP, FORWARD], [FIND, CANCEL], ["tasks.create"]
    both = [SEARCH, LOOKUP, FORWARD, FIND, CANCEL]
    assert cover([forward, noise, cancel], [both], k=3) == [0, 2]  # the noise adds nothing
    assert cover([forward, noise, cancel], [both], k=1) == [0]
    assert cover([noise, forward, cancel], [both], k=3, keep=[0]) == [0, 1, 2]
    # Ties go to the better-ranked; no evidence: only what is kept.
    assert cover([cancel, cancel], [both], k=3) == [0]
    assert cover([forward], [], k=3, keep=[0]) == [0]
    # Precision counts: a memory holding the run's steps among many others loses to an exact one.
    padded = [SEARCH, "x.a", "x.b", "x.c", LOOKUP, "x.d", FORWARD]
    assert cover([padded, forward], [forward], k=1) == [1]


def test_evidence_only_for_a_task_seen_before() -> None:
    assert task_template("Call  Olga on Monday", {"call", "on"}) == "call _ on _"
    vectors = np.eye(4, dtype=np.float32)
    tasks = ["call olga on monday", "call kofi on friday", "email amir", "email lena"]
    evidence = Evidence(tasks, [["x"], ["y"], ["z"], ["w"]], vectors, share=0.5)
    # Words of at least half the distinct tasks are the task's own; the rest are its values.
    assert evidence.words == {"call", "on", "email"}
    query = np.array([1.0, 0.5, 0.2, 0.0], dtype=np.float32)
    assert nearest(vectors @ query) == [0, 1, 2]
    # The same task with other values recurs: its nearest runs are the evidence.
    assert evidence.runs_for("Call Yuki on Sunday", query) == [["x"], ["y"], ["z"]]
    assert evidence.runs_for("call olga", query) == []  # another task
    # A recurring template whose runs are not among the nearest is not taken as one.
    assert evidence.runs_for("email olga", np.array([1.0, 0.9, 0.0, 0.0], dtype=np.float32)) == []
    # Texts that differ in case and spacing alone are one text to the words' count; a task
    # done again is one text; each run's template is its task's.
    again = [*tasks, "Call  Olga on Monday", "email amir", "Email Lena"]
    counted = Evidence(again, [["x"]] * 7, np.eye(7, 4, dtype=np.float32), share=0.5)
    assert counted.words == evidence.words
    assert counted.templates == tuple(task_template(t, counted.words) for t in again)
    assert len(counted.seen_vectors) == 6  # "Call  Olga on Monday" and "Email Lena" are texts of their own
    # Values only: a run of as many values is no evidence of the same task.
    values = Evidence(
        ["olga kofi", "amir lena", "yuki ada", "ana li"], [["x"], ["y"], ["z"], ["w"]], vectors, share=0.5
    )
    assert values.words == set() and task_template("olga ada", values.words) in values.known
    assert values.runs_for("olga ada", query) == []


TASK = "Forward the latest email about 'budget review' to olga"
"""A task of `induced`'s runs (forward(0)): it names no meeting."""


def _both_run(i: int) -> Trajectory:
    steps: list[tuple[str, dict[str, Any], str | None]] = [
        (SEARCH, {"query": "budget review"}, None),
        (LOOKUP, {"name": "olga"}, None),
        (FORWARD, {"email_id": f"e{i}", "to": "olga@corp.test"}, None),
        (FIND, {"query": "olga"}, None),
        (CANCEL, {"event_id": f"ev{i}"}, None),
    ]
    return run(TASK, steps, True, id=f"both-{i}")


def test_a_recurring_task_is_served_what_covers_its_past_runs(settings: Settings) -> None:
    store = induced(settings)  # forwarding and cancelling workflows
    # The task done again, and that time a meeting cancelled after it: the forwarding
    # workflow alone no longer covers what was done for it.
    store_trajectories(store, [_both_run(0)], settings.scrub)
    with WorkflowMemory.open(settings) as memory:
        served = [h.workflow.actions for h in memory.search(TASK)]
        fresh = [h.workflow.actions for h in memory.search(TASK + " today")]
    assert any(CANCEL in a for a in served) and any(FORWARD in a for a in served)
    # A task never seen is served by the relevance gap alone, as with no evidence at all.
    off = ServedIndex(store, settings.namespace, gap=settings.relevance_gap, ratio=settings.relevance_ratio)
    assert fresh == [h.workflow.actions for h in off.search(TASK + " today")]
    assert len(off.search(TASK)) < len(served)
    # `flowmem eval` serves its test runs exactly as search does.
    evaluated = retrieve(store, [_both_run(1)], namespace=settings.namespace, k=3, settings=settings)
    assert [m[1] for m in evaluated.flowmem[0].memories] == served


def test_the_evidence_is_the_newest_successful_runs_read_in_batches(settings: Settings) -> None:
    store = store_from(settings)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    runs = [
        run(f"Cancel my meeting number {i}", [(CANCEL, {"event_id": str(i)}, None)], i != 3, id=f"r{i}")
        for i in range(7)
    ]
    runs = [t.model_copy(update={"created_at": base + timedelta(hours=i % 5)}) for i, t in enumerate(runs)]
    store_trajectories(store, runs, settings.scrub)
    # Newest first, ties by id; r3 failed; 3 kept of 6, two rows a batch.
    evidence = newest_successes(store, settings.namespace, 3, batch_size=2)
    assert [t.rsplit(" ", 1)[1] for t in evidence.tasks] == ["4", "2", "1"]
    assert evidence.vectors.shape == (3, store.embedder.dim)
    assert np.allclose(evidence.vectors[0], store.embedder.embed([evidence.tasks[0]])[0], atol=1e-6)
    everything = newest_successes(store, settings.namespace, 100)
    assert [t.rsplit(" ", 1)[1] for t in everything.tasks] == ["4", "2", "1", "6", "0", "5"]
    # What the namespace has seen: the kept runs' distinct tasks and those of the newest 3 others.
    other = run("Water the plants in the lobby", [("tasks.create", {"title": "water"}, None)], False, id="w")
    store_trajectories(store, [other.model_copy(update={"created_at": base})], settings.scrub)
    evidence, everything = (newest_successes(store, settings.namespace, n, batch_size=2) for n in (3, 100))
    assert len(everything.seen_vectors) == 8  # 6 successes, 2 failures
    assert len(evidence.seen_vectors) == 5  # 3 successes, 2 failures
    failed = store.embedder.embed([other.task])[0]
    assert evidence.familiar(failed, 0.99) and everything.familiar(failed, 0.99)
    assert not Evidence(evidence.tasks, evidence.actions, evidence.vectors).familiar(failed, 0.99)


def test_the_evidence_read_in_arrow_is_the_runs_sorted_in_python(settings: Settings) -> None:
    """Runs of every outcome (a success, a failure, none known), creation times with many ties,
    ids out of order, actions or none, read in batches of 7: the evidence is, for each limit,
    the successes sorted newest first with ties by id, cut at the limit; what else was seen,
    the other runs' distinct tasks the same way (the first of each, not a kept task)."""
    store = store_from(settings)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    outcomes: list[bool | None] = [True, False, None]
    runs = [
        Trajectory(
            id=f"r{(i * 37) % 101:03d}",
            task=f"Cancel meeting {i % 9}",
            steps=[] if i % 5 == 0 else [{"action": CANCEL, "args": {"event_id": str(i)}}],
            success=outcomes[i % 4 % 3],
            created_at=base + timedelta(hours=(i * 7) % 6),
        )
        for i in range(60)
    ]
    store_trajectories(store, runs, settings.scrub)
    newest = sorted(sorted(runs, key=lambda r: r.id), key=lambda r: r.created_at, reverse=True)
    won = [r for r in newest if r.success is True]
    for limit in (1, 5, 20, 100):
        evidence = newest_successes(store, settings.namespace, limit, batch_size=7)
        kept = won[:limit]
        assert list(evidence.tasks) == [r.task for r in kept]
        assert [list(a) for a in evidence.actions] == [[s.action for s in r.steps] for r in kept]
        assert np.array_equal(evidence.vectors, store.embedder.embed([r.task for r in kept]))
        others = [r.task for r in newest if r.success is not True][:limit]
        distinct = list(dict.fromkeys(t for t in others if t not in {r.task for r in kept}))
        want = store.embedder.embed(list(dict.fromkeys(r.task for r in kept)) + distinct)
        assert np.array_equal(evidence.seen_vectors, want)
