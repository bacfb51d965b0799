"""What serving alone can do for joint precision.

The benchmark is `flowmem.bench.serving_frontier` (flowmem/bench/serving_frontier.py): its usage is
there. This file only runs it, as `python bench/serving_frontier.py ...`.
"""

from flowmem.bench.serving_frontier import main

if __name__ == "__main__":
    raise SystemExit(main())
