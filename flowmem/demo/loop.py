"""The demo: a simulated agent learns online from its own runs, with memory against without.

Each round, the same stream of simulated office tasks is solved twice on fresh copies of one
world: by the memory-less scripted agent (which explores), and by the same agent with
workflow memory (`FollowerAgent`: it follows a served workflow when one fits, else explores
exactly like the other). Only the memory arm's runs are recorded — through the
`WorkflowMemory` hooks, with the versions it was served — and between rounds a cycle (collect,
induce, learn; the Prefect `cycle` flow by default) turns them into workflows and folds the
outcomes into the versions' stats. The agent is scripted, not an LLM: see `flowmem.demo`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from flowmem.agents import WorkflowMemory
from flowmem.demo import NOW, ScriptedAgent, World, make_tasks, simulate
from flowmem.demo.follower import FollowerAgent
from flowmem.interchange import write_jsonl
from flowmem.jobs.cycle import CycleSummary
from flowmem.jobs.cycle import cycle as run_cycle
from flowmem.models import Trajectory, Workflow, WorkflowRef
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["Arm", "Cycle", "DemoReport", "Round", "generate_file", "plot", "run_loop"]

Cycle = Callable[[Store, Settings], CycleSummary]
"""Runs collect + induce + learn on the store; returns a summary (`flowmem.jobs.cycle.cycle`,
or the Prefect `cycle` flow)."""


def generate_file(path: Path, *, tasks: int, seed: int, skill: float) -> int:
    """Write the scripted agent's trajectories on `tasks` simulated tasks as JSONL."""
    return write_jsonl(path, simulate(tasks, seed=seed, skill=skill))


@dataclass(frozen=True)
class Arm:
    """How one agent fared on a round's tasks."""

    success_rate: float
    """Share of tasks whose goal check passed."""
    mean_steps: float
    """Tool calls per task (an orchestrator's delegations are not counted, its agents' are)."""

    def to_json(self) -> dict[str, float]:
        return {"success_rate": self.success_rate, "mean_steps": self.mean_steps}


@dataclass(frozen=True)
class Round:
    """One round: the same tasks with and without memory, and what memory held."""

    round: int
    with_memory: Arm
    without_memory: Arm
    followed: float
    """Share of the memory arm's (sub)task runs that followed a workflow to the end."""
    workflows: int
    """Workflows served at the start of the round."""

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "with_memory": self.with_memory.to_json(),
            "without_memory": self.without_memory.to_json(),
            "followed": self.followed,
            "workflows": self.workflows,
        }


@dataclass
class DemoReport:
    """Every round of a demo run, and where its store is."""

    db: str
    rounds: list[Round] = field(default_factory=list)
    cycles: list[CycleSummary] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"db": self.db, "rounds": [r.to_json() for r in self.rounds]}


def _arm(results: Sequence[list[Trajectory]]) -> Arm:
    ok = sum(bool(ts[0].success) for ts in results)
    calls = sum(len(t.steps) for ts in results for t in ts if t.agent != "orchestrator")
    return Arm(round(ok / len(results), 3), round(calls / len(results), 2))


def _record(memory: WorkflowMemory, t: Trajectory, used: Sequence[WorkflowRef]) -> None:
    """Store a run through the hooks, as a live agent's would be."""
    with memory.record(
        t.task, agent=t.agent, id=t.id, parent_id=t.parent_id, source=t.source, group=t.group, meta=t.meta
    ) as run:
        run.use(*used)
        for s in t.steps:
            run.step(s.action, s.args, observation=s.observation, thought=s.thought, error=s.error)
        run.finish(success=t.success, final_answer=t.final_answer, feedback=t.feedback)


SETTLE_LIMIT = 600.0
"""Seconds the demo waits for its writer before it gives up (a hang, not a slow machine)."""


def _settle(memory: WorkflowMemory) -> None:
    """Wait until the writer has stored every run, however slow the machine: the next task (or
    the cycle) must see them, or a loaded machine would give other figures."""
    deadline = time.monotonic() + SETTLE_LIMIT
    while not memory.flush():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the demo's store took over {SETTLE_LIMIT:.0f} s to take its runs")


def run_loop(
    settings: Settings,
    *,
    rounds: int = 8,
    tasks: int = 40,
    seed: int = 0,
    skill: float = 0.5,
    persistence: int = 3,
    cycle: Cycle = run_cycle,
    fresh: bool = True,
    progress: Callable[[Round], None] | None = None,
    on_task: Callable[[int, int, int], None] | None = None,
) -> DemoReport:
    """Run the learning loop on the settings' store (emptied first when `fresh`).

    Args:
        settings: Where the memory arm's runs and workflows live.
        rounds: How many rounds.
        tasks: Tasks per round (new tasks every round, from the same families).
        seed: Seed of the world, the tasks and both agents.
        skill: The agents' skill when they explore.
        persistence: How many look-ups a stuck agent repeats before giving up, at most.
        cycle: What runs between rounds.
        fresh: Delete the store directory first (only a local directory).
        progress: Called after each round.
        on_task: Called after each task with (round, tasks done in it, of them solved with
            memory).
    """
    if fresh and "://" not in settings.db:
        shutil.rmtree(settings.db, ignore_errors=True)
    world = World.generate(seed)
    report = DemoReport(db=settings.db)
    with WorkflowMemory(settings) as memory:

        def search(text: str, agent: str) -> list[tuple[Workflow, float]]:
            return [(h.workflow, h.similarity) for h in memory.search(text, k=3, agent=agent)]

        for r in range(1, rounds + 1):
            served = len({w.id for w in memory.index.served()})
            explorer = ScriptedAgent(seed, skill=skill, persistence=persistence)
            follower = FollowerAgent(seed, search, skill=skill, persistence=persistence)
            base, mine = [], []
            for i, task in enumerate(make_tasks(world, tasks, seed=seed * 1_000 + r)):
                tid, at = f"demo-{seed}-r{r}-{i:03d}", NOW + timedelta(minutes=r * 1_000 + i)
                base.append(explorer.solve_multi(task, world.copy(), trajectory_id=tid, created_at=at))
                runs = follower.solve_multi(task, world.copy(), trajectory_id=tid, created_at=at)
                for t in runs:
                    _record(memory, t, follower.used.get(t.id, []))
                # The next task is served what this one's outcome changed, whenever the writer
                # thread gets to it: the same rounds on a loaded machine as on an idle one.
                _settle(memory)
                mine.append(runs)
                if on_task is not None:
                    on_task(r, i + 1, sum(bool(ts[0].success) for ts in mine))
            _settle(memory)
            n_runs = sum(len(ts) - (ts[0].agent == "orchestrator") for ts in mine)
            done = Round(r, _arm(mine), _arm(base), round(len(follower.followed) / max(n_runs, 1), 3), served)
            report.rounds.append(done)
            if progress is not None:
                progress(done)
            if r < rounds:
                report.cycles.append(cycle(memory.store, settings))
    return report


def plot(report: DemoReport, path: Path) -> Path | None:
    """Save the learning curve (success rate and mean steps per round) as a PNG; None when
    matplotlib is not installed (`pip install 'flowmem[plot]'`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    xs = [r.round for r in report.rounds]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), constrained_layout=True)
    panels = ((left, "success_rate", "success rate"), (right, "mean_steps", "tool calls per task"))
    for ax, key, label in panels:
        ax.plot(xs, [getattr(r.with_memory, key) for r in report.rounds], "o-", label="with memory")
        ax.plot(xs, [getattr(r.without_memory, key) for r in report.rounds], "s--", label="without memory")
        ax.set_xlabel("round")
        ax.set_ylabel(label)
        ax.set_xticks(xs)
        ax.grid(alpha=0.3)
    left.set_ylim(0, 1.05)
    left.legend(loc="lower right")
    fig.suptitle("flowmem demo: a simulated agent learning from its own runs")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
