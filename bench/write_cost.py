"""Does a write cost more on a bigger table? The API's write pattern on tables of several sizes,
interleaved.

One store per size is preloaded (batches of 1,000, then `maintain` as `flowmem maintain`
leaves a store); then the stores take turns: each turn one commit of `--rows` new
trajectories to each store, and every `--compact-every` commits a compaction of each (what the
API's committer does, versions kept 10 s). Taking turns puts the machine's drift (other work,
clock changes) on every size alike, which a run per size does not. Printed per size: the
median and p90 CPU time of a commit (the process's, LanceDB's threads included), and the CPU
time of a compaction; then the ratio of each to the smallest size's.

Usage: python bench/write_cost.py [--sizes 2000,20000,100000] [--commits 600] [--rows 5]
    [--compact-every 100]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from flowmem.jobs.factories import store_from
from flowmem.models import Trajectory
from flowmem.settings import Settings
from flowmem.storage import Store


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def trajectory(i: int, prefix: str) -> Trajectory:
    return Trajectory.model_validate(
        {
            "id": f"{prefix}-{i:07d}",
            "task": f"Forward the latest email about budget {i % 97} to olga",
            "steps": [
                {"action": "email.search_emails", "args": {"query": f"budget {i % 97}"}},
                {"action": "email.forward_email", "args": {"email_id": "e1", "recipient": "olga"}},
            ],
        }
    )


def preloaded(root: Path, n: int) -> Store:
    store = store_from(Settings(db=str(root / f"db-{n}")))
    store.prepare()
    for lo in range(0, n, 1_000):
        store.insert_trajectories(trajectory(i, "pre") for i in range(lo, min(n, lo + 1_000)))
    store.maintain_table("trajectories", keep=timedelta(0))
    return store


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,20000,100000")
    parser.add_argument("--commits", type=int, default=600)
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--compact-every", type=int, default=100)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    root = Path(tempfile.mkdtemp(prefix="flowmem-write-cost-"))
    start = time.perf_counter()
    stores = {n: preloaded(root, n) for n in sizes}
    print(f"preloaded {', '.join(map(str, sizes))} rows in {time.perf_counter() - start:.0f} s", flush=True)
    commit_cpu: dict[int, list[float]] = {n: [] for n in sizes}
    compact_cpu: dict[int, list[float]] = {n: [] for n in sizes}
    for c in range(args.commits):
        for n, store in stores.items():
            batch = [trajectory(c * args.rows + i, "w") for i in range(args.rows)]
            t0 = cpu()
            stored = len(store.insert_trajectories(batch))
            commit_cpu[n].append(cpu() - t0)
            assert stored == args.rows
            if c % args.compact_every == args.compact_every - 1:
                t0 = cpu()
                store.compact_trajectories(keep=timedelta(seconds=10))
                compact_cpu[n].append(cpu() - t0)
    base = sizes[0]

    def p50(xs: list[float]) -> float:
        return statistics.median(xs) * 1e3

    def p90(xs: list[float]) -> float:
        return statistics.quantiles(xs, n=10)[-1] * 1e3

    print(f"{'rows':>8} {'commit p50 ms':>14} {'p90 ms':>8} {'compaction ms':>14} {'key reads':>10}")
    for n in sizes:
        compaction = p50(compact_cpu[n]) if compact_cpu[n] else float("nan")
        print(
            f"{n:>8} {p50(commit_cpu[n]):>14.2f} {p90(commit_cpu[n]):>8.2f} {compaction:>14.1f} "
            f"{stores[n]._known.refreshes:>10}"
        )
    for n in sizes[1:]:
        ratio = p50(commit_cpu[n]) / p50(commit_cpu[base])
        compaction = (
            p50(compact_cpu[n]) / p50(compact_cpu[base])
            if compact_cpu[n] and compact_cpu[base]
            else float("nan")
        )
        print(f"{n} rows against {base}: commit p50 {ratio:.2f}x, compaction {compaction:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
