"""Split the shared WorkBench trajectories into train (instances 0-6) and test (7-9) files.

The benchmark is `flowmem.bench.workbench_split` (flowmem/bench/workbench_split.py): its usage is
there. This file only runs it, as `python bench/workbench_split.py ...`.
"""

from flowmem.bench.workbench_split import main

if __name__ == "__main__":
    raise SystemExit(main())
