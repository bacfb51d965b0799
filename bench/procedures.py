"""Do induced workflows read as procedures? Counts over each shared set's training runs.

The benchmark is `flowmem.bench.procedures` (flowmem/bench/procedures.py): its usage is there.
This file only runs it, as `python bench/procedures.py ...`.
"""

from flowmem.bench.procedures import main

if __name__ == "__main__":
    raise SystemExit(main())
