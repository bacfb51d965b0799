"""A scripted agent that follows retrieved workflows (the demo's agent with memory).

It stands in for an LLM agent given `memory.context(...)`: for each (sub)task it takes the
served workflows that fit (`memory.search`, the same call `context` makes), and replays the
first one it can apply — each `{placeholder}` filled from its task or from the result of an
earlier step — and judges nothing itself: the world's goal check says whether it worked. When
no workflow fits, or a replayed step fails in a way the workflow does not recover from, it
falls back to exploring like the memory-less `ScriptedAgent` (continuing on the same world).

How it fills placeholders, the only "understanding" it has:
- a value the workflow says comes from the task: the task's slot of the same name, or of a
  synonym (`query` is the subject, customer, title or name the task is about; `body` the
  message; `start` the date and time), i.e. what an LLM reads off the task text;
- a value that comes from the result of `action`: from the latest JSON listing that action
  returned, the n-th record (n from a `_n` suffix) — its `id` for an `..._id` placeholder,
  else its `email`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from flowmem.demo.agent import ScriptedAgent
from flowmem.demo.families import Task
from flowmem.demo.listings import ContactHit, listing_of
from flowmem.demo.runner import Run
from flowmem.demo.world import World
from flowmem.models import Repeat, Trajectory, Workflow, WorkflowRef

__all__ = ["FollowerAgent", "Search", "bind"]

Search = Callable[[str, str], Sequence[tuple[Workflow, float]]]
"""(task text, agent) -> served workflows with their similarity, best first."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SUFFIX = re.compile(r"^(.*?)_(\d+)$")
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "query": ("subject", "customer", "title", "name"),
    "body": ("message",),
    "duration_minutes": ("duration",),
    "title": ("title", "task_title"),
    "assignee": ("name",),
    "participant": ("name",),
    "rep": ("name",),
    "to": ("name",),
}


class _Unbound(Exception):
    """A placeholder the agent cannot fill."""


def _split(name: str) -> tuple[str, int]:
    m = _SUFFIX.match(name)
    return (m.group(1), int(m.group(2))) if m else (name, 1)


def _from_task(key: str, slots: Mapping[str, str]) -> str:
    if key == "start" and {"date", "time"} <= set(slots):
        return f"{slots['date']} {slots['time']}"
    for slot in (key, *_SYNONYMS.get(key, ())):
        if slot in slots:
            return slots[slot]
    raise _Unbound(key)


def _from_result(key: str, n: int, action: str, observation: str | None) -> str:
    records = listing_of(action, observation)
    if len(records) < n:
        raise _Unbound(key)
    record = records[n - 1]
    # An `..._id` takes the record's id, anything else a contact's address.
    if key.endswith("id"):
        found = None if isinstance(record, ContactHit) else record.id
    else:
        found = record.email if isinstance(record, ContactHit) else None
    if found is None:
        raise _Unbound(key)
    return found


def bind(
    workflow: Workflow,
    index: int,
    slots: Mapping[str, str],
    results: Mapping[str, str | None],
    nth: Mapping[str, int] = {},
) -> dict[str, Any]:
    """The arguments of step `index` of `workflow` for a task with these slots, given the
    latest observation of each action so far; `nth` gives a loop's placeholder the record of
    its pass (the n-th item of the result it comes from).

    Raises:
        _Unbound: if a placeholder cannot be filled.
    """
    step = workflow.steps[index]

    def value(name: str) -> str:
        key, n = _split(name)
        n = nth.get(name, n)
        source = workflow.parameters.get(name, "task")
        if source.startswith("result of "):
            action = source.removeprefix("result of ")
            return _from_result(key, n, action, results.get(action))
        return _from_task(key, slots)

    def argument(key: str, raw: Any) -> Any:
        if isinstance(raw, str) and _PLACEHOLDER.search(raw):
            whole = _PLACEHOLDER.fullmatch(raw)
            return value(whole.group(1)) if whole else _PLACEHOLDER.sub(lambda m: value(m.group(1)), raw)
        if key in slots:  # the task's own value beats an example's constant
            return slots[key]
        return raw

    return {key: argument(key, raw) for key, raw in step.args.items()}


def _applicable(workflow: Workflow, slots: Mapping[str, str]) -> bool:
    """Whether every task-sourced placeholder of the workflow can be filled from the task."""
    for name, source in workflow.parameters.items():
        if source.startswith("result of "):
            continue
        try:
            _from_task(_split(name)[0], slots)
        except _Unbound:
            return False
    return True


class FollowerAgent(ScriptedAgent):
    """A `ScriptedAgent` that first looks for a served workflow and follows it.

    Args:
        seed: Seed of the agent's choices when it explores.
        search: Where workflows come from: (task text, agent) -> [(workflow, similarity)].
        skill: The skill it explores with.
        persistence: How stubbornly it explores (see `ScriptedAgent`).
        min_similarity: The least similarity of a workflow it will consider.
    """

    def __init__(
        self,
        seed: int,
        search: Search,
        *,
        skill: float = 0.7,
        persistence: int = 0,
        min_similarity: float = 0.3,
    ) -> None:
        super().__init__(seed, skill=skill, persistence=persistence)
        self.search = search
        self.min_similarity = min_similarity
        self.used: dict[str, list[WorkflowRef]] = {}
        """Trajectory id -> the workflow versions it was served."""
        self.followed: dict[str, str] = {}
        """Trajectory id -> the id of the workflow it followed to the end."""

    def _run(
        self,
        task: Task,
        world: World,
        tid: str,
        start: datetime,
        parent_id: str | None = None,
        attempt: int = 0,
    ) -> tuple[Trajectory, bool]:
        hits = [(w, s) for w, s in self.search(task.text, task.agent) if s >= self.min_similarity]
        self.used[tid] = [WorkflowRef(id=w.id, version=w.version) for w, _ in hits]
        chosen = next((w for w, _ in hits if w.steps and _applicable(w, task.slots)), None)
        if chosen is None:
            return super()._run(task, world, tid, start, parent_id, attempt)
        run = Run(world, self._rng("agent", task.id, attempt), self.skill, start, self._rng("timing", tid))
        if self._replay(chosen, task.slots, run):
            self.followed[tid] = chosen.id
            answer = f"Followed workflow {chosen.name}."
            trajectory = self._trajectory(task, world, tid, start, parent_id, attempt, run.steps, answer)
            return trajectory, True
        # The workflow did not work out here: explore from where it left off.
        explored, reported = super()._run(task, world, tid, run.clock, parent_id, attempt)
        steps = [*run.steps, *explored.steps]
        return explored.model_copy(update={"steps": steps, "created_at": start}), reported

    def _replay(self, workflow: Workflow, slots: Mapping[str, str], run: Run) -> bool:
        """Call the workflow's steps in order, a loop's body once per item of the result its
        items come from (once for items from the task); False when a step cannot be filled
        or fails without a later retry of the same action in the workflow."""
        results: dict[str, str | None] = {}
        actions = [s.action for s in workflow.steps]
        i = 0
        while i < len(workflow.steps):
            body = _body(workflow, i)
            for nth in _passes(workflow.steps[i].repeat, results):
                for j in body:
                    step = workflow.steps[j]
                    try:
                        args = bind(workflow, j, slots, results, nth)
                    except _Unbound:
                        return False
                    observation = run.call(
                        step.action, args, step.note or f"Workflow step {j + 1}: {step.action}."
                    )
                    if observation is None and step.action not in actions[j + 1 :]:
                        return False
                    if observation is not None:
                        results[step.action] = observation
            i = body[-1] + 1
        return True


def _body(workflow: Workflow, i: int) -> list[int]:
    """The positions of the loop that starts at step `i` (the step alone when it is none)."""
    repeat = workflow.steps[i].repeat
    if repeat is None:
        return [i]
    end = i
    while end + 1 < len(workflow.steps) and workflow.steps[end + 1].repeat == repeat:
        end += 1
    return list(range(i, end + 1))


def _passes(repeat: Repeat | None, results: Mapping[str, str | None]) -> list[dict[str, int]]:
    """A loop's passes, each the record number of its item: one per record of the result its
    items come from; a single pass for a step, or for items from the task."""
    if repeat is None or not repeat.source.startswith("result of "):
        return [{}]
    action = repeat.source.removeprefix("result of ")
    records = listing_of(action, results.get(action))
    return [{repeat.over: n} for n in range(1, len(records) + 1)] or [{}]
