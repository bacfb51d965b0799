"""Synthetic workflows and tasks for the benchmarks: the same texts, so the same vectors, for
every system compared."""

from __future__ import annotations

import random

from flowmem.models import InductionRun, Workflow, WorkflowStep
from flowmem.storage import Store

__all__ = ["fill", "queries", "task_text"]

VERBS = ["forward", "archive", "schedule", "cancel", "assign", "complete", "email", "update", "export"]
THINGS = ["invoice", "meeting", "report", "ticket", "customer", "contract", "task", "budget", "survey"]
WHO = ["ana", "li", "zed", "olga", "sam", "kim", "raj", "eva", "tom", "mia", "noa", "ben"]
WHEN = ["today", "tomorrow", "next week", "on friday", "this month", "before noon"]


def task_text(i: int, rng: random.Random | None = None) -> str:
    """A task text; `i` picks its words (with `rng`, a random variant of them)."""
    r = rng or random.Random(i)
    return (
        f"{r.choice(VERBS)} the {r.choice(THINGS)} {i % 1013} of {r.choice(WHO)} "
        f"{r.choice(WHEN)} for team {r.randrange(200)}"
    )


def queries(n: int, *, seed: int = 1) -> list[str]:
    """Tasks to search for (drawn like the stored ones, not equal to them)."""
    rng = random.Random(seed)
    return [task_text(rng.randrange(10**6), rng) for _ in range(n)]


def fill(store: Store, n: int, *, namespace: str = "default", keys: int = 1, batch: int = 20_000) -> None:
    """Commit n active workflows, each keyed by `keys` task texts, in runs of `batch`."""
    for start in range(0, n, batch):
        chosen: list[Workflow] = []
        texts: list[str] = []
        for i in range(start, min(n, start + batch)):
            rng = random.Random(i)
            verb, thing = VERBS[i % len(VERBS)], THINGS[(i // len(VERBS)) % len(THINGS)]
            w = Workflow(
                id=f"w{i:07d}",
                name=f"{verb}_{thing}_{i}",
                description=f"{verb} the {thing}",
                steps=[WorkflowStep(action=f"{thing}.{verb}", args={"id": "{id}"})],
                parameters={"id": "what to act on"},
                namespace=namespace,
                status="active",
            )
            chosen.append(w)
            texts.extend(task_text(i * keys + j, rng) for j in range(keys))
        embedded = store.embedder.embed(texts)  # one call for the batch, as an inducer embeds its tasks
        vectors = {w.id: embedded[k * keys : (k + 1) * keys] for k, w in enumerate(chosen)}
        store.commit_run(InductionRun(id=f"bench-{start}", namespace=namespace), chosen, keys=vectors)
