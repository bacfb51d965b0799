"""What the LLM inducer asks a model for, and the checks each induced workflow must pass.

The structured output (`InducedSet` of `InducedWorkflow`s) and its validation against the
cluster it was induced from: every step calls an action the successful runs called, every
literal is one they used, every placeholder is declared, no example's value leaks, and no text
repeats instruction-like text of the data (observations are data). `check` gives each
violation with its reason (`REASONS`); `flowmem.induction.inducers.llm` retries and drops on them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pydantic import BaseModel, ConfigDict

from flowmem.induction.base import ClusterInput
from flowmem.induction.injection import destinations, find_injection, tainted_destinations
from flowmem.induction.literals import find_literals, scalar_text, scalars
from flowmem.models import Trajectory, placeholders_in

__all__ = [
    "REASONS",
    "Arg",
    "InducedSet",
    "InducedStep",
    "InducedWorkflow",
    "Parameter",
    "Problem",
    "check",
    "reason_of",
    "validate",
]

# Structured output: maps are lists of items, as OpenAI's strict JSON schema mode cannot express dicts.


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True, extra="forbid")


class Arg(_Out):
    """One argument of a step."""

    key: str
    """The argument name, as the runs used it."""
    value: str | int | float | bool | None
    """A value every run used, kept literal, or a string holding `{placeholders}`."""


class Parameter(_Out):
    """One placeholder of a workflow."""

    name: str
    """The placeholder's name, without braces, e.g. `recipient_email`."""
    description: str
    """What value goes there and where it comes from (the task, or an earlier step's result)."""


class InducedStep(_Out):
    """One abstract step."""

    action: str
    """An action the successful runs called."""
    args: list[Arg]
    """Its arguments."""
    note: str
    """Why or how to take the step; empty if obvious."""
    for_each: str | None = None
    """For a step done once per item: the placeholder that takes each item in turn (without
    braces); consecutive steps with the same one are one loop. None for a step done once."""
    items_from: str | None = None
    """For a repeated step: the action whose result lists the items, or `task`."""


class InducedWorkflow(_Out):
    """One reusable sub-routine."""

    name: str
    """A short snake_case name."""
    description: str
    """When to use it, in general terms."""
    steps: list[InducedStep]
    """The steps, in order."""
    parameters: list[Parameter]
    """Every placeholder the steps use."""
    pitfalls: list[str]
    """What the failed runs did wrong, as general advice."""


class InducedSet(_Out):
    """The workflows induced from one cluster."""

    workflows: list[InducedWorkflow]
    """Non-overlapping workflows; usually one."""


# The checks.

REASONS = ("injection", "leak", "invented_tool", "invented_value", "undeclared", "shape")
"""Why an induced workflow is rejected, most serious first; a rejected workflow is counted under
the first reason its violations give. `injection`: it repeats instruction-like text of the data
or names an address such text asked for; `leak`: it carries an example's value; `invented_tool`:
a step calls an action no successful run called; `invented_value`: a literal no run used;
`undeclared`: an undeclared placeholder; `shape`: no name, no steps, or too few."""

Problem = tuple[str, str]
"""(reason, message): one violation."""


def _free_texts(w: InducedWorkflow) -> Iterator[tuple[str, str]]:
    yield "the name", w.name
    yield "the description", w.description
    for i, s in enumerate(w.steps, 1):
        yield f"the note of step {i}", s.note
    for param in w.parameters:
        yield f"parameter {param.name!r}", f"{param.name} {param.description}"
    for i, pitfall in enumerate(w.pitfalls, 1):
        yield f"pitfall {i}", pitfall


def _tainted(text: str, tainted: set[str]) -> str | None:
    """An address or URL in `text` that instruction-like text in the data asked for."""
    low = text.lower()
    return next((d for d in sorted(tainted) if d in low), None)


def _step_problems(
    i: int, step: InducedStep, actions: set[str], values: set[str], declared: set[str], tainted: set[str]
) -> list[Problem]:
    problems: list[Problem] = []
    if step.action not in actions:
        problems.append(
            (
                "invented_tool",
                f"step {i} calls {step.action!r}, which no successful run of this cluster called",
            )
        )
    for arg in step.args:
        text = scalar_text(arg.value)
        if text is None:
            continue
        phrase = find_injection(text) or _tainted(text, tainted)
        if phrase:
            problems.append(
                (
                    "injection",
                    f"step {i}: {arg.key} repeats instruction-like text of the data ({phrase[:40]!r})",
                )
            )
        if not placeholders_in(text) and text.lower() not in values:
            message = f"step {i}: {arg.key}={text!r} is a literal that no successful run used"
            problems.append(("invented_value", f"{message}; use a placeholder"))
    for name in placeholders_in([[a.value for a in step.args], step.note]):
        if name not in declared:
            problems.append(("undeclared", f"step {i} uses {{{name}}}, which is not declared in parameters"))
    over = (step.for_each or "").strip().strip("{}")
    if over and over not in placeholders_in([a.value for a in step.args]):
        problems.append(
            ("undeclared", f"step {i} repeats for each {{{over}}}, which none of its arguments uses")
        )
    return problems


def check(
    induced: InducedWorkflow, cluster: ClusterInput, *, tainted: set[str] | None = None
) -> list[Problem]:
    """The violations of an induced workflow against its cluster, each with its reason.

    `tainted`: the cluster's `tainted_destinations`, when the caller has them already.
    """
    runs = [t for t in cluster.successes if t.steps]
    actions = {a for t in runs for a in t.actions}
    values = {v.lower() for t in runs for s in t.steps for v in scalars(s.args)}
    declared = {p.name for p in induced.parameters}
    if tainted is None:
        tainted = tainted_destinations([*cluster.successes, *cluster.failures])
    problems = _shape_problems(induced, runs)
    for i, step in enumerate(induced.steps, 1):
        problems += _step_problems(i, step, actions, values, declared, tainted)
    leaked = find_literals("\n".join(scalars(induced.model_dump())), cluster.example_literals)
    if leaked:
        shown = ", ".join(repr(v) for v in leaked[:5])
        problems.append(
            ("leak", f"it contains example-specific values ({shown}); use placeholders or general words")
        )
    return problems + _free_text_problems(induced, tainted)


def _shape_problems(induced: InducedWorkflow, runs: Sequence[Trajectory]) -> list[Problem]:
    """A workflow without a name, or without steps, or of one step where a run took two."""
    problems: list[Problem] = []
    if not induced.name.strip():
        problems.append(("shape", "the name is empty"))
    if not induced.steps:
        problems.append(("shape", "it has no steps"))
    elif len(induced.steps) < 2 and any(len(t.steps) >= 2 for t in runs):
        problems.append(("shape", "it has one step; a workflow needs at least two"))
    return problems


def _free_text_problems(induced: InducedWorkflow, tainted: set[str]) -> list[Problem]:
    """Free text (name, description, notes, parameters, pitfalls) that reads like text of the
    data: instruction-like text or a tainted destination (`injection`), another destination
    (`leak`)."""
    problems: list[Problem] = []
    for where, free in _free_texts(induced):
        phrase = find_injection(free)
        named = destinations(free)
        if phrase or named:
            reason = "injection" if phrase or _tainted(free, tainted) else "leak"
            shown = (phrase or named[0])[:40]
            problems.append((reason, f"{where} reads like text copied from the data ({shown!r}); remove it"))
    return problems


def validate(induced: InducedWorkflow, cluster: ClusterInput) -> list[str]:
    """The violations of an induced workflow against its cluster ([] when it is valid).

    Unused declared parameters are not a violation: they are left out of the workflow.
    """
    return [message for _, message in check(induced, cluster)]


def reason_of(problems: Sequence[Problem]) -> str:
    """The reason a rejected workflow is counted under: the most serious of its violations."""
    return min((reason for reason, _ in problems), key=REASONS.index)
