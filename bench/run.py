"""The performance figures, side by side in one run (`make bench`, `python -m bench`): every
figure in one dict, at quick or full sizes, printed as one table and written as JSON.

Usage: python -m bench [--quick | --full] [--json] [--out FILE]
  FLOWMEM_BENCH_PY313: a Python >= 3.13 with memharness installed, to compare with it.
  FLOWMEM_BENCH_SCALE: multiplies every size (e.g. 0.001 for a smoke test).
The results go to bench/results/local.json (git-ignored) unless `--out` names another file;
bench/results/latest.json is the recorded run README.md quotes (`--out bench/results/latest.json`
records a new one, to commit with the docs it changes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from bench.agent_start import agent_start
from bench.paths import BENCH
from bench.pipeline import HOOK_ROUNDS, api_search, hook_step, induction, memharness
from bench.report import table
from bench.search import measure_search
from flowmem.retrieval.ann import ann_available

__all__ = ["LOCAL", "machine", "main", "run_bench"]

LOCAL = BENCH / "results" / "local.json"
"""Where a run's results go unless `--out` says otherwise: git-ignored, so a run leaves the
checkout as it was."""

SEARCH, INDUCE, API, MEMHARNESS, HOOK = [10_000, 100_000], 10_000, 10_000, 2_000, 100_000
"""Sizes of `python -m bench --quick`; `--full` adds 1M workflows and 50k trajectories."""

AGENT_STARTS = 10
"""Fresh agent processes per revision whose median is the agent start (bench/agent_start.py)."""


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
        "ann": "faiss HNSW" if ann_available() else "none (brute force only)",
        "load_average_1m_at_start": round(load[0], 2),
    }


def _key(n: int) -> str:
    return f"{n // 1_000_000}m" if n >= 1_000_000 else f"{n // 1000}k"


def run_bench(
    *, full: bool = False, scale: float = 1.0, py313: str | None = None, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Measure everything; sizes are the quick ones (plus the full ones) times `scale`, but the keys
    keep the nominal sizes (`FLOWMEM_BENCH_SCALE=0.001` makes a smoke test of it: below scale 1,
    fewer repeats and one second of API load instead of five)."""

    def size(n: int) -> int:
        return max(10, int(n * scale))

    out: dict[str, Any] = {"machine": machine(), "scale": scale, "full": full}
    log("agent start: import + open + first step, fresh processes, this checkout and before ...")
    out.update(agent_start(AGENT_STARTS if scale >= 1 else 1))
    log("hook: run.step ...")
    out.update(hook_step(size(HOOK), rounds=HOOK_ROUNDS if scale >= 1 else 1))
    sizes = SEARCH + ([1_000_000] if full else [])
    for n in sizes:
        log(f"search: {n:,} workflows ...")
        found = measure_search(
            size(n), repeats=300 if scale >= 1 else 20, lance=n <= 10_000 or full, evidence=n == SEARCH[-1]
        )
        out[f"search_{_key(n)}"] = found
        out[f"search_ms_p50_{_key(n)}"] = found["flowmem_p50_ms"]
        out[f"search_recall_at_3_{_key(n)}"] = found["recall_at_3"]
        out[f"search_rss_mb_{_key(n)}"] = found["rss_mb"]
        if "nonrecurring_p50_ms" in found:
            out[f"search_nonrecurring_ms_p50_{_key(n)}"] = found["nonrecurring_p50_ms"]
    out["search_vs_bruteforce_ratio"] = out["search_100k"]["vs_numpy"]
    for n in [INDUCE] + ([50_000] if full else []):
        log(f"induction: {n:,} trajectories (CLI, Prefect flow, incremental) ...")
        found = induction(size(n))
        out[f"induction_{_key(n)}"] = found
        if n == INDUCE:
            out["induce_10k_s"] = found["ingest_s"] + found["induce_s"]
            out["induce_flow_10k_s"] = found["flow_ingest_s"] + found["flow_induce_s"]
            out["flow_vs_cli_ratio"] = out["induce_flow_10k_s"] / out["induce_10k_s"]
            out["prefect_server_start_s"] = found["prefect_server_start_s"]
            out["incremental_ratio"] = found["incremental_ratio"]
            out["induce_nothing_new_ratio"] = found["induce_nothing_new_s"] / found["induce_s"]
            out["incremental_inprocess_ratio"] = found["incremental_inprocess_ratio"]
    log(f"api: 8 and 32 clients, {API:,} workflows ...")
    out.update(api_search(size(API), seconds=5.0 if scale >= 1 else 1.0))
    log("memharness ...")
    out.update(memharness(py313, size(MEMHARNESS), repeats=20 if scale >= 1 else 3))
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure everything at the quick sizes (or the full ones), write the results as JSON and
    print them as one table (or, with `--json`, as one JSON object)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="The performance figures of docs/performance.md, side by side, measured now.",
        epilog="One benchmark alone: python -m bench NAME [ARGS] (python -m bench --list names them).",
    )
    parser.add_argument("--full", action="store_true", help="add 1M workflows and 50k trajectories")
    parser.add_argument("--quick", action="store_true", help="quick sizes only (the default)")
    parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON object")
    parser.add_argument(
        "--out",
        type=Path,
        default=LOCAL,
        metavar="FILE",
        help=f"where to write the results (default {LOCAL.relative_to(BENCH.parent)}, git-ignored)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("LANCEDB_LOG", "error")
    err = Console(stderr=True)
    results = run_bench(
        full=args.full and not args.quick,
        scale=float(os.environ.get("FLOWMEM_BENCH_SCALE", "1")),
        py313=os.environ.get("FLOWMEM_BENCH_PY313"),
        log=lambda line: err.print(line, style="dim"),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    if args.as_json:
        sys.stdout.write(json.dumps(results) + "\n")
        return 0
    console = Console(width=max(Console().width, 150))
    console.print(" ".join(f"{k}={v}" for k, v in results["machine"].items()))
    console.print(table(results))
    console.print(f"written to {args.out}")
    return 0
