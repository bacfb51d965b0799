"""Stale workflows after a second induction run.

The benchmark is `flowmem.bench.retirement` (flowmem/bench/retirement.py): its usage is there. This
file only runs it, as `python bench/retirement.py ...`.
"""

from flowmem.bench.retirement import main

if __name__ == "__main__":
    raise SystemExit(main())
