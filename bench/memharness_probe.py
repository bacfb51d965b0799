"""Run by a Python ≥ 3.13 with memharness installed (not imported by flowmem): times its
`add_workflow` and `search_workflow(k=3)` on the benchmark's task texts; prints one JSON line.

Usage: python3.13 memharness_probe.py N QUERIES   (task texts on stdin, one per line: N to
add, then QUERIES to search)
"""

import asyncio
import json
import statistics
import sys
import tempfile
import time


async def main(n: int, q: int) -> None:
    from memharness import MemoryHarness  # type: ignore[import-not-found]

    texts = sys.stdin.read().splitlines()
    added, searched = texts[:n], texts[n : n + q]
    with tempfile.TemporaryDirectory() as tmp:
        async with MemoryHarness(f"sqlite:///{tmp}/memory.db") as harness:
            adds = []
            for task in added:
                start = time.perf_counter()
                await harness.add_workflow(task, ["search", "act"], "success")
                adds.append((time.perf_counter() - start) * 1e6)
            searches = []
            for task in searched:
                start = time.perf_counter()
                await harness.search_workflow(task, k=3)
                searches.append((time.perf_counter() - start) * 1e3)
    print(
        json.dumps(
            {
                "memharness_add_us_median": statistics.median(adds),
                "memharness_search_ms_p50_2k": statistics.median(searches),
                "memharness_n": n,
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
