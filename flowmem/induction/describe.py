"""Names, descriptions and step intents of workflows, from their actions, argument keys and
data flow (pure; the rule inducer needs no LLM for them).

- The name is the goal's verb and object in snake_case (`forward_email`,
  `exchange_delivered_order_items`): the goal is the last step that changes something
  (`segments.is_read`), or the last step of a workflow that only looks things up.
- The description is one sentence saying when to use it, with the placeholders the task
  supplies named, and the look-ups it makes first: "Use to forward email given {subject} and
  {recipient_name}: first search emails, then find email address."
- Each step's intent says what it does with what, and which later value it yields:
  "search emails by query; gives {email_id}".

Only action names, argument keys and placeholder names are used: no task text, so no value
of an example can reach them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

from flowmem.induction.literals import find_literals
from flowmem.induction.segments import is_read
from flowmem.models import WorkflowStep

__all__ = ["action_words", "describe", "goal_index", "name_for", "step_intents"]

_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_MAX_TASK_PARAMETERS = 4
_MAX_READS = 3


def action_words(action: str) -> list[str]:
    """The words of an action's last dotted part (`email.forward_email` -> forward, email)."""
    return [w.lower() for w in _WORD.findall(action.rsplit(".", 1)[-1])] or [action.lower()]


def goal_index(steps: Sequence[WorkflowStep]) -> int:
    """The position of the goal step: the last one that changes something, else the last."""
    changes = [i for i, s in enumerate(steps) if not is_read(s.action)]
    return changes[-1] if changes else len(steps) - 1


def name_for(steps: Sequence[WorkflowStep]) -> str:
    """A snake_case verb-object name from the goal step (its first argument key as the object
    when the action is a bare verb: `calculate(expression)` -> `calculate_expression`)."""
    goal = steps[goal_index(steps)]
    words = action_words(goal.action)
    if len(words) == 1 and goal.args:
        words += action_words(next(iter(goal.args)))
    name = "_".join(dict.fromkeys(words))
    return re.sub(r"[^a-z0-9_]+", "_", name).strip("_") or "workflow"


def _phrase(name: str, forbidden: Collection[str]) -> str:
    """An action or key in words (`forward email`), or as written (`total_visits_count`) when
    the words would read as one of the `forbidden` example values ("total visits")."""
    words = " ".join(dict.fromkeys(action_words(name)))
    return name.rsplit(".", 1)[-1] if forbidden and find_literals(words, forbidden) else words


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def describe(
    steps: Sequence[WorkflowStep], parameters: Mapping[str, str], forbidden: Collection[str] = ()
) -> str:
    """One sentence: when to use the workflow, what the task must give, what it looks up first
    (no word group that reads as one of the `forbidden` example values)."""
    goal = goal_index(steps)
    text = "Use to " + _phrase(steps[goal].action, forbidden)
    given = [f"{{{p}}}" for p, source in parameters.items() if source == "task"][:_MAX_TASK_PARAMETERS]
    if given:
        text += " given " + _listed(given)
    reads = list(
        dict.fromkeys(_phrase(s.action, forbidden) for s in steps[:goal] if s.action != steps[goal].action)
    )
    if reads:
        shown = reads[:_MAX_READS] + (["more"] if len(reads) > _MAX_READS else [])
        text += ": first " + ", then ".join(shown)
    return text + "."


def step_intents(
    steps: Sequence[WorkflowStep], parameters: Mapping[str, str], forbidden: Collection[str] = ()
) -> list[str]:
    """Per step: what it does, with which arguments, and the placeholders its result gives
    (no word group that reads as one of the `forbidden` example values)."""
    intents, given = [], set()
    for step in steps:
        text = _phrase(step.action, forbidden)
        if step.args:
            text += " by " + ", ".join(_phrase(k, forbidden) for k in step.args)
        gives = [
            p for p, source in parameters.items() if source == f"result of {step.action}" and p not in given
        ]
        if gives:  # said of the first step of that action only
            text += "; gives " + ", ".join(f"{{{p}}}" for p in gives)
            given.update(gives)
        intents.append(text)
    return intents
