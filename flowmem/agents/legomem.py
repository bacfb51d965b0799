"""LEGOMem roles: full-task memories for an orchestrator, subtask memories for task agents.

An orchestrator's runs induce `task`-scope workflows (plans: which agent does which subtask);
task agents' runs induce `subtask`-scope workflows. A task agent gets its memories by one of
three strategies:

- `vanilla`: the subtask workflows of that agent that were induced from the sub-runs of the
  retrieved plans' own runs (what the agent did when those plans were carried out);
- `dynamic`: a search of that agent's subtask workflows with the subtask text, just in time;
- `rewrite`: draft the plan up front from the retrieved plans — here from the nearest past run
  of the best plan (no LLM): its subtask texts for this agent — and search per drafted subtask.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from flowmem.agents.memory_like import MemoryLike
from flowmem.retrieval.nearest import snap_cosines
from flowmem.retrieval.search import Hit
from flowmem.storage.listings import subtask_ids

__all__ = ["Strategy", "for_agent", "for_orchestrator"]

Strategy = Literal["vanilla", "dynamic", "rewrite"]


def for_orchestrator(memory: MemoryLike, task: str, k: int = 5) -> list[Hit]:
    """Full-task memories (plans) for an orchestrator's task."""
    return memory.search(task, k, scope="task")


def _vanilla(memory: MemoryLike, agent: str, plans: Sequence[Hit], k: int) -> list[Hit]:
    """The agent's subtask workflows induced from the sub-runs of the plans' runs, by how many
    of those sub-runs each was induced from. The sub-runs are looked up by their parents' ids
    and the served versions' source runs read from their column: neither every run of the
    agent nor every served `Workflow` is read per call."""
    ns = memory.settings.namespace
    plan_runs = {i for h in plans for i in h.workflow.source_trajectory_ids}
    by_parent = subtask_ids(memory.store, sorted(plan_runs), namespace=ns, agent=agent)
    children = {child for ids in by_parent.values() for child in ids}
    drawn = memory.index_of(ns).drawn_from(children, agent=agent, scope="subtask")
    found = [Hit(w, float(overlap), 0.0) for w, overlap in drawn]
    return sorted(found, key=lambda h: (-h.score, h.workflow.id))[:k]


def _drafted_subtasks(memory: MemoryLike, agent: str, task: str, plans: Sequence[Hit]) -> list[str]:
    """The subtasks the agent got in the past run nearest to the task, among the best plan's runs."""
    if not plans:
        return []
    ns = memory.settings.namespace
    runs = memory.store.get_trajectories(plans[0].workflow.source_trajectory_ids[:50], namespace=ns)
    if not runs:
        return []
    vectors = memory.store.embedder.embed([task, *(r.task for r in runs)])
    nearest = runs[int(snap_cosines(vectors[1:] @ vectors[0]).argmax())]  # the first of equals
    return [
        str(s.args["subtask"])
        for s in nearest.steps
        if s.args.get("agent") == agent and isinstance(s.args.get("subtask"), str)
    ]


def for_agent(
    memory: MemoryLike,
    agent: str,
    subtask: str,
    k: int = 3,
    *,
    strategy: Strategy = "dynamic",
    task: str | None = None,
) -> list[Hit]:
    """Subtask memories for a task agent (see the module docstring for the strategies).

    `task` is the orchestrator's full task; `vanilla` and `rewrite` need it (without it they
    fall back to `dynamic`).
    """
    if strategy == "dynamic" or task is None:
        return memory.search(subtask, k, agent=agent, scope="subtask")
    plans = for_orchestrator(memory, task)
    if strategy == "vanilla":
        return _vanilla(memory, agent, plans, k)
    hits: dict[str, Hit] = {}
    for drafted in [*_drafted_subtasks(memory, agent, task, plans), subtask]:
        for h in memory.search(drafted, k, agent=agent, scope="subtask"):
            if h.workflow.id not in hits or h.score > hits[h.workflow.id].score:
                hits[h.workflow.id] = h
    return sorted(hits.values(), key=lambda h: (-h.score, h.workflow.id))[:k]
