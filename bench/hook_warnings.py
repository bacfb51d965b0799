"""What checking served pitfalls costs the recording hook.

The benchmark is `flowmem.bench.hook_warnings` (flowmem/bench/hook_warnings.py): its usage is
there. This file only runs it, as `python bench/hook_warnings.py ...`.
"""

from flowmem.bench.hook_warnings import main

if __name__ == "__main__":
    raise SystemExit(main())
