"""What durable hooks cost: `run.finish` latency with and without FLOWMEM_DURABLE.

One agent thread records `--runs` runs of `--steps` steps each through `WorkflowMemory` on a
fresh local store (the background writer storing meanwhile, default batch settings) and times
`run.finish(...)` called outside a `record` block, so that the figure includes the hand-over to
the writer and, in durable mode, building the trajectory, scrubbing it and appending it to the
journal with an fsync. `run.step` is timed too: durable mode must not touch it. Each mode runs
`--repeats` times, alternating; printed: p50 / p99 per mode (the median over repeats) and the
ratio.

Usage: python bench/hook_durable.py [--runs 2000] [--steps 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from flowmem import Settings, WorkflowMemory


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(root: Path, *, durable: bool, runs: int, steps: int) -> tuple[list[float], list[float]]:
    """(finish latencies, step latencies) in microseconds."""
    memory = WorkflowMemory.open(Settings(db=str(root / "db"), durable=durable))
    finish, step = [], []
    try:
        for i in range(runs):
            run = memory.record(f"Forward the latest email about topic {i} to olga", id=f"r{i}")
            for j in range(steps):
                t0 = time.perf_counter()
                run.step("email.search_emails", {"query": f"topic {i}", "page": j}, observation="[e1, e2]")
                step.append((time.perf_counter() - t0) * 1e6)
            t0 = time.perf_counter()
            run.finish(success=i % 3 != 0, final_answer="done")
            finish.append((time.perf_counter() - t0) * 1e6)
        memory.flush()
        assert memory.store.count_trajectories() == runs
    finally:
        memory.close()
    return finish, step


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    figures: dict[bool, list[tuple[float, float, float, float]]] = {False: [], True: []}
    for repeat in range(args.repeats):
        for durable in (False, True):
            with tempfile.TemporaryDirectory(prefix=f"hook-durable-{repeat}-") as tmp:
                finish, step = measure(Path(tmp), durable=durable, runs=args.runs, steps=args.steps)
            figures[durable].append(
                (_quantile(finish, 0.5), _quantile(finish, 0.99), _quantile(step, 0.5), _quantile(step, 0.99))
            )
    print(f"{args.runs} runs x {args.steps} steps, median of {args.repeats} repeats, microseconds")
    print("| mode | finish p50 | finish p99 | step p50 | step p99 |")
    print("|---|---|---|---|---|")
    medians = {}
    for durable, rows in figures.items():
        medians[durable] = [statistics.median(col) for col in zip(*rows, strict=True)]
        name = "durable" if durable else "default"
        cells = " | ".join(f"{v:,.0f}" if v >= 10 else f"{v:.1f}" for v in medians[durable])
        print(f"| {name} | {cells} |")
    ratio = [d / n for d, n in zip(medians[True], medians[False], strict=True)]
    print(f"durable / default: finish p50 {ratio[0]:.0f}x, p99 {ratio[1]:.0f}x; step p50 {ratio[2]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
