"""One benchmark run: every figure of `flowmem bench` in one dict, at quick or full sizes."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from typing import Any

import numpy as np

from flowmem.bench.pipeline import api_search, hook_step, induction, memharness
from flowmem.bench.search import measure_search
from flowmem.induction.ann import ann_available

__all__ = ["machine", "run_bench"]

SEARCH, INDUCE, API, MEMHARNESS, HOOK = [10_000, 100_000], 10_000, 10_000, 2_000, 100_000
"""Sizes of `flowmem bench --quick`; `--full` adds 1M workflows and 50k trajectories."""


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
    log("hook: run.step ...")
    out.update(hook_step(size(HOOK)))
    sizes = SEARCH + ([1_000_000] if full else [])
    for n in sizes:
        log(f"search: {n:,} workflows ...")
        found = measure_search(size(n), repeats=300 if scale >= 1 else 20, lance=n <= 10_000 or full)
        out[f"search_{_key(n)}"] = found
        out[f"search_ms_p50_{_key(n)}"] = found["flowmem_p50_ms"]
        out[f"search_recall_at_3_{_key(n)}"] = found["recall_at_3"]
        out[f"search_rss_mb_{_key(n)}"] = found["rss_mb"]
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
    log(f"api: 8 clients, {API:,} workflows ...")
    out.update(api_search(size(API), seconds=5.0 if scale >= 1 else 1.0))
    log("memharness ...")
    out.update(memharness(py313, size(MEMHARNESS), repeats=20 if scale >= 1 else 3))
    return out
