"""What durable hooks cost.

The benchmark is `flowmem.bench.hook_durable` (flowmem/bench/hook_durable.py): its usage is there.
This file only runs it, as `python bench/hook_durable.py ...`.
"""

from flowmem.bench.hook_durable import main

if __name__ == "__main__":
    raise SystemExit(main())
