"""Two revisions of flowmem side by side on one filled store: what `bench/outcomes.py` and
`bench/status_change.py` share.

A synthetic store of n workflows is filled once (`bench.data.fill`); then, in turn, a fresh
process of each revision runs a probe script on a copy of it. The other revision is its
`flowmem/` from `git archive`, run by the same interpreter. The revisions alternate by process,
`rounds` times, so that neither always follows the other, and a figure is the median of the
rounds'. A probe prints one JSON object of figures (`agent_start.run_probe`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.agent_start import _code_at, emitted, run_probe
from bench.data import fill
from bench.paths import REPO
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["OPEN", "arguments", "compared", "parser", "probe_copy", "report"]

OPEN = """
import json, statistics, sys, time
from flowmem.agents import WorkflowMemory
from flowmem.jobs.factories import store_from
from flowmem.models import InductionRun, Workflow, WorkflowStep

out = {}  # the probe's figures, printed by `done()`

def given():
    # The store's path and the JSON arguments after it (`arguments`).
    return [sys.argv[1], *(json.loads(a) for a in sys.argv[2:])]

def done():
    # The figures printed as one JSON line, with where the flowmem measured was imported from.
    import flowmem.agents
    out["code"] = flowmem.agents.__file__
    print(json.dumps(out))

def timed(memory, batch):
    # The p50 (ms) of searching each task of the batch, k=3.
    times = []
    for task in batch:
        start = time.perf_counter()
        memory.search(task, k=3)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)

def ready(memory, task, timeout=1200):
    # Loads the index, as an agent's first search does, and waits for its ANN.
    memory.search(task, k=3)
    deadline = time.monotonic() + timeout
    while memory.index._snapshot.slot.ann is None and time.monotonic() < deadline:
        time.sleep(0.05)
"""
"""The start of a probe script: `given()` (its arguments), `timed(memory, tasks)`,
`ready(memory, task)`, the figures `out` and `done()` (prints them), and what a probe commits
with (`store_from`, `InductionRun`, `Workflow`, `WorkflowStep`)."""


def probe_copy(code: Path, script: str, db: Path, args: list[str]) -> dict[str, Any]:
    """One fresh process of the flowmem at `code` running `script` on a copy of the store at
    `db` (its first argument), then `args`."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "db"
        shutil.copytree(db, copy)
        found: dict[str, Any] = run_probe(code, script, [str(copy), *args], Path(tmp))
    return found


def compared(
    n: int,
    script: str,
    args: list[str],
    *,
    before: str | None,
    rounds: int,
    unit: Callable[[str], str] = lambda _: "_ms",
    prepare: Callable[[Store], object] | None = None,
) -> dict[str, Any]:
    """Each figure of `script`'s probes, per revision the median of `rounds` probes (named with
    its `unit` suffix, and `_before` for the other revision's), and the ratios of this
    checkout's to `before`'s (`_ratio`); `prepare` adds to the filled store (runs, say)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"now": REPO}
        if before is not None:
            codes["before"] = _code_at(before, Path(tmp) / "before")
        db = Path(tmp) / "store"
        store = store_from(Settings(db=str(db)))
        fill(store, n, examples=True)
        if prepare is not None:
            prepare(store)
        probes: dict[str, list[dict[str, Any]]] = {code: [] for code in codes}
        for turn in range(rounds):  # in turn first, so that neither always follows the other
            for code, path in list(codes.items())[:: -1 if turn % 2 else 1]:
                probes[code].append(probe_copy(path, script, db, args))
    for code, found in probes.items():
        suffix = "" if code == "now" else "_before"
        for name in found[0]:
            out[f"{name}{unit(name)}{suffix}"] = statistics.median(p[name] for p in found)
    if before is not None:
        for name in probes["now"][0]:
            out[f"{name}_ratio"] = out[f"{name}{unit(name)}"] / out[f"{name}{unit(name)}_before"]
    return out


def arguments(*values: Any) -> list[str]:
    """Probe arguments as JSON texts."""
    return [json.dumps(v) for v in values]


def parser(doc: str, before: str) -> argparse.ArgumentParser:
    """A bench's command line with the options every one of these has (`--n`, `--queries`,
    `--before`, `--rounds`, `--json`, `--out`); the bench adds its own."""
    found = argparse.ArgumentParser(description=doc.splitlines()[0])
    found.add_argument("--n", type=int, default=100_000, help="workflows in the store")
    found.add_argument("--queries", type=int, default=200, help="searches per figure")
    found.add_argument("--before", default=before, help="the revision to compare with ('none': no other)")
    found.add_argument("--rounds", type=int, default=2, help="probes of each revision (the median is kept)")
    found.add_argument("--json", action="store_true", dest="as_json", help="print one JSON object")
    found.add_argument("--out", type=Path, help="also write the JSON object to this file")
    return found


def report(found: dict[str, Any], args: argparse.Namespace) -> int:
    """The figures written (`--out`) and printed: one JSON line (`--json`), else one a line."""
    if not emitted(found, args.out, as_json=args.as_json):
        for name, value in found.items():
            print(f"{name:28s} {value:.3f}" if isinstance(value, float) else f"{name:28s} {value}")
    return 0
