"""Search at 10k against numpy exact, this checkout's code and another revision's taking turns
block by block in two long-lived processes.

`python -m bench search` runs one revision in one process; two runs minutes apart may meet a
machine in different states (on a 2-core VM the core itself ran ~1.5× slower for tens of
seconds at a time, docs/performance.md "Why a run misses the line here"), so two revisions'
runs compare the machine as much as the code. Here both revisions run at once: a store of
`--n` workflows is filled once (`bench.data.fill`, as `python -m bench search` fills it);
each revision's process opens a `WorkflowMemory` on a copy of it, waits for its ANN and its
versions kept built, and then, whenever told, searches `--block` new tasks (k=3, embedding
included) and times numpy exact (one product and `argpartition`, the query embedded) over
as many, reporting both medians. The two processes take turns, `--rounds` times, each first
in every other round, so that each round's two blocks meet the machine in the same state.

Figures: per revision, the median over the rounds of the search's p50, of numpy exact's, and
of their ratio; the share of rounds in which the search's p50 is at most numpy exact's; and
the median (with quartiles) of the rounds' ratios of this checkout's search to the other's.

Usage: python bench/search_turns.py [--n 10000] [--before REV | --before none] [--rounds 40]
       [--block 100] [--json] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.agent_start import _code_at, _env, emitted
from bench.data import fill
from bench.paths import REPO
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings

__all__ = ["main", "turns"]

BEFORE = "2a39e17"
"""The revision compared with by default: before the search's fixed costs were trimmed."""

WORKER = """
import json, statistics, sys, time
import numpy as np
from bench.data import queries
from bench.search import _wait_for_ann
from flowmem.agents import WorkflowMemory
from flowmem.settings import Settings

db, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tasks = queries(count, seed=seed)
with WorkflowMemory(Settings(db=db)) as memory:
    memory.search(tasks[0], k=3)  # loads the index, as an agent's first search does
    _wait_for_ann(memory.index, 1200)  # and its versions kept built
    snap = memory.index._snapshot
    import flowmem.agents
    print(json.dumps({"ready": flowmem.agents.__file__}), flush=True)
    keys = snap.index.vectors
    embedder = getattr(memory.store.embedder, "inner", memory.store.embedder)
    nxt = 1
    for line in sys.stdin:
        block = int(line)
        searched, exact = [], []
        for task in tasks[nxt : nxt + block]:
            start = time.perf_counter()
            memory.search(task, k=3)
            searched.append(time.perf_counter() - start)
        vectors = embedder.embed(tasks[nxt : nxt + block])
        for query in vectors:
            start = time.perf_counter()
            np.argpartition(-(keys @ query), 3)[:3]
            exact.append(time.perf_counter() - start)
        nxt += block
        print(json.dumps([statistics.median(searched) * 1000, statistics.median(exact) * 1000]), flush=True)
"""
"""A revision's process: opens the store, says it is ready, then times a block of new tasks'
searches and numpy exact over as many for every block size it reads."""


class _Worker:
    """One revision's process, ready to search."""

    def __init__(self, code: Path, db: Path, count: int, seed: int) -> None:
        self.code, self.log = code, db.parent / "stderr.log"
        with self.log.open("w") as log:  # a file, not a pipe: what it logs never blocks it
            self.process = subprocess.Popen(
                [sys.executable, "-c", WORKER, str(db), str(count), str(seed)],
                env={**_env(code), "PYTHONPATH": f"{code}:{REPO}"},  # bench.data from this checkout
                cwd=db.parent,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        try:
            ready = json.loads(self._line())
            if not str(ready["ready"]).startswith(str(code.resolve() / "flowmem")):
                raise RuntimeError(f"the process for {code} imported another flowmem: {ready['ready']}")
        except BaseException:
            self.close()
            raise

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.process.wait(timeout=60)
            raise RuntimeError(f"the process for {self.code} ended: {self.log.read_text()[-2000:]}")
        return line

    def block(self, size: int) -> tuple[float, float]:
        """The p50s (ms) of searching `size` new tasks and of numpy exact over as many."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"{size}\n")
        self.process.stdin.flush()
        search, exact = json.loads(self._line())
        return float(search), float(exact)

    def close(self) -> None:
        """Ends the process (its input closed, it leaves its loop) and closes its pipes."""
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        self.process.wait(timeout=60)


def _figures(rounds: list[tuple[float, float]], suffix: str) -> dict[str, float]:
    search, exact = np.array([r[0] for r in rounds]), np.array([r[1] for r in rounds])
    return {
        f"search_p50_ms{suffix}": float(np.median(search)),
        f"numpy_p50_ms{suffix}": float(np.median(exact)),
        f"vs_numpy{suffix}": float(np.median(search / exact)),
        f"rounds_met{suffix}": float(np.mean(search <= exact)),
    }


def turns(
    n: int = 10_000, *, before: str | None = BEFORE, rounds: int = 40, block: int = 100
) -> dict[str, Any]:
    """The figures of the module docstring, for this checkout (and `before`, unless None)."""
    out: dict[str, Any] = {"n": n, "rounds": rounds, "block": block, "before": before}
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"now": REPO}
        if before is not None:
            codes["before"] = _code_at(before, Path(tmp) / "before")
        db = Path(tmp) / "store"
        fill(store_from(Settings(db=str(db))), n, examples=True)
        workers: dict[str, _Worker] = {}
        try:
            for name, code in codes.items():
                copy = Path(tmp) / name / "db"
                shutil.copytree(db, copy)
                workers[name] = _Worker(code, copy, (rounds + 1) * block + 1, seed=20)
            found: dict[str, list[tuple[float, float]]] = {name: [] for name in workers}
            for turn in range(rounds):
                for name in list(workers)[:: -1 if turn % 2 else 1]:
                    found[name].append(workers[name].block(block))
        finally:
            for worker in workers.values():
                worker.close()
    out.update(_figures(found["now"], ""))
    if before is not None:
        out.update(_figures(found["before"], "_before"))
        ratios = [a[0] / b[0] for a, b in zip(found["now"], found["before"], strict=True)]
        out["search_ratio"] = statistics.median(ratios)
        out["search_ratio_q1"], out["search_ratio_q3"] = (float(q) for q in np.percentile(ratios, [25, 75]))
    return out


def _print(found: dict[str, Any]) -> None:
    print(f"{found['n']:,} workflows, {found['rounds']} rounds of {found['block']} tasks each, in turn")
    for suffix, label in (("", "this checkout"), ("_before", f"before ({found['before']})")):
        if f"search_p50_ms{suffix}" not in found:
            continue
        print(
            f"  {label}: search p50 {found[f'search_p50_ms{suffix}']:.3f} ms, numpy exact"
            f" {found[f'numpy_p50_ms{suffix}']:.3f} ms, search / numpy {found[f'vs_numpy{suffix}']:.2f},"
            f" met in {found[f'rounds_met{suffix}']:.0%} of rounds"
        )
    if "search_ratio" in found:
        print(
            f"  this checkout's search / before's, by round: {found['search_ratio']:.3f}"
            f" (quartiles {found['search_ratio_q1']:.3f}–{found['search_ratio_q3']:.3f})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="workflows in the store")
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with ('none': no other)")
    parser.add_argument("--rounds", type=int, default=40, help="turns of each revision")
    parser.add_argument("--block", type=int, default=100, help="searches per turn")
    parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON object")
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args(argv)
    before = None if args.before == "none" else args.before
    found = turns(args.n, before=before, rounds=args.rounds, block=args.block)
    if not emitted(found, args.out, as_json=args.as_json):
        _print(found)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
