"""Task-level workflows against sub-routines, as memories an agent is shown (one run, one metric).

The benchmark is `flowmem.bench.subroutines` (flowmem/bench/subroutines.py): its usage is there.
This file only runs it, as `python bench/subroutines.py ...`.
"""

from flowmem.bench.subroutines import main

if __name__ == "__main__":
    raise SystemExit(main())
