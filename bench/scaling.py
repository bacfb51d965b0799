"""How each stage of the induction path grows with the number of trajectories (docs/scaling.md).

The benchmark is `flowmem.bench.scaling` (flowmem/bench/scaling.py): its usage is there. This file
only runs it, as `python bench/scaling.py ...`.
"""

from flowmem.bench.scaling import main

if __name__ == "__main__":
    raise SystemExit(main())
