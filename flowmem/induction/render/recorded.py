"""A recorded run as the familiar API serves it: its texts with its example values out (pure).

A procedure stored with `add_workflow` is one run, so every value in it is one example's: a
version, a registry path, an id. Served as written, it would hand an agent those values as
if they were the procedure. So a recorded run is served abstracted like a workflow: its steps
as their actions (`induction.render.prose` already made each value in a step's text an argument:
"build docker image tag {tag}"), and its task, outcome and result texts with the same values
written as the same placeholders — a value its steps hold (any argument value of 3 characters
or more, `literals.MIN_CHARS`) as that argument's `{key}`, any other value-shaped token (a
quoted text, an address, a URL, a number, a token with a digit and a separator:
`prose.parse_prose`) as one named after the word before it. A text that reads like an
instruction (`induction.injection`) is data, never served: only that it was left out is.

A failed run is served as the failure it was, never as steps to follow: its result keeps its
"FAILED" (the familiar API's callers branch on it), and what went wrong is stated as where
it left the workflow that fits it best (`failures.first_divergence`: "skipped run tests,
then called build docker image tag {tag}").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel

from flowmem.induction.injection import looks_like_injection
from flowmem.induction.literals import MIN_CHARS, LiteralSet, find_literals, mask, scalars
from flowmem.induction.pitfalls.failures import first_divergence
from flowmem.induction.render.prose import parse_prose
from flowmem.induction.render.render import render_call
from flowmem.models import Trajectory, Workflow
from flowmem.retrieval.align import lcs_len

__all__ = ["FAILED", "LEFT_OUT", "Recorded", "abstract_text", "recorded", "went_wrong"]

FAILED = "FAILED"
"""How a failed run's served result begins (`procedures.outcome_of` reads it in any case)."""

LEFT_OUT = "(left out: it reads like an instruction)"
"""What is served in place of a text that reads like an instruction."""

_PLACEHOLDER = re.compile(r"(\{[^{}\s]*\})")
"""A placeholder already in a text: never abstracted again."""


class Recorded(BaseModel, frozen=True):
    """A recorded run's texts, its example values as `{placeholders}`."""

    task: str
    """The task."""
    steps: tuple[str, ...]
    """Its steps as actions: a sentence with its values as placeholders, a call with them as
    its arguments."""
    outcome: str
    """The outcome its author stated (or its final answer)."""
    result: str | None
    """Its result (None: not known); a failed run's begins with `FAILED`."""


def _values(run: Trajectory) -> dict[str, str]:
    """The run's argument values (`MIN_CHARS` or longer), each with the key it was first given."""
    named: dict[str, str] = {}
    for step in run.steps:
        for key, value in step.args.items():
            for text in scalars(value):
                if len(text) >= MIN_CHARS:
                    named.setdefault(text, key)
    return named


def abstract_text(text: str, named: dict[str, str]) -> str:
    """A text with its values as placeholders: each value of `named` (value -> key, updated
    with the keys given to new values) as `{key}`, any other value-shaped token as a key named
    after the word before it (`parse_prose`); an instruction-like text as `LEFT_OUT`."""
    if looks_like_injection(text):
        return LEFT_OUT
    text, _ = parse_prose(text, named)
    literals = LiteralSet(named)
    parts = _PLACEHOLDER.split(text)  # odd positions: placeholders, kept as they are
    for i in range(0, len(parts), 2):
        for value in find_literals(parts[i], literals):  # longest first
            parts[i] = mask(parts[i], [value], "{" + named[value] + "}")
    return "".join(parts)


def _failed(result: str | None) -> str:
    """A failed run's result, beginning with `FAILED` whatever case its author wrote it in."""
    text = (result or "").strip()
    if text.upper().startswith(FAILED):
        return FAILED + text[len(FAILED) :]
    return f"{FAILED}: {text}" if text else FAILED


def recorded(run: Trajectory, outcome: str | None, result: str | None, *, failed: bool) -> Recorded:
    """A recorded run's texts abstracted (`outcome`, `result`: as its author gave them)."""
    named = _values(run)
    steps = tuple(render_call(s.action, {k: "{" + k + "}" for k in s.args}) for s in run.steps)
    task = abstract_text(run.task, named)  # first: a value the task names keeps that name after
    said = abstract_text(outcome or "", named)
    shown = None if result is None else abstract_text(result, named)
    return Recorded(task=task, steps=steps, outcome=said, result=_failed(shown) if failed else shown)


def went_wrong(run: Trajectory, workflows: Sequence[Workflow]) -> str | None:
    """Where a failed run left the workflow it shares the most actions with (the first of
    equals), stated as a pitfall is; None when it shares none, or followed it to the end."""
    if not workflows:
        return None
    shared = [lcs_len(w.actions, run.actions) for w in workflows]
    best = max(range(len(workflows)), key=lambda i: (shared[i], -i))
    if not shared[best]:
        return None
    divergence = first_divergence(workflows[best].actions, run, LiteralSet(_values(run)))
    return None if divergence is None else divergence.text
