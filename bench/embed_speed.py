"""Embedding throughput of the offline hashing embedder on task texts (median of 5 runs).

The benchmark is `flowmem.bench.embed_speed` (flowmem/bench/embed_speed.py): its usage is there.
This file only runs it, as `python bench/embed_speed.py ...`.
"""

from flowmem.bench.embed_speed import main

if __name__ == "__main__":
    raise SystemExit(main())
