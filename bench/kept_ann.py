"""The first seconds of a process that opens a store of many workflows and runs: building
its HNSW indexes, against reading those another process kept (`agents.ann_cache`).

A synthetic store of `--n` workflows, with one successful run of each (as `bench/recurring.py`
fills it), is filled once. Then, each round, with an empty cache directory, two fresh
processes in turn open it and search: the first builds the keys' HNSW and the stored tasks'
and keeps them; the second finds them kept. Each reports, from the moment it opens the store:
- `load_s`: its first search (the store read, as an agent's first search reads it);
- `keys_ann_s`, `evidence_ann_s`: when the keys' HNSW and the stored tasks' are searched;
- `early_ms`: the p50 of searching tasks drawn like the stored ones (most recur), one after
  another for the first `--early` seconds after the first search (until an HNSW is there,
  a search scores every key, and every stored run of a recurring task);
- `kept_mb`: the cache directory's size once both are there.
Figures are the medians over `--rounds` rounds; the ratios are the second process's over the
first's.

Usage: python bench/kept_ann.py [--n 100000] [--rounds 2] [--early 5] [--json] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.agent_start import emitted, run_probe
from bench.data import fill, queries
from bench.paths import REPO
from bench.recurring import stored_runs
from bench.revisions import OPEN, arguments
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings

__all__ = ["kept_ann", "main"]

PROBE = (
    OPEN
    + """
from pathlib import Path
from flowmem.settings import Settings

db, cache, tasks, early = given()
opened = time.perf_counter()

def note_ready(index):
    # When each HNSW is first seen searched: whether both are.
    keys, evidence = index._snapshot.slot.ann, index._evidence.index.ann
    for name, ready in (("keys_ann_s", keys), ("evidence_ann_s", evidence)):
        if ready is not None and name not in out:
            out[name] = time.perf_counter() - opened
    return "keys_ann_s" in out and "evidence_ann_s" in out

with WorkflowMemory(Settings(db=db, ann_cache=cache)) as memory:
    memory.search(tasks[0], k=3)
    out["load_s"] = time.perf_counter() - opened
    times, i = [], 0
    while time.perf_counter() - opened < out["load_s"] + early:
        start = time.perf_counter()
        memory.search(tasks[i % len(tasks)], k=3)
        times.append((time.perf_counter() - start) * 1000)
        i += 1
        note_ready(memory.index)
    out["early_ms"] = statistics.median(times)
    deadline = time.monotonic() + 1200
    while not note_ready(memory.index):
        if time.monotonic() > deadline:
            raise SystemExit("no HNSW within 20 minutes")
        time.sleep(0.01)
    out["kept_mb"] = sum(p.stat().st_size for p in Path(cache).glob("*.hnsw")) / 1e6
done()
"""
)

FIGURES = ("load_s", "keys_ann_s", "evidence_ann_s", "early_ms", "kept_mb")


def kept_ann(n: int = 100_000, *, rounds: int = 2, early: float = 5.0, count: int = 200) -> dict[str, Any]:
    """The medians of each figure of the process that builds (`built_*`) and of the one that
    reads what it kept (`read_*`), and their ratios."""
    out: dict[str, Any] = {"n": n, "rounds": rounds, "early_s": early}
    found: dict[str, list[dict[str, Any]]] = {"built": [], "read": []}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store"
        store = store_from(Settings(db=str(db)))
        fill(store, n, examples=True)
        stored_runs(store, n)
        tasks = queries(count, seed=13)
        for turn in range(rounds):
            args = [str(db), *arguments(str(Path(tmp) / f"ann-{turn}"), tasks, early)]
            for name in ("built", "read"):
                found[name].append(run_probe(REPO, PROBE, args, Path(tmp)))
    for name, probes in found.items():
        for figure in FIGURES:
            out[f"{name}_{figure}"] = statistics.median(p[figure] for p in probes)
    for figure in FIGURES[:-1]:
        out[f"{figure}_ratio"] = out[f"read_{figure}"] / out[f"built_{figure}"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="workflows (and runs) in the store")
    parser.add_argument("--rounds", type=int, default=2, help="pairs of processes (the median is kept)")
    parser.add_argument("--early", type=float, default=5.0, help="seconds of searching after the first")
    parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON object")
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args(argv)
    found = kept_ann(args.n, rounds=args.rounds, early=args.early)
    if not emitted(found, args.out, as_json=args.as_json):
        for name, value in found.items():
            print(f"{name:28s} {value:.3f}" if isinstance(value, float) else f"{name:28s} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
