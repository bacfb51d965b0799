"""Where the served index should switch from brute force to the ANN: both paths side by side.

For each size it fills one store with that many synthetic workflows (one key each,
`bench.data.fill`), opens two `ServedIndex`es on it, one that never builds an ANN and
one that builds it at once, and times `search(task, k=3)` on the same 300 queries, the two
interleaved query by query (three rounds), so that a busy machine slows both alike. Prints
the p50 of each and their ratio, and checks that both return the same workflows.
`retrieval.ranking.ANN_MIN` is set from this. Needs the `ann` extra (faiss); ~2 min on 2 cores.

Usage: python bench/ann_crossover.py [SIZE ...]   (default: 2500 5000 7500 10000 15000)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from flowmem.agents.served_index import ServedIndex
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import fill, queries


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    sizes = [int(a) for a in argv] or [2500, 5000, 7500, 10000, 15000]
    print(f"{'keys':>7} {'brute p50 ms':>13} {'ann p50 ms':>11} {'brute/ann':>10} {'same hits':>10}")
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            store = store_from(Settings(db=f"{tmp}/db"))
            fill(store, n)
            tasks = queries(300)
            brute = ServedIndex(store, "default", ann_min=10**12)
            ann = ServedIndex(store, "default", ann_min=1, ann_wait=True)
            brute.search(tasks[0]), ann.search(tasks[0])
            times: tuple[list[float], list[float]] = ([], [])
            same = 0
            for _ in range(3):
                for task in tasks:
                    hits = []
                    for index, spent in zip((brute, ann), times, strict=True):
                        start = time.perf_counter()
                        hits.append([h.workflow.id for h in index.search(task)])
                        spent.append((time.perf_counter() - start) * 1000)
                    same += hits[0] == hits[1]
            b, a = statistics.median(times[0]), statistics.median(times[1])
            print(f"{n:>7} {b:>13.3f} {a:>11.3f} {b / a:>10.2f} {same / (3 * len(tasks)):>10.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
