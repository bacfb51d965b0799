"""A seeded store of served versions that takes every path a search takes: workflows with 1-5
keys (shares below 1 on some), second versions (active, candidates on trial, deprecated),
usage stats and status changes; and the queries and cases searched on it."""

from __future__ import annotations

import random
from typing import Any

from flowmem.models import InductionRun, UsageStats, Workflow, WorkflowStep
from flowmem.policy.lifecycle import Transition
from flowmem.storage import Store

VERBS = ["forward", "archive", "schedule", "cancel", "assign", "complete", "email", "update"]
THINGS = ["invoice", "meeting", "report", "ticket", "customer", "contract", "budget"]
AGENTS = ["agent", "planner", "mailer"]


def task_text(rng: random.Random) -> str:
    return f"{rng.choice(VERBS)} the {rng.choice(THINGS)} for team {rng.randrange(12)}"


def seeded_workflow(i: int, version: int, rng: random.Random, **kw: Any) -> Workflow:
    verb, thing = VERBS[i % len(VERBS)], THINGS[i % len(THINGS)]
    steps = [WorkflowStep(action=f"{thing}.{verb}", args={"id": "{id}"})]
    if rng.random() < 0.5:
        steps.append(WorkflowStep(action=f"{thing}.{rng.choice(VERBS)}", args={}))
    return Workflow(
        id=f"w{i:03d}",
        version=version,
        parent_version=version - 1 if version > 1 else None,
        name=f"{verb}_{thing}_{i}",
        description=f"{verb} the {thing} ({i})",
        steps=steps,
        parameters={"id": "the item"},
        agent=AGENTS[i % len(AGENTS)],
        scope="task" if i % 4 == 0 else "subtask",
        kind="subroutine" if i % 9 == 4 else "task",
        **kw,
    )


def seed(store: Store, *, n: int = 120, seed: int = 7) -> None:
    """Workflows with 1-5 keys (shares below 1 on some), second versions (active, candidates
    on trial, deprecated), usage stats and status changes: every path search takes."""
    rng = random.Random(seed)
    first = [seeded_workflow(i, 1, rng, status="active" if i % 3 else "candidate") for i in range(n)]
    keys: dict[str, Any] = {}
    shares: dict[str, list[float]] = {}
    for w in first:
        tasks = [task_text(rng) for _ in range(rng.randint(1, 5))]
        keys[w.id] = store.embedder.embed(tasks)
        shares[w.id] = [rng.choice([1.0, 1.0, 0.5, 0.2]) for _ in tasks]
    store.commit_run(InductionRun(id="seed-1"), first, keys=keys, shares=shares)
    second = [
        seeded_workflow(i, 2, rng, status=rng.choice(["active", "candidate", "deprecated"]))
        for i in range(0, n, 2)
    ]
    keys2 = {w.id: store.embedder.embed([task_text(rng) for _ in range(rng.randint(1, 3))]) for w in second}
    store.commit_run(InductionRun(id="seed-2"), second, keys=keys2)
    store.put_usage(
        {
            (w.id, w.version): UsageStats(served=10, successes=s, failures=10 - s)
            for w in first[::5]
            for s in [rng.randrange(11)]
        }
    )
    store.record_transitions(
        [Transition(w.id, 1, "active", "deprecated", "seeded") for w in first[1::17] if w.status == "active"]
    )


QUERIES = [f"{v} the {t} for team {i}" for i, (v, t) in enumerate(zip(VERBS * 3, THINGS * 4, strict=False))]
CASES: list[dict[str, Any]] = [
    {"k": 3},
    {"k": 1},
    {"k": 5},
    {"k": 3, "agent": "planner"},
    {"k": 3, "scope": "task"},
    {"k": 2, "agent": "mailer", "scope": "subtask"},
]
