"""The demo job at this stage: generate simulated trajectories, ingest them, induce workflows."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from flowmem.induction.rule import RuleInducer
from flowmem.ingest import IngestReport, ingest_files
from flowmem.interchange import write_jsonl
from flowmem.runner import RunReport, induce_namespace
from flowmem.settings import Settings
from flowmem.sim import simulate
from flowmem.storage import Store

__all__ = ["generate_file", "run_demo", "summarise"]


def generate_file(path: Path, *, tasks: int, seed: int, skill: float) -> int:
    """Write the scripted agent's trajectories on `tasks` simulated tasks as JSONL."""
    return write_jsonl(path, simulate(tasks, seed=seed, skill=skill))


def summarise(store: Store) -> list[dict[str, Any]]:
    """Per task family (`group`) and agent: runs, success rate and mean steps in the store."""
    acc: dict[tuple[str, str], list[tuple[bool, int]]] = defaultdict(list)
    for t in store.iter_trajectories():
        acc[(t.group or "-", t.agent)].append((bool(t.success), len(t.steps)))
    return [
        {
            "group": group,
            "agent": agent,
            "runs": len(items),
            "success_rate": round(sum(ok for ok, _ in items) / len(items), 3),
            "mean_steps": round(sum(n for _, n in items) / len(items), 2),
        }
        for (group, agent), items in sorted(acc.items())
    ]


def run_demo(
    settings: Settings, *, tasks: int = 300, seed: int = 0, skill: float = 0.7, workdir: Path | None = None
) -> tuple[Path, IngestReport, Store, RunReport]:
    """Generate demo trajectories into a file, ingest it into the configured store, and run
    the rule-based induction over the namespace."""
    path = (workdir or Path(".flowmem") / "demo") / f"sim-{seed}-{tasks}.jsonl.gz"
    generate_file(path, tasks=tasks, seed=seed, skill=skill)
    store = Store(settings)
    report = ingest_files([path], store, settings)
    return path, report, store, induce_namespace(store, settings, RuleInducer())
