"""Never empty: where clustering finds nothing to split by, every successful run is still served.

Issue 24's degenerate clusterings: every task noise, under ten runs, one kind of task, and
near-equal task texts that need different actions. After one induction, each successful
training run's own task, searched as an agent would, is served a workflow that does what that
run did (its action sequence): the floor raw memory reaches by construction.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from flowmem.agents import WorkflowMemory
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory
from flowmem.settings import Settings
from tests.factories import cancel, forward, remind, run

Steps = list[tuple[str, dict[str, Any], str | None]]


def _values_only() -> list[Trajectory]:
    """One word shared, the rest long values: no region denser than another (all noise), two
    ways of doing it."""
    values = random.Random(11)
    runs = []
    for i in range(20):
        host, via = f"{values.getrandbits(64):016x}", f"{values.getrandbits(64):016x}"
        steps: Steps = [("net.ping", {"host": host}, None)]
        if i % 2:
            steps.insert(0, ("net.route", {"via": via}, None))
        runs.append(run(f"Ping {host} {via}", steps, True, id=f"ping-{i}"))
    return runs


def _few() -> list[Trajectory]:
    """Five runs of three kinds: fewer than make any cluster dense."""
    return [forward(0), forward(1), cancel(2), cancel(3), remind(4)]


def _one_kind() -> list[Trajectory]:
    return [forward(i) for i in range(12)]


def _near_equal() -> list[Trajectory]:
    """The same words, two procedures: cancelling finds the event first, or reads the calendar."""
    runs = [cancel(i) for i in range(6)]
    for i in range(6, 12):
        task = cancel(i).task
        steps: Steps = [
            ("calendar.list_events", {"day": "today"}, None),
            ("calendar.cancel_event", {"event_id": f"ev{i}"}, None),
        ]
        runs.append(run(task, steps, True, id=f"cancel-listed-{i}"))
    return runs


CASES: dict[str, Callable[[], list[Trajectory]]] = {
    "every task noise": _values_only,
    "under ten runs": _few,
    "one kind of task": _one_kind,
    "near-equal texts, two procedures": _near_equal,
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_successful_run_is_served_a_workflow_doing_what_it_did(settings: Settings, case: str) -> None:
    runs = CASES[case]()
    store = store_from(settings)
    store_trajectories(store, runs, settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert store.served_workflows(), case
    with WorkflowMemory.open(settings) as memory:
        for t in runs:
            served = [hit.workflow.actions for hit in memory.search(t.task, k=3)]
            assert t.actions in served, (case, t.task, t.actions, served)
