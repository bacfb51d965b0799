"""Plain-text renderings of memories, as an agent's prompt would carry them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from flowmem.induction.render.prose import is_prose, render_prose
from flowmem.models import Trajectory, Workflow

__all__ = [
    "CONTEXT_HEADER",
    "loop_heads",
    "render_block",
    "render_call",
    "render_context",
    "render_trajectory",
    "render_workflow",
    "from_task",
    "subroutines_shown",
    "where_from",
]

CONTEXT_HEADER = (
    "Workflows that worked for similar tasks. Follow one if it fits, filling each "
    "{placeholder} from the task or from the result named:\n\n"
)
"""What the block an agent is given starts with (`render_context`)."""


def from_task(description: str) -> bool:
    """Whether a parameter's description says only that its value comes from the task: the
    rule inducer's `task`, or an LLM's bare "from the task"."""
    return description.strip().rstrip(".").lower().removeprefix("from ").removeprefix("the ") == "task"


def _result_of(description: str) -> str | None:
    """The action whose result gives a parameter's value, as the rule inducer writes it
    (`result of ACTION`); None for any other description."""
    return description.removeprefix("result of ") if description.startswith("result of ") else None


def where_from(description: str) -> str:
    """A parameter's description as it reads after its placeholder (`{x}: ...`): the rule
    inducer's `task` and `result of ACTION` read "from the task" and "from the result of
    ACTION"; an LLM's own words (what goes there and where from) stay as written."""
    if from_task(description):
        return "from the task"
    action = _result_of(description)
    return description.strip() if action is None else f"from the result of {action}"


def _args(args: Mapping[str, object]) -> str:
    """`key=value, ...`: a text as written, an empty one as `""` (`summary=` would read as a
    value left out), any other value as JSON."""
    return ", ".join(
        f"{k}={v if isinstance(v, str) and v else json.dumps(v, ensure_ascii=False)}" for k, v in args.items()
    )


def render_call(action: str, args: Mapping[str, object], choices: Mapping[str, Sequence[str]] = {}) -> str:
    """A step as a call, `action(key=value, ...)`; a step written as prose (a hand-written
    procedure's "Build the Docker image": whitespace in the action, no arguments) as it is.
    A placeholder with `choices` shows them: `cabin={cabin: business|economy}`. A sentence
    whose values are its arguments ("Build Docker image {image}", `induction.render.prose`) is the
    sentence with them put back."""
    if not args and any(c.isspace() for c in action):
        return action
    if choices:
        args = {k: _with_choices(v, choices) for k, v in args.items()}
    if is_prose(action, args):
        return render_prose(action, args)
    return f"{action}({_args(args)})"


def _with_choices(value: Any, choices: Mapping[str, Sequence[str]]) -> Any:
    if not isinstance(value, str):
        return value
    for name, values in choices.items():
        value = value.replace("{" + name + "}", "{" + name + ": " + "|".join(values) + "}")
    return value


def render_workflow(w: Workflow, *, description: bool = True, shown: Mapping[str, str] = {}) -> str:
    """A workflow as prompt text: name and description (when to use it), steps, where
    derived values come from, pitfalls.

    `description=False` leaves the description out (a dozen tokens per memory); what agents
    are served, and what `flowmem eval` measures, carries it. `shown` maps the ids of the
    sub-routines shown in the same prompt to their names: a run of steps that is one of them
    (`WorkflowStep.subroutine`) is one line naming it instead of its steps again.
    """
    lines = [f"Workflow {w.name}" + (f": {w.description}" if description and w.description else "")]
    listed: set[str] = set()  # a placeholder's choices are shown where it first appears
    n = 0
    body = 0  # the position of a step within the loop it is part of (a, b, ...)
    heads = loop_heads(w)
    for j, s in enumerate(w.steps):
        if s.subroutine is not None and s.subroutine in shown:
            if j == 0 or w.steps[j - 1].subroutine != s.subroutine:
                n += 1
                lines.append(f"{n}. Follow workflow {shown[s.subroutine]} (shown here)")
            continue
        who = f"[{s.agent}] " if s.agent else ""
        choices = {k: v for k, v in s.choices.items() if k not in listed}
        listed.update(choices)
        call = f"{who}{render_call(s.action, s.args, choices)}"
        if s.repeat is None:
            n, body = n + 1, 0
            lines.append(f"{n}. {call}")
            continue
        if j in heads:
            n, body = n + 1, 0
            lines.append(f"{n}. {heads[j]}:")
        lines.append(f"   {n}{chr(ord('a') + body % 26)}. {call}")
        body += 1
    lines += _sources(w.parameters)
    lines += [f"Pitfall: {p}" for p in w.pitfalls]
    return "\n".join(lines)


def _sources(parameters: Mapping[str, str]) -> list[str]:
    """Where the placeholders' values come from, beyond the task: the rule inducer's results,
    those of one action together (`Take {x}, {y} from ACTION; {z} from OTHER`), then an LLM's
    descriptions in its words (a bare "from the task" goes without saying: the context's
    header says it)."""
    lines = []
    derived = {k: a for k, v in parameters.items() if (a := _result_of(v)) is not None}
    if derived:
        by_action: dict[str, list[str]] = {}
        for k, a in derived.items():
            by_action.setdefault(a, []).append(f"{{{k}}}")
        lines.append("Take " + "; ".join(f"{', '.join(ks)} from {a}" for a, ks in by_action.items()))
    described = {k: v.strip() for k, v in parameters.items() if k not in derived and not from_task(v)}
    if described:
        lines.append("Placeholders: " + "; ".join(f"{{{k}}}: {v}" for k, v in described.items()))
    return lines


def loop_heads(w: Workflow) -> dict[int, str]:
    """The positions of the steps that begin a loop, each with the loop's head as a sentence
    ("For each {reservation_id} from get_user_details"): how every surface shows a loop."""
    out: dict[int, str] = {}
    for j, s in enumerate(w.steps):
        if s.repeat is not None and (j == 0 or w.steps[j - 1].repeat != s.repeat):
            head = s.repeat.says()
            out[j] = head[0].upper() + head[1:]
    return out


def render_trajectory(t: Trajectory) -> str:
    """A raw successful run as a memory (the baseline): the task and its calls."""
    lines = [f"Example: {t.task}"]
    lines += [f"{i}. {render_call(s.action, s.args)}" for i, s in enumerate(t.steps, 1)]
    return "\n".join(lines)


def subroutines_shown(memories: Sequence[Workflow | Trajectory]) -> dict[str, str]:
    """The sub-routines among memories shown together, id -> name (`render_workflow`'s `shown`)."""
    return {m.id: m.name for m in memories if isinstance(m, Workflow) and m.kind == "subroutine"}


def render_block(memories: Sequence[Workflow | Trajectory]) -> str:
    """Several memories, separated by blank lines; a workflow composed of a sub-routine that
    is among them refers to it by name (`render_workflow`'s `shown`)."""
    shown = subroutines_shown(memories)
    return "\n\n".join(
        render_workflow(m, shown=shown) if isinstance(m, Workflow) else render_trajectory(m) for m in memories
    )


def render_context(workflows: Sequence[Workflow]) -> str:
    """The block `WorkflowMemory.context` puts in an agent's instructions for the workflows it
    serves, best first: `CONTEXT_HEADER`, then `render_block`; "" when none is served. The
    dashboard shows the same text."""
    return CONTEXT_HEADER + render_block(workflows) if workflows else ""
