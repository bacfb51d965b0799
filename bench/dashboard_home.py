"""The dashboard's home page over 10,000 workflows.

The benchmark is `flowmem.bench.dashboard_home` (flowmem/bench/dashboard_home.py): its usage is
there. This file only runs it, as `python bench/dashboard_home.py ...`.
"""

from flowmem.bench.dashboard_home import main

if __name__ == "__main__":
    raise SystemExit(main())
