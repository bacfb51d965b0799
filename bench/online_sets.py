"""`flowmem eval --online` on the shared sets: flowmem against raw memory, batch by batch.

Each set is replayed in a fixed order (sorted by id, shuffled with `random.Random(seed)`), cut
into 6 batches; batch b is served by the memory induced incrementally from batches 1..b-1
(`flowmem.jobs.online`). Sets: WorkBench, all 4,197 runs; the tau2 retail runs — every retail
run of the oracle set (both splits: a replay has no split) and the agent runs of
`tau2_retail_agent_runs.jsonl.gz` (the runs its interchange accepts). Rule inducer, k=3,
offline. The last lines check the acceptance of issue 24: in each of batches 3-6, flowmem's
joint coverage and joint precision are at least raw's - 0.02.

Usage: python bench/online_sets.py [DATA_DIR] [--json] [--seed S] [--plot DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.evaluate import load
from flowmem.jobs.online import OnlineReport, evaluate_online, plot_curve
from flowmem.models import Trajectory, as_demonstration
from flowmem.settings import Settings

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.paths import SHARED_DATA

WORKBENCH = "workbench_trajectories.jsonl.gz"
ORACLE = "tau2_oracle_trajectories.jsonl.gz"
AGENT_RUNS = "tau2_retail_agent_runs.jsonl.gz"
BATCHES = 6
JUDGED_FROM = 3
"""The acceptance judges batches 3 on (batch 2's memory is one batch's runs)."""
TOLERANCE = 0.02
COLUMNS = (
    ("joint_coverage", "joint cov."),
    ("joint_precision", "joint prec."),
    ("coverage", "coverage"),
    ("utility_rate", "utility"),
    ("tokens_per_prompt", "tokens"),
    ("memories", "memories"),
)
"""The figures shown per batch: key, header."""


def sets(data: Path, settings: Settings) -> dict[str, list[Trajectory]]:
    """The sets to replay, by name (a set whose files are missing is skipped, with a note)."""
    out: dict[str, list[Trajectory]] = {}
    if (data / WORKBENCH).exists():
        out["workbench"] = load(data / WORKBENCH, settings)
    else:
        print(f"workbench: {data / WORKBENCH} not found, skipped", file=sys.stderr)
    if (data / ORACLE).exists() and (data / AGENT_RUNS).exists():
        oracle = [  # clean demonstrations, marked as `flowmem induce --from` marks them
            as_demonstration(t) for t in load(data / ORACLE, settings) if t.meta.get("domain") == "retail"
        ]
        out["tau2_retail"] = oracle + load(data / AGENT_RUNS, settings)
    else:
        print(f"tau2_retail: {data / ORACLE} or {data / AGENT_RUNS} not found, skipped", file=sys.stderr)
    return out


def verdict(report: OnlineReport) -> list[str]:
    """Where flowmem falls more than TOLERANCE below raw in the judged batches."""
    misses = []
    for b in report.batches:
        if b.batch < JUDGED_FROM:
            continue
        for key in ("joint_coverage", "joint_precision"):
            flow, raw = getattr(b.flowmem, key), getattr(b.raw, key)
            if flow < raw - TOLERANCE:
                misses.append(f"batch {b.batch} {key} {flow:.4f} < raw {raw:.4f} - {TOLERANCE}")
    return misses


def show(name: str, report: OnlineReport) -> None:
    inputs = report.inputs
    shape = f"{inputs.batches} batches, seed {inputs.seed}, k={inputs.k}"
    print(f"\n{name}: {inputs.runs} runs, {shape}")
    print(
        f"{'batch':>5}{'stored':>7}" + "".join(f"{header:>16}" for _, header in COLUMNS) + "   (flowmem/raw)"
    )
    for b in report.batches:
        cells = "".join(
            f"{str(getattr(b.flowmem, key)) + '/' + str(getattr(b.raw, key)):>16}" for key, _ in COLUMNS
        )
        print(f"{b.batch:>5}{b.memory_runs:>7}{cells}")
    misses = verdict(report)
    print(f"batches {JUDGED_FROM}-{inputs.batches}: " + ("; ".join(misses) or f"within {TOLERANCE} of raw"))
    print(f"timing (s): {report.timing.model_dump()}, total {report.timing.total:.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=SHARED_DATA)
    parser.add_argument("--json", action="store_true", help="Print one JSON object, by set.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--plot", type=Path, metavar="DIR", help="Save each set's curve as DIR/online_<set>.png."
    )
    args = parser.parse_args(argv)
    settings = Settings()
    results: dict[str, OnlineReport] = {}
    for name, runs in sets(args.data, settings).items():
        print(f"{name}: replaying {len(runs)} runs ...", file=sys.stderr)
        results[name] = evaluate_online(
            runs, RuleInducer(), settings=settings, batches=BATCHES, seed=args.seed
        )
        if args.plot:
            png = plot_curve(
                results[name], args.plot / f"online_{name}.png", title=f"flowmem eval --online, {name}"
            )
            print(f"{name}: curve {png}" if png else "no curve: matplotlib is not installed", file=sys.stderr)
    if args.json:
        print(json.dumps({name: report.model_dump(mode="json") for name, report in results.items()}))
        return 0
    for name, report in results.items():
        show(name, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
