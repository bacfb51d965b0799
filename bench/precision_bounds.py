"""What memories built from the training split can reach at all.

The benchmark is `flowmem.bench.precision_bounds` (flowmem/bench/precision_bounds.py): its usage is
there. This file only runs it, as `python bench/precision_bounds.py ...`.
"""

from flowmem.bench.precision_bounds import main

if __name__ == "__main__":
    raise SystemExit(main())
