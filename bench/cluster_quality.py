"""Clustering quality on the WorkBench trajectories.

The benchmark is `flowmem.bench.cluster_quality` (flowmem/bench/cluster_quality.py): its usage is
there. This file only runs it, as `python bench/cluster_quality.py ...`.
"""

from flowmem.bench.cluster_quality import main

if __name__ == "__main__":
    raise SystemExit(main())
