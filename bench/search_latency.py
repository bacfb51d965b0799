"""Why agents search an in-process index and not LanceDB per query.

The benchmark is `flowmem.bench.search_latency` (flowmem/bench/search_latency.py): its usage is
there. This file only runs it, as `python bench/search_latency.py ...`.
"""

from flowmem.bench.search_latency import main

if __name__ == "__main__":
    raise SystemExit(main())
