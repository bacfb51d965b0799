"""An agent's first search: a fresh process imports `flowmem.agents`, opens a `WorkflowMemory` on
an existing local store and searches once; this checkout's code and another revision's side by
side in one run.

The figure is the wall time from starting the process to its first search's hits (the process
says so on stdout), the median of `--runs` probes of each revision, alternating, so that a busy
moment of the machine falls on both. The store is filled once per size (`bench.data.fill`, as
induction commits workflows: keyed by example tasks) and searched by both revisions; the probe
checks that both serve the same hits. The revision to compare with (`--before`, by default
e1d78a7: before a first search read the store through Lance while LanceDB loads,
`flowmem/storage/early_reads.py`) is its `flowmem/` from `git archive`, run by the same
interpreter (`bench.agent_start`).

Usage: python bench/first_search.py [SIZE ...] [--before REV] [--runs N] [--json] [--out FILE]
  (default sizes: 100 10000)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.agent_start import _code_at, emitted, first_line
from bench.data import fill
from bench.paths import REPO
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings

__all__ = ["BEFORE", "first_search", "main"]

BEFORE = "e1d78a7"
"""The revision compared with by default: main before the first search read through Lance."""

TASK = "forward the invoice 12 of ana today for team 3"

AGENT = """
import sys
import flowmem.agents
from flowmem.agents import WorkflowMemory

memory = WorkflowMemory.open(sys.argv[1])
hits = memory.search(sys.argv[2], k=3)
print("searched", flowmem.agents.__file__, *[h.workflow.id for h in hits], flush=True)
"""
"""The agent of a probe: import, open, one search; killed once it has searched."""


def probe(code: Path, db: Path) -> tuple[float, list[str]]:
    """One fresh agent process on the flowmem at `code`: seconds until it has searched, and the
    ids it was served."""
    process, line, start = first_line(code, AGENT, [str(db), TASK], db)
    searched = time.perf_counter() - start
    process.kill()
    _, err = process.communicate()
    words = line.split()
    if not line.startswith("searched ") or not words[1].startswith(str(code.resolve() / "flowmem")):
        raise RuntimeError(f"the probe on {code} did not search: {line!r} {err[-2000:]}")
    return searched, words[2:]


def first_search(sizes: list[int], runs: int = 10, *, before: str | None = BEFORE) -> dict[str, Any]:
    """The medians of `runs` probes of this checkout and (unless `before` is None) of `before`,
    alternating, on a store of each size."""
    out: dict[str, Any] = {"first_search_runs": runs, "first_search_before": before}
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"now": REPO}
        if before is not None:
            codes["before"] = _code_at(before, Path(tmp) / "before")
        for size in sizes:
            db = Path(tmp) / f"store-{size}"
            fill(store_from(Settings(db=str(db))), size, examples=True)
            served = {name: probe(code, db)[1] for name, code in codes.items()}  # untimed: bytecode
            if len({tuple(ids) for ids in served.values()}) != 1:
                raise RuntimeError(f"the revisions served different hits at {size}: {served}")
            found: dict[str, list[float]] = {name: [] for name in codes}
            for _ in range(runs):
                for name, code in codes.items():
                    found[name].append(probe(code, db)[0])
            for name, times in found.items():
                out[f"first_search_{size}_s{'' if name == 'now' else '_before'}"] = statistics.median(times)
            if before is not None:
                out[f"first_search_{size}_ratio"] = (
                    out[f"first_search_{size}_s"] / out[f"first_search_{size}_s_before"]
                )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 10_000], help="workflows in the store")
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with ('none': no other)")
    parser.add_argument("--runs", type=int, default=10, help="probes of each revision (the median is kept)")
    parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON object")
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args(argv)
    before = None if args.before == "none" else args.before
    found = first_search(args.sizes, args.runs, before=before)
    if emitted(found, args.out, as_json=args.as_json):
        return 0
    head = f"| workflows | this checkout, median of {args.runs} (s) |"
    print(head + (f" {before} (s) | ratio |" if before else ""))
    print("|---:|---:|" + ("---:|---:|" if before else ""))
    for size in args.sizes:
        cells = f"| {size:,} | {found[f'first_search_{size}_s']:.3f} |"
        if before is not None:
            was, ratio = found[f"first_search_{size}_s_before"], found[f"first_search_{size}_ratio"]
            cells += f" {was:.3f} | {ratio:.2f} |"
        print(cells)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
