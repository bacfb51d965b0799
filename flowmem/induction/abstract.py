"""Abstraction: turn aligned example runs into steps with `{placeholders}`.

An argument value that varies across the examples, that is example-specific (rare in the
corpus), or that appears in the task text becomes a named placeholder; a value constant
across the examples and common in the corpus stays literal.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from flowmem.induction.align import lcs_pairs
from flowmem.induction.literals import LiteralIndex, canonical, find_literals, in_task, scalars
from flowmem.models import Trajectory, WorkflowStep
from flowmem.policy.scrub import MASKS

__all__ = ["Abstraction", "abstract_runs"]

_NAME = re.compile(r"[^a-z0-9_]+")


@dataclass(frozen=True)
class Abstraction:
    """Abstract steps and what their placeholders stand for."""

    steps: list[WorkflowStep]
    """The steps, with `{placeholders}` for example-specific values."""
    parameters: dict[str, str]
    """Placeholder -> where its value comes from."""
    values: dict[str, dict[int, str]]
    """Placeholder -> example index -> the value it stood for (never rendered)."""
    choices: dict[str, list[str]]
    """Placeholder -> its observed values, when they are a few common ones
    (`LiteralIndex.choices`): rendered with the placeholder."""


def _masked(text: str) -> bool:
    """Whether the scrubber masked part of a value: a mask is never a workflow's constant
    (every run's secret reads `[SECRET]` alike, yet each run had its own)."""
    return any(mask in text for mask in MASKS.values())


def _slug(key: str) -> str:
    name = _NAME.sub("_", key.lower()).strip("_") or "value"
    return name if not name[0].isdigit() else f"v_{name}"


def _source(values: dict[int, Any], runs: Sequence[Trajectory], step_of: dict[int, int]) -> str:
    """Say where the value of a placeholder comes from, without naming any value."""
    if sum(in_task(v, runs[i].task) for i, v in values.items()) * 2 >= len(values):
        return "task"
    hits: Counter[str] = Counter()
    for i, v in values.items():
        texts = [t for t in scalars(v) if len(t) >= 3]
        for step in reversed(runs[i].steps[: step_of[i]]):
            if texts and all(t in (step.observation or "") for t in texts):
                hits[step.action] += 1
                break
    if hits:
        action, n = hits.most_common(1)[0]
        if n * 2 >= len(values):
            return f"result of {action}"
    return "task"


def _seen_at(
    runs: Sequence[Trajectory], aligned: Sequence[dict[int, int]], pos: int, key: str
) -> tuple[dict[int, Any], dict[int, int]]:
    """The value of argument `key` in each run whose step aligned with template position
    `pos` has it, by run index, and the position of that step in each such run."""
    seen: dict[int, Any] = {}
    step_of: dict[int, int] = {}
    for i, (run, pairs) in enumerate(zip(runs, aligned, strict=True)):
        if pos in pairs and key in run.steps[pairs[pos]].args:
            seen[i] = run.steps[pairs[pos]].args[key]
            step_of[i] = pairs[pos]
    return seen, step_of


def _constant(seen: Mapping[int, Any], runs: Sequence[Trajectory], literals: LiteralIndex) -> bool:
    """Whether an argument stays as written: the same in two runs or more, and nothing in it
    specific to a run (a rare literal, a value from the task, a masked secret)."""
    distinct = {canonical(v) for v in seen.values()}
    specific = any(
        literals.is_rare(t) or in_task(t, runs[i].task) or _masked(t)
        for i, v in seen.items()
        for t in scalars(v)
        if len(t) >= 3
    )
    return len(distinct) == 1 and len(seen) >= 2 and not specific


def _fresh_name(key: str, taken: AbstractSet[str], forbidden: AbstractSet[str]) -> str:
    """A parameter name for argument `key`: its slug, not read as a literal, not yet taken."""
    base = _slug(key)
    if find_literals("{" + base + "}", forbidden):  # a name must not read as a value
        base += "_value"
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def _choices(seen: Mapping[int, Any], literals: LiteralIndex) -> list[str] | None:
    """The values a parameter chooses among (`LiteralIndex.choices`); none for a masked one."""
    masked = any(_masked(t) for v in seen.values() for t in scalars(v))
    return None if masked else literals.choices(seen.values())


def abstract_runs(
    template: Trajectory, runs: Sequence[Trajectory], literals: LiteralIndex, forbidden: AbstractSet[str]
) -> Abstraction:
    """Abstract the template run's steps, aligning every example run to it by action LCS."""
    actions = template.actions
    aligned: list[dict[int, int]] = [dict(lcs_pairs(actions, r.actions)) for r in runs]
    steps: list[WorkflowStep] = []
    parameters: dict[str, str] = {}
    values: dict[str, dict[int, str]] = {}
    choices: dict[str, list[str]] = {}
    for pos, step in enumerate(template.steps):
        args: dict[str, Any] = {}
        step_choices: dict[str, list[str]] = {}
        for key, template_value in step.args.items():
            seen, step_of = _seen_at(runs, aligned, pos, key)
            if _constant(seen, runs, literals):
                args[key] = template_value
                continue
            keyed = {i: canonical(v) for i, v in seen.items()}
            name = next((n for n, vals in values.items() if vals == keyed), None)
            if name is None:
                name = _fresh_name(key, values.keys(), forbidden)
                values[name] = keyed
                parameters[name] = _source(seen, runs, step_of)
                listed = _choices(seen, literals)
                if listed is not None:
                    choices[name] = listed
            args[key] = "{" + name + "}"
            if name in choices:
                step_choices[name] = choices[name]
        steps.append(WorkflowStep(action=step.action, args=args, choices=step_choices))
    return Abstraction(steps=steps, parameters=parameters, values=values, choices=choices)
