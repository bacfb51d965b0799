"""Does a write cost more on a bigger table?

The benchmark is `flowmem.bench.write_cost` (flowmem/bench/write_cost.py): its usage is there. This
file only runs it, as `python bench/write_cost.py ...`.
"""

from flowmem.bench.write_cost import main

if __name__ == "__main__":
    raise SystemExit(main())
