"""Intent segments: a trajectory cut into the sub-routines it is made of (pure).

A long run does several things — look a customer up, check an order, exchange two items, then
refund another. Each *change* (a state-changing action) is the goal of one segment, together
with the *reads* that serve it: the look-ups since the previous change, and any earlier
look-up whose arguments name the same thing (the same order id). A look-up that serves several
later changes (identifying the customer, say) becomes a segment of its own, so every task
that starts the same way shares it. Consecutive calls of the same change (one per item) are
one segment: a loop. A run that changes nothing is one segment whose goal is its last step.

Which actions are reads is decided from the action's name: its verb (the first word of its
last dotted part) is one of the verbs tool APIs use for looking things up (`READ_VERBS`). The
list is about how tools are named, not about any data set; an action it misclassifies only
moves a segment boundary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from flowmem.induction.literals import MIN_CHARS, scalars
from flowmem.models import Trajectory

__all__ = ["READ_VERBS", "Segment", "is_read", "segment", "segments_of", "shape_of"]

READ_VERBS = frozenset(
    {
        "get", "find", "search", "list", "lookup", "look", "read", "fetch", "query", "check",
        "view", "show", "describe", "retrieve", "count", "calculate", "compute", "browse",
        "inspect", "preview", "load", "peek", "see",
    }
)  # fmt: skip
"""Verbs of look-up tools: a call whose action starts with one changes nothing."""

_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _verb(action: str) -> str:
    last = action.rsplit(".", 1)[-1]
    words = _WORDS.findall(last)
    return words[0].lower() if words else last.lower()


def is_read(action: str) -> bool:
    """Whether an action only looks something up (by its verb, see `READ_VERBS`)."""
    return _verb(action) in READ_VERBS


@dataclass(frozen=True)
class Segment:
    """One intent of a trajectory: a goal step and the steps that serve it."""

    trajectory: Trajectory
    """The run it was cut from."""
    positions: tuple[int, ...]
    """Positions of its steps in the run, ascending."""
    goal: int
    """Position of the goal step (a change, or the last step of a run without one)."""
    shared: bool = False
    """True for look-ups that serve several later changes (a segment without a change)."""

    @property
    def actions(self) -> list[str]:
        """The action names of its steps, in order."""
        return [self.trajectory.steps[i].action for i in self.positions]

    @property
    def goal_action(self) -> str:
        """The action of its goal step."""
        return self.trajectory.steps[self.goal].action

    def as_trajectory(self) -> Trajectory:
        """The segment as a run of its own (id `<run id>#<goal>`), for an inducer."""
        steps = [self.trajectory.steps[i] for i in self.positions]
        return self.trajectory.model_copy(update={"id": f"{self.trajectory.id}#{self.goal}", "steps": steps})


def _values(trajectory: Trajectory, i: int) -> set[str]:
    return {v.lower() for v in scalars(trajectory.steps[i].args) if len(v) >= MIN_CHARS}


def _feeds(trajectory: Trajectory, read: int, change: int) -> bool:
    """Data flow: the change names something the read named, or something the read returned."""
    wanted = _values(trajectory, change)
    if not wanted:
        return False
    if wanted & _values(trajectory, read):
        return True
    seen = (trajectory.steps[read].observation or "").lower()
    return bool(seen) and any(v in seen for v in wanted)


def _goals(trajectory: Trajectory) -> tuple[list[int], list[int]]:
    """The positions of the run's changes, and of the goals among them."""
    steps = trajectory.steps
    changes = [i for i, s in enumerate(steps) if not is_read(s.action)]
    # A run of the same change one call after another is one loop: its first call is the goal.
    goals = [i for i in changes if i == 0 or steps[i - 1].action != steps[i].action or i - 1 not in changes]
    return changes, goals


def _loops(
    trajectory: Trajectory, changes: list[int], goals: list[int]
) -> tuple[dict[int, list[int]], dict[int, int]]:
    """Each goal's loop (its calls of the same change before the next goal), and the goal of
    every change."""
    steps = trajectory.steps
    loop_of: dict[int, list[int]] = {}
    goal_of: dict[int, int] = {}
    for g_index, goal in enumerate(goals):
        end = goals[g_index + 1] if g_index + 1 < len(goals) else len(steps)
        same = steps[goal].action
        loop_of[goal] = [i for i in range(goal, end) if i in changes and steps[i].action == same]
        goal_of.update({i: goal for i in range(goal, end) if i in changes})
    return loop_of, goal_of


def _shared(reads: list[int], fed: dict[int, list[int]], goals: list[int]) -> list[int]:
    """The reads that serve several goals: those that feed more than one, and, when the run
    has several goals, the look-ups it opens with that feed none visibly (identifying the
    customer, whose id the record does not show)."""
    preamble = []
    for i in reads:
        if i > goals[0] or fed[i]:
            break
        preamble.append(i)
    return [i for i in reads if len(fed[i]) > 1 or (len(goals) > 1 and i in preamble)]


def _with_tail(trajectory: Trajectory, segments: list[Segment], changes: list[int], last_goal: int) -> None:
    """Reads after the last change (a final check) join the last segment, in place."""
    tail = [i for i in range(last_goal + 1, len(trajectory.steps)) if i not in changes]
    if tail:
        last = segments[-1]
        segments[-1] = Segment(trajectory, tuple(sorted({*last.positions, *tail})), last.goal)


def _fed(trajectory: Trajectory, goals: list[int], goal_of: dict[int, int]) -> dict[int, list[int]]:
    """The reads before the last goal, in order, each with the goals of the changes it feeds."""
    reads = [i for i in range(goals[-1]) if i not in goal_of]
    return {i: sorted({goal_of[c] for c in goal_of if c > i and _feeds(trajectory, i, c)}) for i in reads}


def _by_goal(
    trajectory: Trajectory, goals: list[int], loop_of: dict[int, list[int]], fed: dict[int, list[int]]
) -> list[Segment]:
    """The shared look-ups' segment (if any), then one segment per goal: its loop and the reads
    that serve it alone (a read that feeds no change serves the next goal)."""
    reads = list(fed)
    shared = _shared(reads, fed, goals)
    segments: list[Segment] = []
    if shared:
        segments.append(Segment(trajectory, tuple(shared), shared[-1], shared=True))
    owner = {i: fed[i] or [next(g for g in goals if g > i)] for i in reads if i not in shared}
    for goal in goals:
        own = [i for i, served in owner.items() if served == [goal]]
        segments.append(Segment(trajectory, tuple(sorted({*own, *loop_of[goal]})), goal))
    return segments


def segment(trajectory: Trajectory) -> list[Segment]:
    """Cut a run into intent segments (see the module docstring); failed calls stay in."""
    steps = trajectory.steps
    if not steps:
        return []
    changes, goals = _goals(trajectory)
    if not goals:
        return [Segment(trajectory, tuple(range(len(steps))), len(steps) - 1)]
    loop_of, goal_of = _loops(trajectory, changes, goals)
    segments = _by_goal(trajectory, goals, loop_of, _fed(trajectory, goals, goal_of))
    _with_tail(trajectory, segments, changes, goals[-1])
    return sorted(segments, key=lambda s: s.positions[0])


def shape_of(seg: Segment) -> tuple[str, tuple[str, ...]]:
    """What makes two segments the same sub-routine: the goal action and the distinct actions
    that serve it, in order of first use (repeats of a look-up are one)."""
    seen: list[str] = []
    for action in seg.actions:
        if action not in seen:
            seen.append(action)
    return seg.goal_action, tuple(seen)


def segments_of(trajectories: Sequence[Trajectory]) -> list[Segment]:
    """Every segment of every run with steps."""
    return [s for t in trajectories for s in segment(t)]
