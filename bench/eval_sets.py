"""`flowmem eval` on the shared sets, flowmem against raw trajectories, side by side.

The benchmark is `flowmem.bench.eval_sets` (flowmem/bench/eval_sets.py): its usage is there. This
file only runs it, as `python bench/eval_sets.py ...`.
"""

from flowmem.bench.eval_sets import main

if __name__ == "__main__":
    raise SystemExit(main())
