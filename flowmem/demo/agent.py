"""A scripted, memory-less agent that solves simulated tasks and logs trajectories.

It stands in for an LLM agent exploring without workflow memory: it knows each family's
procedure but slips now and then (see `flowmem.demo.scripted`), so its trajectories mix
successes of varying length with failures, as online workflow induction expects.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict

from flowmem.demo.families import Task, make_tasks
from flowmem.demo.records import NOW
from flowmem.demo.runner import GiveUp, Run
from flowmem.demo.scripted import PROCEDURES
from flowmem.demo.world import World
from flowmem.models import Step, Trajectory

__all__ = ["SOURCE", "ScriptedAgent", "SimulatedMeta", "simulate"]

SOURCE = "flowmem-sim"
"""The `source` of every simulated trajectory."""


class SimulatedMeta(BaseModel):
    """What a simulated trajectory's `meta` records: the task it solved and the agent that ran."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    slots: dict[str, str]
    """The task's slot values (names, subjects, dates ...)."""
    family: str
    """The task's family."""
    seed: int
    """The agent's seed."""
    skill: float
    """The agent's skill."""
    task_id: str
    """The task's id."""
    attempt: int | None = None
    """A delegated run's attempt at its subtask (0 for the first); None for a top-level run."""
    subtasks: list[str] | None = None
    """An orchestrator's subtasks, in order; None for a single agent's run."""

    def to_meta(self) -> dict[str, Any]:
        """The trajectory's `meta` (JSON, stored with the run): the fields that are set."""
        return self.model_dump(exclude_none=True)


class ScriptedAgent:
    """Solves tasks through `World.call`, making skill-dependent mistakes.

    Args:
        seed: Seed of the agent's choices; with the same task and world, the same seed gives
            the same trajectory.
        skill: Between 0 and 1; at 1.0 the agent never slips, lower skill slips more often and
            recovers from errors less often.
    """

    def __init__(self, seed: int, *, skill: float = 0.7, persistence: int = 0) -> None:
        if not 0.0 <= skill <= 1.0:
            raise ValueError(f"skill must be within [0, 1], got {skill}")
        if persistence < 0:
            raise ValueError(f"persistence must be >= 0, got {persistence}")
        self.seed = seed
        self.skill = skill
        self.persistence = persistence
        """At a dead end, up to this many more look-ups before giving up (real agents flail:
        WorkBench's failed runs are 1.6x as long as its successful ones)."""

    def solve(
        self,
        task: Task,
        world: World,
        *,
        trajectory_id: str | None = None,
        created_at: datetime | None = None,
    ) -> Trajectory:
        """Solve a task on `world` (mutating it) and return the top-level trajectory.

        Args:
            task: The task; for a multi-agent task the orchestrator's run is returned.
            world: The world to act on, usually a fresh `World.copy()`.
            trajectory_id: The trajectory id; `task.id` by default.
            created_at: When the run starts; the simulated "now" by default.

        Returns:
            The trajectory, with `success` from the task's goal check.
        """
        return self.solve_multi(task, world, trajectory_id=trajectory_id, created_at=created_at)[0]

    def solve_multi(
        self,
        task: Task,
        world: World,
        *,
        trajectory_id: str | None = None,
        created_at: datetime | None = None,
    ) -> list[Trajectory]:
        """Solve a task and return every trajectory it produced.

        For a multi-agent task: the orchestrator's trajectory first, then one per delegation,
        with ids `{orchestrator id}/{i}` (1-based) and `parent_id` set. For a single-agent
        task: just its trajectory.

        Args:
            task: The task.
            world: The world to act on (mutated).
            trajectory_id: The (orchestrator's) trajectory id; `task.id` by default.
            created_at: When the run starts; the simulated "now" by default.

        Returns:
            The trajectories, top-level first.
        """
        tid = trajectory_id or task.id
        start = created_at or NOW
        if task.is_multi:
            return self._orchestrate(task, world, tid, start)
        return [self._run(task, world, tid, start)[0]]

    def _rng(self, kind: str, task_id: str, attempt: int = 0) -> random.Random:
        # String seeds hash deterministically (unlike hash()), independent of PYTHONHASHSEED.
        return random.Random(f"flowmem-sim-{kind}:{self.seed}:{task_id}:{attempt}")

    def _meta(
        self, task: Task, *, attempt: int | None = None, subtasks: list[str] | None = None
    ) -> SimulatedMeta:
        return SimulatedMeta(
            slots=dict(task.slots),
            family=task.family,
            seed=self.seed,
            skill=self.skill,
            task_id=task.id,
            attempt=attempt,
            subtasks=subtasks,
        )

    def _run(
        self,
        task: Task,
        world: World,
        tid: str,
        start: datetime,
        parent_id: str | None = None,
        attempt: int = 0,
    ) -> tuple[Trajectory, bool]:
        """Run a single-agent task; also return whether the agent *believes* it finished."""
        run = Run(
            world,
            self._rng("agent", task.id, attempt),
            self.skill,
            start,
            self._rng("timing", task.id, attempt),
        )
        try:
            answer, reported = PROCEDURES[task.family](run, task.slots), True
        except GiveUp as stop:
            answer, reported = f"I could not finish the task: {stop.reason}", False
            self._flail(run)
        trajectory = self._trajectory(task, world, tid, start, parent_id, attempt, run.steps, answer)
        return trajectory, reported

    def _trajectory(
        self,
        task: Task,
        world: World,
        tid: str,
        start: datetime,
        parent_id: str | None,
        attempt: int,
        steps: list[Step],
        answer: str,
    ) -> Trajectory:
        """A single-agent run's trajectory, its outcome from the world's goal check."""
        reason = task.diagnose(world)
        return Trajectory(
            id=tid,
            task=task.text,
            agent=task.agent,
            parent_id=parent_id,
            steps=steps,
            success=reason is None,
            final_answer=answer,
            feedback=reason,
            source=SOURCE,
            group=task.family,
            meta=(self._meta(task, attempt=attempt) if parent_id else self._meta(task)).to_meta(),
            created_at=start,
        )

    def _flail(self, run: Run) -> None:
        """Before giving up, repeat some of the run's look-ups (searches, reads) as a stuck
        agent does, `1..persistence` of them."""
        looks = [
            s for s in run.steps if s.action.split(".")[-1].startswith(("search", "find", "lookup", "read"))
        ]
        if not self.persistence or not looks:
            return
        for _ in range(1 + run.rng.randrange(self.persistence)):
            step = run.rng.choice(looks)
            run.call(step.action, dict(step.args), "Still stuck; look again for what is missing.")

    def _orchestrate(self, task: Task, world: World, tid: str, start: datetime) -> list[Trajectory]:
        rng = self._rng("orchestrator", task.id)
        plan = list(task.subtasks)
        if len(plan) > 1 and rng.random() < (1.0 - self.skill) * 0.4:
            plan = plan[:-1]  # overlooks the last part of a compound instruction
        steps: list[Step] = []
        subs: list[Trajectory] = []
        clock = start
        answer = "Done: " + "; ".join(s.text for s in plan) + "."
        for k, sub in enumerate(plan):
            attempt, finished = 0, False
            thought = (
                f"This needs {len(plan)} subtasks; first the {sub.agent}: {sub.text}."
                if k == 0
                else f"Next, the {sub.agent}: {sub.text}."
            )
            while not finished:
                sub_run, reported = self._run(
                    sub, world, f"{tid}/{len(subs) + 1}", clock, parent_id=tid, attempt=attempt
                )
                subs.append(sub_run)
                end = _end_of(sub_run) or clock + timedelta(seconds=1)
                steps.append(
                    Step(
                        action="delegate",
                        args={"agent": sub.agent, "subtask": sub.text},
                        thought=thought,
                        observation=sub_run.final_answer,
                        error=None if reported else f"{sub.agent} did not finish the subtask",
                        started_at=clock,
                        duration_ms=(end - clock).total_seconds() * 1000.0,
                    )
                )
                clock = end + timedelta(seconds=2)
                if reported:
                    finished = True
                elif attempt == 0 and rng.random() < self.skill:
                    attempt += 1
                    thought = f"The {sub.agent} failed; delegate the same subtask once more."
                else:
                    answer = f"I could not complete the task: '{sub.text}' failed."
                    break
            if not finished:
                break
        reason = task.diagnose(world)
        top = Trajectory(
            id=tid,
            task=task.text,
            agent=task.agent,
            steps=steps,
            success=reason is None,
            final_answer=answer,
            feedback=reason,
            source=SOURCE,
            group=task.family,
            meta=self._meta(task, subtasks=[s.text for s in task.subtasks]).to_meta(),
            created_at=start,
        )
        return [top, *subs]


def _end_of(trajectory: Trajectory) -> datetime | None:
    last = trajectory.steps[-1] if trajectory.steps else None
    if last is None or last.started_at is None:
        return None
    return last.started_at + timedelta(milliseconds=last.duration_ms or 0.0)


def simulate(n: int, *, seed: int = 0, skill: float = 0.7) -> list[Trajectory]:
    """Generate a world and `n` tasks, solve each on a fresh copy, return all trajectories.

    Deterministic: ids are `sim-{seed}-{i:05d}` (sub-runs `sim-{seed}-{i:05d}/{j}`) and task `i`
    starts `i` seconds after the simulated "now", so equal arguments give equal lists.

    Args:
        n: How many tasks (multi-agent tasks contribute several trajectories).
        seed: Seed of the world, the tasks and the agent.
        skill: The agent's skill, between 0 and 1.

    Returns:
        The trajectories, task by task (an orchestrator's run before its sub-runs).
    """
    world = World.generate(seed)
    agent = ScriptedAgent(seed, skill=skill)
    out: list[Trajectory] = []
    for i, task in enumerate(make_tasks(world, n, seed=seed)):
        out.extend(
            agent.solve_multi(
                task, world.copy(), trajectory_id=f"sim-{seed}-{i:05d}", created_at=NOW + timedelta(seconds=i)
            )
        )
    return out
