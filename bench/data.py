"""Synthetic workflows and tasks for the benchmarks: the same texts, so the same vectors, for
every system compared."""

from __future__ import annotations

import random
from typing import Any

from flowmem.models import InductionRun, Workflow, WorkflowStep
from flowmem.storage import Store

__all__ = [
    "THINGS",
    "VERBS",
    "fill",
    "foreign_queries",
    "queries",
    "task_text",
    "team_description",
    "words",
    "workflow",
]

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


def words(i: int) -> tuple[str, str]:
    """The verb and the thing of the i-th synthetic workflow."""
    return VERBS[i % len(VERBS)], THINGS[(i // len(VERBS)) % len(THINGS)]


def team_description(i: int) -> str:
    """A longer description of the i-th synthetic workflow, naming a number and a team."""
    verb, thing = words(i)
    return f"{verb} the {thing} number {i} for the team {i % 97}"


def workflow(i: int, **fields: Any) -> Workflow:
    """The i-th synthetic workflow: one step acting on `{id}`, named and described by the verb
    and the thing `i` picks; `fields` replace any of its fields."""
    verb, thing = words(i)
    made: dict[str, Any] = {
        "id": f"w{i:07d}",
        "name": f"{verb}_{thing}_{i}",
        "description": f"{verb} the {thing}",
        "steps": [WorkflowStep(action=f"{thing}.{verb}", args={"id": "{id}"})],
        "parameters": {"id": "what to act on"},
        "status": "active",
    }
    return Workflow(**(made | fields))


def queries(n: int, *, seed: int = 1) -> list[str]:
    """Tasks to search for (drawn like the stored ones, not equal to them)."""
    rng = random.Random(seed)
    return [task_text(rng.randrange(10**6), rng) for _ in range(n)]


ASK = ["what is", "tell me", "how warm is", "describe", "recommend", "translate"]
TOPIC = ["weather", "a poem", "the recipe", "a song", "the score", "a hiking trail", "jazz"]
PLACE = ["paris", "lagos", "kyoto", "lima", "oslo", "cairo", "perth", "quito"]


def foreign_queries(n: int, *, seed: int = 2) -> list[str]:
    """Tasks from no domain `task_text` knows (weather, poems, recipes …), none of its words
    but function words: a task that does not recur, from no known domain."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(ASK)} {rng.choice(TOPIC)} in {rng.choice(PLACE)} {rng.choice(WHEN)} {rng.randrange(10**4)}"  # noqa: E501
        for _ in range(n)
    ]


def fill(
    store: Store,
    n: int,
    *,
    namespace: str = "default",
    keys: int = 1,
    batch: int = 20_000,
    examples: bool = False,
) -> None:
    """Commit n active workflows, each keyed by `keys` task texts, in runs of `batch`; with
    `examples`, as induction commits them: keyed by example tasks, each with its share (1),
    so that the relevance floor holds them (`retrieval.search.floor_keeps`)."""
    for start in range(0, n, batch):
        chosen: list[Workflow] = []
        texts: list[str] = []
        for i in range(start, min(n, start + batch)):
            rng = random.Random(i)
            w = workflow(i, namespace=namespace)
            chosen.append(w)
            texts.extend(task_text(i * keys + j, rng) for j in range(keys))
        embedded = store.embedder.embed(texts)  # one call for the batch, as an inducer embeds its tasks
        vectors = {w.id: embedded[k * keys : (k + 1) * keys] for k, w in enumerate(chosen)}
        shares = {w.id: [1.0] * keys for w in chosen} if examples else None
        store.commit_run(
            InductionRun(id=f"bench-{start}", namespace=namespace), chosen, keys=vectors, shares=shares
        )
