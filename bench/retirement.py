"""Stale workflows after a second induction run: served with retirement vs one run over all data.

Ingests WorkBench instances 0-6 and induces, ingests instances 7-9 and induces again, then
counts the workflows listed, served and retired; and, for comparison, the workflows served
after one induction over all the runs. Rule inducer, offline, default settings.

Usage (from the repo root): python bench/retirement.py [DATA_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.paths import SHARED_DATA


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    data = Path(argv[0]) if argv else SHARED_DATA
    settings = Settings()
    ns = settings.namespace
    path = data / "workbench_trajectories.jsonl.gz"
    runs = [t for t in read_trajectories(path, settings) if not isinstance(t, Rejection)]
    first = [t for t in runs if t.meta["instance"] <= 6]
    later = [t for t in runs if t.meta["instance"] > 6]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        local = settings.model_copy(update={"db": str(Path(a) / "db")})
        store = store_from(local)
        store_trajectories(store, first, local.scrub)
        one = run_induction(store, local, RuleInducer(), namespace=ns)
        store_trajectories(store, later, local.scrub)
        two = run_induction(store, local, RuleInducer(), namespace=ns)
        listed = len(store.list_workflows(namespace=ns))
        served = len({w.id for w in store.served_workflows(namespace=ns)})
        whole = settings.model_copy(update={"db": str(Path(b) / "db")})
        other = store_from(whole)
        store_trajectories(other, runs, whole.scrub)
        run_induction(other, whole, RuleInducer(), namespace=ns)
        at_once = len({w.id for w in other.served_workflows(namespace=ns)})
    print(f"first run: {len(one.versions)} versions; second run: {len(two.versions)} versions")
    print(f"second run retired {len(two.summary().retired)} workflows")
    print(f"listed {listed}, served {served}; one run over all the data serves {at_once}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
