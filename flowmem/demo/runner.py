"""The machinery of a scripted agent run: tool calls recorded as steps, slips, recovery.

A procedure knows the correct way to solve its family, but at every decision point it may
`slip` (probability `(1 - skill) * weight`): use a bare name where an address is needed, search
too narrowly, pick an older email, use a wrong date format, ... Some slips raise tool errors the
agent may recover from (probability `skill`), others silently miss the goal. Agents read only
tool observations, never the world's internals.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from flowmem.demo.listings import ContactHit, Hit, listing
from flowmem.demo.records import ToolError
from flowmem.demo.world import World
from flowmem.models import Step

__all__ = [
    "GiveUp",
    "Procedure",
    "Run",
    "act",
    "address",
    "find",
    "find_address_or_search",
    "lookup",
    "newest",
]


class GiveUp(Exception):
    """The agent stops without finishing; `reason` becomes its final answer."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Run:
    """One agent run in progress: the world it acts on, its random choices and its steps."""

    def __init__(
        self, world: World, rng: random.Random, skill: float, clock: datetime, timing: random.Random
    ) -> None:
        self.world = world
        self.rng = rng
        self.skill = skill
        self.clock = clock
        # A separate generator for timings, so that timings never change the agent's choices.
        self.timing = timing
        self.steps: list[Step] = []
        self.last_error: str | None = None

    def call(self, action: str, args: dict[str, Any], thought: str) -> str | None:
        """Call a tool and record the step; return the observation, or None on a tool error."""
        observation: str | None = None
        self.last_error = None
        try:
            observation = self.world.call(action, args)
        except ToolError as exc:
            self.last_error = exc.message
        duration = round(self.timing.uniform(40.0, 900.0), 1)
        self.steps.append(
            Step(
                action=action,
                args=dict(args),
                thought=thought,
                observation=observation,
                error=self.last_error,
                started_at=self.clock,
                duration_ms=duration,
            )
        )
        # Time passes while the tool runs and while the agent thinks about the next step.
        self.clock += timedelta(milliseconds=duration + self.timing.uniform(800.0, 6000.0))
        return observation

    def slip(self, weight: float) -> bool:
        """Whether the agent makes a mistake at a decision point of this weight."""
        return self.rng.random() < (1.0 - self.skill) * weight

    def recovers(self) -> bool:
        """Whether the agent recovers after an error (rather than giving up)."""
        return self.rng.random() < self.skill

    def maybe(self, p: float) -> bool:
        """An optional, harmless step taken with probability `p` whatever the skill."""
        return self.rng.random() < p


Procedure = Callable[[Run, Mapping[str, str]], str]
"""A family's procedure: (run, task slots) -> final answer; raises `GiveUp` to stop."""


H = TypeVar("H")
S = TypeVar("S", bound=Hit)


def lookup(run: Run, name: str, thought: str | None = None) -> str:
    """Look a person up in the contacts directory and return their address."""
    observation = run.call(ContactHit.action, {"name": name}, thought or f"I need {name}'s email address.")
    hits = listing(observation, ContactHit)
    exact = [h for h in hits if h.name.casefold() == name.casefold()] or hits
    if not exact:
        raise GiveUp(f"there is no contact named {name}")
    return exact[0].email


def address(run: Run, name: str, weight: float = 1.0) -> str:
    """The person's address, or (a slip) their bare name without looking them up."""
    return name if run.slip(weight) else lookup(run, name)


def act(
    run: Run,
    action: str,
    args: Mapping[str, str | int],
    thought: str,
    *,
    correct: Mapping[str, str] | None = None,
    people: Mapping[str, str] | None = None,
) -> str:
    """Call a mutating tool; after an error, maybe fix the argument it names and retry.

    Args:
        run: The run.
        action: The tool.
        args: The arguments the agent chose (possibly with slips).
        thought: Why the agent calls it.
        correct: The right value of an argument, which the agent realises after an error.
        people: Argument -> person name, for arguments that need a looked-up address.

    Returns:
        The observation of the successful call.

    Raises:
        GiveUp: The agent did not recover.
    """
    correct, people = dict(correct or {}), dict(people or {})
    given = dict(args)  # corrected in place; each call's step keeps a copy of what it was given
    for _ in range(3):
        observation = run.call(action, given, thought)
        if observation is not None:
            return observation
        error = run.last_error or "unknown error"
        # The error names the bad argument (`'due'`) or echoes its bad value (`'March 5'`).
        keys = list(dict.fromkeys([*given, *correct, *people]))
        wrong = [k for k in keys if f"'{k}'" in error or (k in given and f"'{given[k]}'" in error)]
        if not wrong or not all(k in correct or k in people for k in wrong) or not run.recovers():
            raise GiveUp(error)
        for k in wrong:
            if k in people:
                given[k] = lookup(run, people[k], f"It needs an address; look up {people[k]}.")
            else:
                given[k] = correct[k]
        thought = f"That failed; retry with a corrected {' and '.join(wrong)}."
    raise GiveUp(f"{action} kept failing")


def find(run: Run, kind: type[S], query: str, what: str, narrow: list[str], weight: float = 1.0) -> list[S]:
    """Search with the tool that lists `kind`; a slip searches too narrowly first, finds
    nothing and maybe retries."""
    if run.slip(weight):
        hits = listing(run.call(kind.action, {"query": run.rng.choice(narrow)}, f"Search for {what}."), kind)
        if hits:
            return hits
        if not run.recovers():
            raise GiveUp(f"I found no {what}")
        thought = "Nothing found; the query was too narrow, try a shorter one."
    else:
        thought = f"Search for {what}."
    hits = listing(run.call(kind.action, {"query": query}, thought), kind)
    if not hits:
        raise GiveUp(f"I found no {what}")
    return hits


def find_address_or_search(run: Run, name: str, action: str, what: str) -> str:
    """The person's address; a slip first searches by their bare name and finds nothing."""
    if run.slip(0.9):
        run.call(action, {"query": name}, f"Search for {what} {name}.")
        if not run.recovers():
            raise GiveUp(f"I found no {what} {name}")
        return lookup(run, name, f"Nothing under the name; look up {name}'s address.")
    return lookup(run, name)


def newest(run: Run, hits: list[H]) -> H:
    """The first (newest) hit; a slip picks an older one instead."""
    if len(hits) > 1 and run.slip(0.9):
        return run.rng.choice(hits[1:])
    return hits[0]
