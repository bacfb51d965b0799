"""Do writers committing at once to a store on S3 lose rows?

The benchmark is `flowmem.bench.s3_commits` (flowmem/bench/s3_commits.py): its usage is
there. This file only runs it, as `python bench/s3_commits.py ...`.
"""

from flowmem.bench.s3_commits import main

if __name__ == "__main__":
    raise SystemExit(main())
