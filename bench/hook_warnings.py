"""What checking served pitfalls costs the recording hook: `run.step` p50 / p99 side by side.

Three hooks, measured alternately in one process (`--repeats` rounds of `--steps` calls each,
the median over rounds printed): this revision's `Run` with no pitfall served (the path every
run without checkable pitfalls takes), the same with two checkable pitfalls served that never
hold (every step is checked), and, with `--before PATH`, the `Run` of another revision's
`flowmem/agents/recording.py` (e.g. `git show main:flowmem/agents/recording.py > before.py`).

Usage: python bench/hook_warnings.py [--before PATH] [--steps N] [--repeats R]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from flowmem.agents import recording
from flowmem.models import Condition, Pitfall, Workflow, WorkflowStep

__all__ = ["load_recording", "main", "measure"]

WATCHED = Workflow(
    id="w",
    name="forward",
    steps=[WorkflowStep(action="mail.search")],
    pitfalls=[
        Pitfall(text="a", condition=Condition(kind="skips", action="contacts.lookup", other="mail.send")),
        Pitfall(text="b", condition=Condition(kind="missing_arg", action="mail.forward", arg="id")),
    ],
)
"""Two checkable pitfalls: one `mail.forward` triggers (and never meets), one it does not."""


def load_recording(path: Path) -> ModuleType:
    """Another revision's flowmem/agents/recording.py (at `path`) as a module."""
    spec = importlib.util.spec_from_file_location("flowmem_recording_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(module: Any, steps: int, *, watched: bool = False) -> tuple[float, float]:
    """`run.step` p50 and p99 in µs over `steps` calls of one run of `module.Run`."""
    run = module.Run(
        lambda r: None, id="x", task="forward the invoice to ana", agent="a", namespace="default"
    )
    if watched:
        run.watch(WATCHED)
    clock, times = time.perf_counter_ns, []
    for i in range(steps):
        start = clock()
        run.step("mail.forward", args={"id": i}, observation="ok")
        times.append(clock() - start)
    times.sort()
    return times[len(times) // 2] / 1000, times[int(len(times) * 0.99)] / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="another revision's flowmem/agents/recording.py")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    hooks: dict[str, tuple[Any, bool]] = {"no pitfall served": (recording, False)}
    hooks["two checkable pitfalls served"] = (recording, True)
    if args.before is not None:
        hooks["before"] = (load_recording(args.before), False)
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in hooks}
    for _ in range(args.repeats):
        for name, (module, watched) in hooks.items():
            found[name].append(measure(module, args.steps, watched=watched))
    p50 = {name: statistics.median(p for p, _ in v) for name, v in found.items()}
    print("| hook | step p50 (µs) | step p99 (µs) |\n|---|---:|---:|")
    for name, v in found.items():
        print(f"| {name} | {p50[name]:.3f} | {statistics.median(q for _, q in v):.3f} |")
    base = p50.get("before", p50["no pitfall served"])
    for name in hooks:
        if name != "before" and "before" in p50:
            print(f"{name} / before: p50 {p50[name] / base:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
