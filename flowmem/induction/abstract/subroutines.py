"""Sub-routines: the segments of one shape that recur across many different tasks (pure).

Every successful run of an agent is cut into intent segments (`induction/abstract/segments.py`);
segments with the same goal action and the same actions serving it (`segments.shape_of`) are
one sub-routine's examples, whatever task they came from. A group becomes an inducer's input
(`ClusterInput` of kind `subroutine`, whose runs are the segments) when its segments come from
at least `min_tasks` distinct tasks, and when it is part of larger runs: a group whose segment
is most often a whole run is what the task-level workflow of those runs already says.
Segments of failed runs with the same shape come along, for pitfalls.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence

from flowmem.induction.abstract.segments import Segment, segment, shape_of
from flowmem.induction.base import ClusterInput
from flowmem.induction.literals import LiteralIndex
from flowmem.models import Trajectory, Workflow

__all__ = ["Shape", "compose_workflows", "keeps_shape", "subroutine_inputs", "subroutine_key"]

Shape = tuple[str, tuple[str, ...]]


def subroutine_key(agent: str, shape: Shape) -> str:
    """A sub-routine's stable id: agent, goal action and a hash of the actions serving it
    (`agent-s-exchange_delivered_order_items-h3f9a1c`); the same shape keeps its id, and with
    it its versions and lineage, from one induction run to the next."""
    goal, actions = shape
    digest = hashlib.sha256("\x1f".join(actions).encode()).hexdigest()[:6]
    safe = re.sub(r"[^A-Za-z0-9_.:-]+", "_", agent)
    return f"{safe}-s-{re.sub(r'[^A-Za-z0-9_]+', '_', goal.rsplit('.', 1)[-1])}-h{digest}"


def _groups(runs: Sequence[Trajectory]) -> dict[Shape, list[Segment]]:
    groups: dict[Shape, list[Segment]] = defaultdict(list)
    for run in runs:
        for seg in segment(run):
            groups[shape_of(seg)].append(seg)
    return groups


def keeps_shape(
    shape: Shape,
    tasks: Sequence[str],
    *,
    whole: int,
    min_tasks: int,
    cluster_of: Mapping[str, int] | None,
) -> bool:
    """Whether a shape's segments of successful runs (`tasks`: each one's task text; `whole`:
    how many are a whole run) make a sub-routine (see `subroutine_inputs`)."""
    if len(shape[1]) < 2:
        return False  # one action: a tool call, which the agent's tool list describes already
    if len(set(tasks)) < min_tasks:
        return False
    if cluster_of is not None and len({cluster_of.get(t, -1) for t in tasks}) < 2:
        return False  # inside one kind of task only: that kind's workflow holds it already
    return whole * 2 < len(tasks)  # mostly whole runs: the task-level workflow says it


def subroutine_inputs(
    runs: Sequence[Trajectory],
    *,
    namespace: str,
    agent: str,
    literals: LiteralIndex,
    min_tasks: int,
    cluster_of: Mapping[str, int] | None = None,
) -> list[ClusterInput]:
    """The sub-routines of one agent's runs, ready for an inducer, by key. With `cluster_of`
    (task text -> its task cluster), a group must also span at least two task clusters."""
    ok = [t for t in runs if t.success is True and t.steps]
    failed = _groups([t for t in runs if t.success is False and t.steps])
    inputs = []
    for shape, segs in sorted(_groups(ok).items()):
        whole = sum(len(s.positions) == len(s.trajectory.steps) for s in segs)
        tasks = [s.trajectory.task for s in segs]
        if not keeps_shape(shape, tasks, whole=whole, min_tasks=min_tasks, cluster_of=cluster_of):
            continue
        inputs.append(
            ClusterInput(
                namespace,
                agent,
                -1,
                "subtask",
                [s.as_trajectory() for s in segs],
                [s.as_trajectory() for s in failed.get(shape, [])],
                literals,
                kind="subroutine",
                name=subroutine_key(agent, shape),
            )
        )
    return inputs


def compose_workflows(workflows: Sequence[Workflow], *, known: Sequence[Workflow] = ()) -> list[Workflow]:
    """Composition: in each task-level workflow, the steps that are one of its agent's
    sub-routines (the sub-routine's actions, two or more, as a contiguous run of its steps)
    are marked with the sub-routine's id (`WorkflowStep.subroutine`), longer sub-routines
    first, an occurrence never overlapping another nor directly following one of the same
    sub-routine (so each marked run is one occurrence). Marks are recomputed from scratch:
    a sub-routine neither among `workflows` nor `known` (those stored already, which a run
    did not induce again) leaves no mark. Sub-routines are unchanged."""
    subs: dict[tuple[str, str], list[Workflow]] = defaultdict(list)
    drafted = {w.id for w in workflows}
    for w in [*workflows, *(w for w in known if w.id not in drafted)]:
        if w.kind == "subroutine" and len(w.steps) >= 2:
            subs[(w.namespace, w.agent)].append(w)
    for found in subs.values():
        found.sort(key=lambda w: (-len(w.steps), w.id))
    out = []
    for w in workflows:
        if w.kind == "subroutine":
            out.append(w)
            continue
        actions = w.actions
        marks: list[str | None] = [None] * len(actions)
        for sub in subs.get((w.namespace, w.agent), []):
            want, n = sub.actions, len(sub.steps)
            i = 0
            while i + n <= len(actions):
                free = all(m is None for m in marks[i : i + n]) and (i == 0 or marks[i - 1] != sub.id)
                if free and actions[i : i + n] == want:
                    marks[i : i + n] = [sub.id] * n
                    i += n
                else:
                    i += 1
        if marks != [st.subroutine for st in w.steps]:
            steps = [st.model_copy(update={"subroutine": m}) for st, m in zip(w.steps, marks, strict=True)]
            w = w.model_copy(update={"steps": steps})
        out.append(w)
    return out
