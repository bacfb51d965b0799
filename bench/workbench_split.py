"""Split the shared WorkBench trajectories into train (instances 0-6) and test (7-9) files.

Usage: python bench/workbench_split.py [SOURCE] [OUT_DIR]
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    source = Path(argv[0] if argv else "../shared/data/workbench_trajectories.jsonl.gz")
    out = Path(argv[1] if len(argv) > 1 else ".flowmem/workbench")
    out.mkdir(parents=True, exist_ok=True)
    with (
        gzip.open(source, "rt", encoding="utf-8") as fh,
        gzip.open(out / "train.jsonl.gz", "wt", encoding="utf-8") as train,
        gzip.open(out / "test.jsonl.gz", "wt", encoding="utf-8") as test,
    ):
        counts = {"train": 0, "test": 0}
        for line in fh:
            record = json.loads(line)
            part = "train" if record["meta"]["instance"] <= 6 else "test"
            (train if part == "train" else test).write(line)
            counts[part] += 1
    print(json.dumps({"out": str(out), **counts}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
