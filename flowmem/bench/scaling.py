"""How each stage of the induction path grows with the number of trajectories (docs/scaling.md).

For each size, in one process on a fresh store: generate that many trajectories (`flowmem.demo`,
the demo's generator), then time
- embed: the offline embedder over their tasks (what ingest spends on vectors);
- ingest: storing them (scrub, embed, write; `flowmem.jobs.ingest.store_trajectories`);
- read: the induction's read of the namespace (`Store.list_trajectories`);
- cluster: fitting every agent's clusters (`plan_clusters`: PCA, HDBSCAN, sub-routine shapes);
- induce: the rule inducer over every cluster that changed;
- commit: assembling the drafts and the one LanceDB commit of the run (`commit_outcomes`);
and the growth of the process's peak RSS over its RSS before the ingest. Then the slope of each
stage between consecutive sizes: the exponent b in time ~ n^b (1 is linear). Stage times are
wall seconds of one run each, after a first run at 200 trajectories that pays the imports.

Usage: python bench/scaling.py [--sizes 1000,3000,10000,30000] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import tempfile
import time
from collections.abc import Callable
from typing import Any

from flowmem.demo import simulate
from flowmem.induction.rule import RuleInducer
from flowmem.jobs import induce as induce_job
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings
from flowmem.storage import Store

STAGES = ["embed", "ingest", "read", "cluster", "induce", "commit"]
TIMED = {"plan_clusters": "cluster", "induce_cluster": "induce", "commit_outcomes": "commit"}
"""The functions `flowmem.jobs.induce` calls by these names, each timed as that stage."""


def reset_peak() -> None:
    """Start the peak RSS (VmHWM) over from the current RSS (Linux: /proc/self/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def status_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def timed(spent: dict[str, float], stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - start

    return wrapper


def measure(n: int) -> dict[str, float]:
    trajectories = simulate(n, seed=n)
    spent: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=f"{tmp}/db")
        store = store_from(settings)
        store.prepare()
        gc.collect()
        reset_peak()
        before = status_mb("VmRSS")
        start = time.perf_counter()
        store.embedder.embed([t.task for t in trajectories])
        spent["embed"] = time.perf_counter() - start
        start = time.perf_counter()
        store_trajectories(store, trajectories, settings.scrub)
        spent["ingest"] = time.perf_counter() - start
        originals = {name: getattr(induce_job, name) for name in TIMED}
        patches = {name: timed(spent, stage, originals[name]) for name, stage in TIMED.items()}
        list_trajectories = Store.list_trajectories
        try:
            for name, fn in patches.items():
                setattr(induce_job, name, fn)
            Store.list_trajectories = timed(spent, "read", list_trajectories)  # type: ignore[method-assign]
            start = time.perf_counter()
            report = induce_job.run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
            spent["total_induce"] = time.perf_counter() - start
        finally:
            for name, fn in originals.items():
                setattr(induce_job, name, fn)
            Store.list_trajectories = list_trajectories  # type: ignore[method-assign]
        spent["workflows"] = float(len(report.versions))
        spent["peak_rss_growth_mb"] = status_mb("VmHWM") - before
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000,30000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, dict[str, float]] = {}
    measure(200)  # imports and first calls (sklearn, hdbscan) paid before any size is timed
    for n in sizes:
        results[n] = measure(n)
        if not args.json:
            row = "  ".join(f"{s} {results[n].get(s, 0.0):7.2f}" for s in STAGES)
            print(
                f"{n:>7} trajectories: {row}  (induce in all {results[n]['total_induce']:.2f} s, "
                f"{results[n]['workflows']:.0f} workflow versions; peak RSS "
                f"+{results[n]['peak_rss_growth_mb']:.0f} MB)",
                flush=True,
            )
    slopes = {
        f"{a}->{b}": {
            s: math.log(results[b][s] / results[a][s]) / math.log(b / a)
            for s in STAGES
            if results[a].get(s, 0) > 0 and results[b].get(s, 0) > 0
        }
        for a, b in zip(sizes, sizes[1:], strict=False)
    }
    if args.json:
        print(json.dumps({"stages_s": results, "slopes": slopes}, indent=1))
        return 0
    print("slope b in time ~ n^b between consecutive sizes:")
    for pair, by_stage in slopes.items():
        print(f"  {pair:>13}: " + "  ".join(f"{s} {b:.2f}" for s, b in by_stage.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
