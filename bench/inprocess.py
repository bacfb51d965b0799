"""The full induction and the incremental one, timed in one long-lived process (`python -m bench`'s
`inprocess_*` figures): imports and the store's opening are paid once, as in the API's induce
route, where `flowmem induce` pays them per run.

Usage: python bench/inprocess.py DB FULL INCREMENTAL
  (FULL, then INCREMENTAL, is ingested into the store at DB and induced; prints one JSON line,
  {"full": [seconds, cpu_seconds], "incremental": [seconds, cpu_seconds]})
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    db, full, incremental = sys.argv[1:] if argv is None else argv
    settings = Settings(db=db)
    store = store_from(settings)
    out: dict[str, tuple[float, float]] = {}
    for name, path in (("full", full), ("incremental", incremental)):
        runs = [t for t in read_trajectories(Path(path), settings) if not isinstance(t, Rejection)]
        store_trajectories(store, runs, settings.scrub)
        wall, cpu = time.perf_counter(), time.process_time()
        run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
        out[name] = (time.perf_counter() - wall, time.process_time() - cpu)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
