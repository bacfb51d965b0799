"""The figures README.md and docs/ quote, regenerated and compared (`make docs-check`).

The check is `flowmem.bench.docs_check` (flowmem/bench/docs_check.py): its usage is there. This
file only runs it, as `python bench/docs_check.py ...`.
"""

from flowmem.bench.docs_check import main

if __name__ == "__main__":
    raise SystemExit(main())
