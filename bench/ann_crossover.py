"""Where the served index should switch from brute force to the ANN.

The benchmark is `flowmem.bench.ann_crossover` (flowmem/bench/ann_crossover.py): its usage is there.
This file only runs it, as `python bench/ann_crossover.py ...`.
"""

from flowmem.bench.ann_crossover import main

if __name__ == "__main__":
    raise SystemExit(main())
