"""Task families: paraphrased templates with named slots, slot samplers and goal checks.

Single-agent families are solved by one task agent (`email_agent`, `calendar_agent`,
`crm_agent`, `board_agent`). Multi-agent families (LEGOMem style) are solved by an
`orchestrator` that delegates one subtask per step, each subtask being a single-agent task.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from flowmem.demo import samplers
from flowmem.demo.checks import CHECKS
from flowmem.demo.samplers import Slots
from flowmem.demo.world import World

__all__ = ["FAMILIES", "MULTI_FAMILIES", "SINGLE_FAMILIES", "Family", "Task", "make_tasks"]

Sampler = Callable[[World, random.Random], Slots]
"""Draws a family's slot values from a world."""
Planner = Callable[[Mapping[str, str]], list[tuple[str, Slots]]]
"""Decomposes a multi-agent task's slots into [(single family, its slots)]."""


class Task(BaseModel):
    """One task instance: the text an agent gets, its slot values and how to check it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """Unique task id; subtasks are `{parent id}/{i}` (1-based)."""
    family: str
    """The family (template) the task was made from."""
    text: str
    """The natural-language instruction."""
    slots: dict[str, str]
    """Template values, i.e. exactly what an abstraction of the task must remove."""
    agent: str
    """The role that solves it: a task agent, or `orchestrator` for multi-agent tasks."""
    subtasks: list[Task] = Field(default_factory=list)
    """For a multi-agent task: the decomposition, one single-agent task per delegation."""

    @property
    def is_multi(self) -> bool:
        """Whether the task is solved by an orchestrator delegating subtasks."""
        return bool(self.subtasks)

    def diagnose(self, world_after: World) -> str | None:
        """Why `world_after` misses the goal, or None when the goal is reached."""
        for sub in self.subtasks:
            reason = sub.diagnose(world_after)
            if reason is not None:
                return f"subtask '{sub.text}': {reason}"
        if self.subtasks:
            return None
        return CHECKS[self.family](self.slots, world_after)

    def check(self, world_after: World) -> bool:
        """Whether the end state `world_after` reaches the goal of the task."""
        return self.diagnose(world_after) is None


@dataclass(frozen=True)
class Family:
    """A task family: paraphrases of one intent, with a slot sampler (and a plan if multi)."""

    name: str
    """The family name, also the `group` of its trajectories."""
    agent: str
    """The role that solves its tasks."""
    templates: tuple[str, ...]
    """Paraphrases of the same intent, with `{slot}` placeholders."""
    sample: Sampler
    """Draws the slot values from a world."""
    plan: Planner | None = None
    """For multi-agent families: slots -> [(single family, its slots)], in order."""

    @property
    def is_multi(self) -> bool:
        """Whether tasks of this family are delegated by an orchestrator."""
        return self.plan is not None


# -- families --------------------------------------------------------------------------------

SINGLE_FAMILIES: tuple[Family, ...] = (
    Family(
        "forward_latest",
        "email_agent",
        (
            "Forward the latest email about '{subject}' to {name}",
            "Send {name} the most recent email about '{subject}'",
            "Find the newest '{subject}' email and forward it to {name}",
        ),
        samplers.forward_latest,
    ),
    Family(
        "reply_latest",
        "email_agent",
        (
            "Reply to the latest email from {name} with '{message}'",
            "Answer {name}'s most recent email: '{message}'",
            "Write back to the newest message from {name} saying '{message}'",
        ),
        samplers.reply_latest,
    ),
    Family(
        "send_email",
        "email_agent",
        (
            "Send {name} an email with the subject '{subject}' saying '{message}'",
            "Email {name} about '{subject}': '{message}'",
            "Write to {name} with the subject '{subject}' and the message '{message}'",
        ),
        samplers.send_email,
    ),
    Family(
        "delete_from",
        "email_agent",
        (
            "Delete all emails from {name}",
            "Clear out every message {name} sent me",
            "Remove all of {name}'s emails from my inbox",
        ),
        samplers.delete_from,
    ),
    Family(
        "schedule_meeting",
        "calendar_agent",
        (
            "Schedule a {duration}-minute '{title}' with {name} on {date} at {time}",
            "Book '{title}' with {name} for {duration} minutes on {date} at {time}",
            "Put a {duration}-minute meeting '{title}' with {name} on my calendar, {date} at {time}",
        ),
        samplers.schedule_meeting,
    ),
    Family(
        "cancel_next",
        "calendar_agent",
        (
            "Cancel my next meeting with {name}",
            "Call off the upcoming meeting I have with {name}",
            "Remove my next scheduled meeting with {name} from the calendar",
        ),
        samplers.cancel_next,
    ),
    Family(
        "update_status",
        "crm_agent",
        (
            "Move {customer} to {status} in the CRM",
            "Set the CRM status of {customer} to {status}",
            "Mark {customer} as {status}",
        ),
        samplers.update_status,
    ),
    Family(
        "assign_rep",
        "crm_agent",
        (
            "Assign {customer} to {name}",
            "Make {name} the sales rep for {customer}",
            "Hand the {customer} account to {name} in the CRM",
        ),
        samplers.assign_rep,
    ),
    Family(
        "create_task",
        "board_agent",
        (
            "Create a task '{title}' for {name} due {due} on the {board} board",
            "Add '{title}' to the {board} board, assigned to {name}, due {due}",
            "Put a task '{title}' on the {board} board for {name} with due date {due}",
        ),
        samplers.create_task,
    ),
    Family(
        "complete_task",
        "board_agent",
        (
            "Mark the task '{title}' on the {board} board as done",
            "Close '{title}' on the {board} board",
            "Complete the {board} board task '{title}'",
        ),
        samplers.complete_task,
    ),
)
"""Families solved by a single task agent."""

MULTI_FAMILIES: tuple[Family, ...] = (
    Family(
        "onboard_customer",
        "orchestrator",
        (
            "Onboard {customer}: mark them won, assign them to {name}, and email {name} '{message}'",
            "{customer} signed! Set them to won in the CRM, make {name} their rep and send {name} "
            "the note '{message}'",
        ),
        samplers.onboard_customer,
        lambda s: [
            ("update_status", {"customer": s["customer"], "status": "won"}),
            ("assign_rep", {"customer": s["customer"], "name": s["name"]}),
            (
                "send_email",
                {"name": s["name"], "subject": f"New account: {s['customer']}", "message": s["message"]},
            ),
        ],
    ),
    Family(
        "account_handover",
        "orchestrator",
        (
            "Hand {customer} over to {name}: assign them in the CRM and forward {name} the latest "
            "email about '{subject}'",
            "{name} takes over {customer}. Update the rep in the CRM and send {name} the most "
            "recent '{subject}' email",
        ),
        samplers.account_handover,
        lambda s: [
            ("assign_rep", {"customer": s["customer"], "name": s["name"]}),
            ("forward_latest", {"subject": s["subject"], "name": s["name"]}),
        ],
    ),
    Family(
        "plan_meeting",
        "orchestrator",
        (
            "Book a {duration}-minute '{title}' with {name} on {date} at {time} and create a task "
            "'{task_title}' for {name} due {due} on the {board} board",
            "Set up '{title}' ({duration} minutes) with {name} for {date} {time}, then put "
            "'{task_title}' on the {board} board for {name}, due {due}",
        ),
        samplers.plan_meeting,
        lambda s: [
            ("schedule_meeting", {k: s[k] for k in ("duration", "title", "name", "date", "time")}),
            (
                "create_task",
                {"title": s["task_title"], "name": s["name"], "due": s["due"], "board": s["board"]},
            ),
        ],
    ),
    Family(
        "cancel_and_notify",
        "orchestrator",
        (
            "Cancel my next meeting with {name} and email them '{message}'",
            "Call off the upcoming meeting with {name}, then let {name} know: '{message}'",
        ),
        samplers.cancel_and_notify,
        lambda s: [
            ("cancel_next", {"name": s["name"]}),
            ("send_email", {"name": s["name"], "subject": "Meeting cancelled", "message": s["message"]}),
        ],
    ),
)
"""Families solved by an orchestrator delegating to two or three task agents."""

FAMILIES: dict[str, Family] = {f.name: f for f in (*SINGLE_FAMILIES, *MULTI_FAMILIES)}
"""Every family by name."""


def make_tasks(world: World, n: int, *, seed: int, families: Sequence[str] | None = None) -> list[Task]:
    """Make `n` solvable tasks whose slot values are drawn from `world`.

    Families are dealt in shuffled rounds, so every family appears once per round.

    Args:
        world: The world the tasks will run on (a copy of it each).
        n: How many tasks.
        seed: Seed of the random generator; the same seed gives equal tasks.
        families: Family names to draw from; all families by default.

    Returns:
        The tasks, with ids `task-{seed}-{i:05d}`.

    Raises:
        ValueError: An unknown family name, or a world that cannot supply a family's slots.
    """
    names = list(families) if families is not None else list(FAMILIES)
    unknown = [f for f in names if f not in FAMILIES]
    if unknown or not names:
        raise ValueError(f"unknown or no families: {unknown or names}")
    rng = random.Random(f"flowmem-sim-tasks:{seed}")
    order: list[str] = []
    tasks = []
    for i in range(n):
        if not order:
            order = rng.sample(names, len(names))
        family = FAMILIES[order.pop()]
        tasks.append(_make(family, family.sample(world, rng), f"task-{seed}-{i:05d}", rng))
    return tasks


def _make(family: Family, slots: Slots, task_id: str, rng: random.Random) -> Task:
    subtasks = []
    if family.plan is not None:
        for j, (name, sub_slots) in enumerate(family.plan(slots), start=1):
            subtasks.append(_make(FAMILIES[name], sub_slots, f"{task_id}/{j}", rng))
    text = rng.choice(family.templates).format(**slots)
    return Task(id=task_id, family=family.name, text=text, slots=slots, agent=family.agent, subtasks=subtasks)
