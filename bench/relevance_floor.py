"""Can a relevance condition give a task from no known domain nothing, at no cost in-domain?

The benchmark is `flowmem.bench.relevance_floor` (flowmem/bench/relevance_floor.py): its usage is
there. This file only runs it, as `python bench/relevance_floor.py ...`.
"""

from flowmem.bench.relevance_floor import main

if __name__ == "__main__":
    raise SystemExit(main())
