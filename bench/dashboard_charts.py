"""The dashboard's cluster map on the WorkBench store: server time and page size.

The benchmark is `flowmem.bench.dashboard_charts` (flowmem/bench/dashboard_charts.py): its usage
is there. This file only runs it, as `python bench/dashboard_charts.py ...`.
"""

from flowmem.bench.dashboard_charts import main

if __name__ == "__main__":
    raise SystemExit(main())
