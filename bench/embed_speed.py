"""Embedding throughput of the offline hashing embedder on task texts (median of 5 runs).

Usage: python bench/embed_speed.py [DATA]   (default: the shared WorkBench file; else simulated tasks)
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
import time
from pathlib import Path

from flowmem.retrieval.embed import CachedEmbedder, HashingEmbedder


def tasks(path: Path) -> list[str]:
    if path.exists():
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return [json.loads(line)["task"] for line in fh]
    from flowmem.demo import simulate

    return [t.task for t in simulate(3000, seed=0)]


def rate(embed: object, texts: list[str], repeats: int = 5) -> float:
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        embed(texts)  # type: ignore[operator]
        runs.append(len(texts) / (time.perf_counter() - start))
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0] if argv else "../shared/data/workbench_trajectories.jsonl.gz")
    texts = tasks(path)
    plain = HashingEmbedder()
    plain.embed(texts[:10])
    cached = CachedEmbedder(HashingEmbedder())
    cached.embed(texts)
    print(f"{len(texts)} task texts")
    print(f"hashing embedder:              {rate(plain.embed, texts):9.0f} texts/s")
    print(f"hashing embedder, warm cache:  {rate(cached.embed, texts):9.0f} texts/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
