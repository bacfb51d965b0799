"""Serving chosen to cover the nearest past runs: how close does it come to issue 24's bars?

The benchmark is `flowmem.bench.serving_cover` (flowmem/bench/serving_cover.py): its usage is
there. This file only runs it, as `python bench/serving_cover.py ...`.
"""

from flowmem.bench.serving_cover import main

if __name__ == "__main__":
    raise SystemExit(main())
