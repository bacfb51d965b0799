"""`flowmem eval` on the shared sets, flowmem against raw trajectories, side by side.

WorkBench is split by `meta.instance` (0-6 train, 7-9 test, as bench/workbench_split.py does),
the tau2 oracle set by `meta.split`. The tau2 retail agent runs (`tau2_agents`): train on the
oracle set's retail train runs, then the agent runs of train tasks (in file order, oracle runs
first); test on the agent runs of test tasks. Rule inducer, k=3, offline.

Usage: python bench/eval_sets.py [DATA_DIR] [--json]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.evaluate import EvalReport, evaluate
from flowmem.models import Trajectory, as_demonstration
from flowmem.settings import Settings

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.paths import SHARED_DATA

SPLITS: dict[str, tuple[str, Callable[[Trajectory], bool]]] = {
    "workbench": ("workbench_trajectories.jsonl.gz", lambda t: t.meta["instance"] <= 6),
    "tau2": ("tau2_oracle_trajectories.jsonl.gz", lambda t: t.meta["split"] == "train"),
}
KEYS = (
    "coverage",
    "step_precision",
    "joint_coverage",
    "joint_precision",
    "utility_rate",
    "tokens_per_prompt",
    "leakage",
    "slot_leakage",
    "slot_values_checked",
    "redundancy",
    "redundancy_pairs",
    "described",
    "memories",
    "scored_test_runs",
    "served_nothing",
    "rejected_clusters",
)


def agent_split(data: Path, settings: Settings) -> tuple[list[Trajectory], list[Trajectory]] | None:
    """The retail agent runs' split: oracle retail train runs + agent train runs / agent test runs."""
    oracle, agents = data / SPLITS["tau2"][0], data / AGENT_RUNS
    if not (oracle.exists() and agents.exists()):
        return None
    demos = [  # clean demonstrations, marked as `flowmem induce --from` marks them
        as_demonstration(t)
        for t in read_trajectories(oracle, settings)
        if not isinstance(t, Rejection) and t.meta.get("domain") == "retail" and t.meta["split"] == "train"
    ]
    runs = [t for t in read_trajectories(agents, settings) if not isinstance(t, Rejection)]
    train = demos + [t for t in runs if t.meta["split"] == "train"]
    return train, [t for t in runs if t.meta["split"] == "test"]


AGENT_RUNS = "tau2_retail_agent_runs.jsonl.gz"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = [a for a in argv if not a.startswith("--")]
    data = Path(args[0]) if args else SHARED_DATA
    settings = Settings()
    results: dict[str, EvalReport] = {}
    for name, (file, is_train) in SPLITS.items():
        path = data / file
        if not path.exists():
            print(f"{name}: {path} not found, skipped", file=sys.stderr)
            continue
        runs = [t for t in read_trajectories(path, settings) if not isinstance(t, Rejection)]
        train: list[Trajectory] = [t for t in runs if is_train(t)]
        test = [t for t in runs if not is_train(t)]
        results[name] = evaluate(train, test, RuleInducer(), settings=settings, k=3)
    agents = agent_split(data, settings)
    if agents is None:
        print(f"tau2_agents: {data / AGENT_RUNS} or the oracle set not found, skipped", file=sys.stderr)
    else:
        results["tau2_agents"] = evaluate(*agents, RuleInducer(), settings=settings, k=3)
    if "--json" in argv:
        print(json.dumps({name: report.model_dump(mode="json") for name, report in results.items()}))
        return 0
    for name, report in results.items():
        print(f"\n{name}: train {report.inputs.train}, test {report.inputs.test}, k=3")
        print(f"{'metric':<24}{'flowmem':>12}{'raw':>12}")
        figures, raw_figures = report.flowmem.model_dump(), report.raw.model_dump()
        for key in [*KEYS, *(k for k in figures if k not in KEYS)]:
            flow, raw = figures.get(key, ""), raw_figures.get(key, "")
            print(f"{key:<24}{flow!s:>12}{raw!s:>12}")
        timing = report.timing
        print(f"timing (s): {timing.model_dump()}, total {timing.total:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
