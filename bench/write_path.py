"""Does the write path stay flat?

The benchmark is `flowmem.bench.write_path` (flowmem/bench/write_path.py): its usage is there. This
file only runs it, as `python bench/write_path.py ...`.
"""

from flowmem.bench.write_path import main

if __name__ == "__main__":
    raise SystemExit(main())
