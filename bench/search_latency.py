"""Why agents search an in-process index and not LanceDB per query: k=3 search latency over N
served workflows, side by side in one run.

- `memory.search`: the agent's `ServedIndex` (numpy over the workflows' key vectors, reloaded
  only when a run commits), including embedding the task;
- LanceDB: the same query vector against the workflows table's `vector` column (brute force,
  and with an IVF_PQ index once the table has at least 5,000 rows), excluding the embedding.

Usage: python bench/search_latency.py [N ...]   (default: 1000 10000)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if not __package__:  # run as `python bench/search_latency.py`: import bench.* from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import THINGS, VERBS, team_description, workflow
from flowmem.agents import WorkflowMemory
from flowmem.jobs.factories import store_from
from flowmem.models import InductionRun, Workflow
from flowmem.settings import Settings


def workflows(n: int) -> list[Workflow]:
    return [workflow(i, description=team_description(i)) for i in range(n)]


def p50(fn: Callable[[int], object], repeats: int = 200) -> float:
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(n: int) -> tuple[float, float, float]:
    """p50 ms of memory.search, LanceDB brute force, LanceDB with IVF_PQ (nan below 5,000)."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=f"{tmp}/db")
        store = store_from(settings)
        store.commit_run(InductionRun(id="bench"), workflows(n))
        tasks = [f"{VERBS[i % 9]} the {THINGS[i % 7]} for team {i}" for i in range(200)]
        with WorkflowMemory(settings) as memory:
            memory.search(tasks[0])  # build the index once, as an agent's first search does
            ours = p50(lambda i: memory.search(tasks[i], k=3))
        table = store.db.open_table("workflows__default")
        vectors = store.embedder.embed(tasks)

        def lance(i: int) -> object:
            return table.search(vectors[i], vector_column_name="vector").metric("cosine").limit(3).to_list()

        brute, indexed = p50(lance), float("nan")
        if n >= 5_000:
            table.create_index(metric="cosine", vector_column_name="vector", num_partitions=16)
            indexed = p50(lance)
        return ours, brute, indexed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    run([int(a) for a in argv] or [1000, 10000])
    return 0


def run(sizes: list[int]) -> None:
    """Time the three searches at each size and print one row per size."""
    print(f"{'workflows':>9}  {'memory.search':>14}  {'lancedb brute':>14}  {'lancedb IVF_PQ':>15}  ratio")
    for n in sizes:
        ours, brute, indexed = measure(n)
        print(f"{n:>9}  {ours:>11.2f} ms  {brute:>11.2f} ms  {indexed:>12.2f} ms  {brute / ours:>5.1f}x")


if __name__ == "__main__":
    raise SystemExit(main())
