"""`flowmem eval --online` on the shared sets.

The benchmark is `flowmem.bench.online_sets` (flowmem/bench/online_sets.py): its usage is there.
This file only runs it, as `python bench/online_sets.py ...`.
"""

from flowmem.bench.online_sets import main

if __name__ == "__main__":
    raise SystemExit(main())
