"""How each stage of the induction path grows with the number of trajectories (docs/scaling.md).

For each size (a number of trajectories), on a fresh store in a directory of its own:
- generate that many trajectories (`flowmem.demo.simulate`, in chunks of `--chunk` tasks, each
  chunk a world of its own seed) and store them (`store_trajectories`: scrub, embed, write),
  timed as `ingest` (the generator's own time apart, as `generate`);
- run a full induction in a fresh process (`python -m flowmem.bench.scaling --child DB`), which
  times its stages and its peak RSS:
  - read: the namespace read in batches of columns, the literal index and the sub-routine
    segments (`induction.bounded.scan`);
  - cluster: every agent's fit on its sample and the placement of the other texts
    (`bounded.fit_namespace`);
  - load: the clusters' runs read by id (`storage.scans.trajectories_by_id`);
  - induce: the rule inducer over every cluster (`induce_cluster`);
  - commit: assembling the drafts and the one LanceDB commit of the run (`commit_outcomes`);
  and reports `peak_rss_growth_mb`: its peak RSS (VmHWM) less its RSS once imported;
- with `--incremental`, store 1% more trajectories and time `flowmem induce` in a fresh process
  against the full run's process (both wall seconds, start to exit).
Then the slope of each stage between consecutive sizes: the exponent b in time ~ n^b.

`--agreement FILE,... --samples 500,1000` instead measures what fitting on a sample changes
(`induction.bounded.fit_texts`): for each trajectory file (or `sim:N`, N simulated tasks) and
each agent with more distinct task texts than a sample size, the adjusted Rand index between
each run's cluster fitted on every text and fitted on the sample (the others placed), over the
runs; and, where runs carry their group, each fit's ARI and NMI against the groups.

Usage: python bench/scaling.py [--sizes 100000,300000] [--incremental] [--json] [--dir DIR]
       python bench/scaling.py --agreement ../shared/data/workbench_trajectories.jsonl.gz,sim:20000
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAGES = ["generate", "ingest", "read", "cluster", "load", "induce", "commit"]
TIMED = {
    "scan": "read",
    "fit_namespace": "cluster",
    "trajectories_by_id": "load",
    "induce_cluster": "induce",
    "commit_outcomes": "commit",
}
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


def timed(
    spent: dict[str, float], stage: str, fn: Callable[..., Any], peaks: dict[str, float] | None = None
) -> Callable[..., Any]:
    """`fn`, adding its wall seconds to `spent[stage]` (and the peak RSS after it to `peaks`)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - start
            if peaks is not None:
                peaks.setdefault(stage, status_mb("VmHWM"))  # the peak once the stage first ran

    return wrapper


def _env(db: str) -> dict[str, str]:
    return {**os.environ, "FLOWMEM_DB": db, "LANCEDB_LOG": "error"}


def fill(db: str, n: int, *, seed: int, chunk: int) -> dict[str, float]:
    """Store `n` simulated trajectories in `db`, a chunk of tasks (a world of its own) at a
    time; the generator's time and the store's apart."""
    from flowmem.demo import simulate
    from flowmem.jobs.factories import store_from
    from flowmem.jobs.ingest import store_trajectories
    from flowmem.settings import Settings

    settings = Settings(db=db)
    store = store_from(settings)
    store.prepare()
    spent = {"generate": 0.0, "ingest": 0.0}
    stored, k = 0, 0
    while stored < n:
        start = time.perf_counter()
        runs = simulate(chunk, seed=seed * 100_000 + k)[: n - stored]
        spent["generate"] += time.perf_counter() - start
        start = time.perf_counter()
        store_trajectories(store, runs, settings.scrub)
        spent["ingest"] += time.perf_counter() - start
        stored, k = stored + len(runs), k + 1
        del runs
        gc.collect()
    return spent


def child(db: str) -> dict[str, float]:
    """One full induction of the store at `db` in this (fresh) process, timed by stage."""
    from flowmem.induction.cluster import cluster_tasks
    from flowmem.induction.rule import RuleInducer
    from flowmem.jobs import induce as induce_job
    from flowmem.jobs.factories import store_from
    from flowmem.settings import Settings

    settings = Settings(db=db)
    store = store_from(settings)
    store.count_trajectories(namespace=settings.namespace)  # the store opened before the peak starts
    cluster_tasks(["warm up", "the imports", "of a fit"])  # sklearn and hdbscan imported, not timed
    gc.collect()
    reset_peak()
    before = status_mb("VmRSS")
    spent: dict[str, float] = {}
    peaks: dict[str, float] = {}
    for name, stage in TIMED.items():
        setattr(induce_job, name, timed(spent, stage, getattr(induce_job, name), peaks))
    start = time.perf_counter()
    report = induce_job.run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    spent["total_induce"] = time.perf_counter() - start
    spent["workflows"] = float(len(report.versions))
    spent["clusters"] = float(len(report.plan.fingerprints))
    spent["trajectories"] = float(report.plan.total)
    spent["peak_rss_growth_mb"] = status_mb("VmHWM") - before
    for stage, peak in peaks.items():  # where the peak was reached
        spent[f"peak_after_first_{stage}_mb"] = peak - before
    spent["rss_before_mb"] = before
    return spent


def _wall(cmd: list[str], db: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=_env(db), capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done.stdout


def measure(n: int, *, root: str, chunk: int, incremental: bool) -> dict[str, float]:
    db = str(Path(root) / f"db-{n}")
    done = Path(db + ".filled")
    spent = json.loads(done.read_text()) if done.exists() else fill(db, n, seed=n % 9973, chunk=chunk)
    done.write_text(json.dumps(spent))  # a store kept in --dir is filled once
    wall, out = _wall([sys.executable, "-m", "flowmem.bench.scaling", "--child", db], db)
    spent.update(json.loads(out.strip().splitlines()[-1]))
    spent["full_process_s"] = wall
    if incremental:
        added = fill(db, max(1, n // 100), seed=n % 9973 + 1, chunk=chunk)
        spent["incremental_ingest_s"] = added["ingest"]
        cli = str(Path(sys.executable).with_name("flowmem"))
        spent["incremental_process_s"], _ = _wall([cli, "induce"], db)
        spent["incremental_ratio"] = spent["incremental_process_s"] / wall
    return spent


def _runs(source: str) -> list[Any]:
    from flowmem.demo import simulate
    from flowmem.interchange.jsonl import read_trajectories
    from flowmem.models import Trajectory
    from flowmem.settings import Settings

    if source.startswith("sim:"):
        return simulate(int(source[4:]), seed=1)
    return [t for t in read_trajectories(Path(source), Settings()) if isinstance(t, Trajectory)]


def agreement(source: str, samples: list[int]) -> dict[str, dict[str, float]]:
    """What fitting on `samples` task texts changes on one set's runs (see the module doc)."""
    from sklearn.metrics import adjusted_rand_score

    from flowmem.induction.bounded import fit_texts
    from flowmem.induction.metrics import clustering_scores
    from flowmem.settings import Settings

    runs, params = _runs(source), Settings().cluster_params
    agents = sorted({t.agent for t in runs})
    texts = {a: sorted({t.task for t in runs if t.agent == a}) for a in agents}
    out: dict[str, dict[str, float]] = {}
    for size in [max(map(len, texts.values())), *samples]:
        start, labels = time.perf_counter(), {}
        for a in agents:
            labels[a] = fit_texts(texts[a], params, sample=size)[1]
        row = {"fit_s": round(time.perf_counter() - start, 2), "texts": float(sum(map(len, texts.values())))}
        label = [f"{t.agent}/{labels[t.agent][t.task]}" for t in runs]
        if not out:
            full = label
        row["ari_with_full_fit"] = round(float(adjusted_rand_score(full, label)), 4)
        grouped = [(t.group, lab) for t, lab in zip(runs, label, strict=True) if t.group is not None]
        if grouped:
            row.update(clustering_scores([g for g, _ in grouped], [lab for _, lab in grouped]))
        out["all" if not out else str(size)] = row
    return out


def _row(n: int, r: dict[str, float]) -> str:
    stages = "  ".join(f"{s} {r.get(s, 0.0):7.2f}" for s in STAGES)
    line = (
        f"{n:>8} trajectories: {stages}  (induction in all {r['total_induce']:.2f} s, process "
        f"{r['full_process_s']:.1f} s; {r['clusters']:.0f} clusters, {r['workflows']:.0f} versions; "
        f"peak RSS +{r['peak_rss_growth_mb']:.0f} MB)"
    )
    if "incremental_ratio" in r:
        line += f"; incremental 1%: {r['incremental_process_s']:.1f} s = {r['incremental_ratio']:.1%}"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument("--chunk", type=int, default=5000, help="tasks per simulated world")
    parser.add_argument("--incremental", action="store_true")
    parser.add_argument("--dir", default=None, help="where the stores go and stay (default: a temporary one)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--agreement", default=None, help="trajectory files (or sim:N), comma-separated")
    parser.add_argument("--samples", default="500,1000,2000")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    if args.agreement:
        samples = [int(s) for s in args.samples.split(",")]
        found = {src: agreement(src, samples) for src in args.agreement.split(",")}
        print(json.dumps(found, indent=1))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            results[n] = measure(n, root=args.dir or tmp, chunk=args.chunk, incremental=args.incremental)
            if not args.json:
                print(_row(n, results[n]), flush=True)
    slopes = {
        f"{a}->{b}": {
            s: math.log(results[b][s] / results[a][s]) / math.log(b / a)
            for s in [*STAGES, "total_induce", "full_process_s"]
            if results[a].get(s, 0) > 0 and results[b].get(s, 0) > 0
        }
        for a, b in zip(sizes, sizes[1:], strict=False)
    }
    if args.json:
        print(json.dumps({"stages_s": results, "slopes": slopes}, indent=1))
        return 0
    print("slope b in time ~ n^b between consecutive sizes:")
    for pair, by_stage in slopes.items():
        print(f"  {pair:>15}: " + "  ".join(f"{s} {b:.2f}" for s, b in by_stage.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
