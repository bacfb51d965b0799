"""Search at N served workflows, side by side: `memory.search`, numpy exact, LanceDB flat and
indexed, with recall@3 against exact and the memory the served index takes."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from bench.data import fill, queries
from flowmem.agents import WorkflowMemory
from flowmem.agents.served_index import ServedIndex
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings

__all__ = ["measure_search", "p50", "rss_mb"]


def rss_mb() -> float:
    """This process's resident memory now, in MB (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 1e6
    except OSError:
        return 0.0


def p50(fn: Callable[[int], object], repeats: int) -> tuple[float, float]:
    """Median and 95th percentile of fn(i) over `repeats` calls, in ms."""
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), float(np.percentile(times, 95))


def _wait_for_ann(index: ServedIndex, timeout: float) -> float:
    """Seconds until the served index's ANN is ready (it builds in the background)."""
    start = time.perf_counter()
    snap = index._snapshot
    while snap.wants_ann() and snap.slot.ann is None and time.perf_counter() - start < timeout:
        time.sleep(0.05)
    return time.perf_counter() - start


def measure_search(
    n: int, *, repeats: int = 300, lance: bool = True, lance_index: bool = True
) -> dict[str, Any]:
    """Every search figure at n workflows (one key each), on a fresh temporary store."""
    out: dict[str, Any] = {"n": n}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=f"{tmp}/db")
        store = store_from(settings)
        start = time.perf_counter()
        fill(store, n)
        out["insert_s"] = time.perf_counter() - start
        tasks = queries(repeats)
        vectors = store.embedder.embed(tasks)
        before = rss_mb()
        with WorkflowMemory(settings) as memory:
            start = time.perf_counter()
            memory.search(tasks[0])  # loads the index, as an agent's first search does
            out["load_s"] = time.perf_counter() - start
            out["ann_build_s"] = _wait_for_ann(memory.index, 600)
            # The growth of this process's RSS (the heap the fill freed may be reused, so the
            # total is given too).
            out["rss_mb"], out["rss_total_mb"] = rss_mb() - before, rss_mb()
            snap = memory.index._snapshot
            keys = snap.index.vectors
            out["vectors_mb"] = keys.nbytes / 1e6
            out["flowmem_p50_ms"], out["flowmem_p95_ms"] = p50(
                lambda i: memory.search(tasks[i], k=3), repeats
            )
            out["embed_p50_ms"] = p50(lambda i: store.embedder.embed([tasks[i]]), repeats)[0]
            exact = ServedIndex(
                store,
                settings.namespace,
                gap=memory.index.bounds.gap,
                ratio=memory.index.bounds.ratio,
                ann_min=len(keys) + 1,
            )
            hits = 0.0
            for task in tasks:
                want = {h.workflow.id for h in exact.search(task, k=3)}
                hits += len(want & {h.workflow.id for h in memory.search(task, k=3)}) / max(1, len(want))
            out["recall_at_3"] = hits / len(tasks)
            out["numpy_p50_ms"] = p50(lambda i: np.argpartition(-(keys @ vectors[i]), 3)[:3], repeats)[0]
        if lance:
            out.update(_lance(store, vectors, repeats, index=lance_index))
    out["vs_numpy"] = out["flowmem_p50_ms"] / out["numpy_p50_ms"]
    return out


def _lance(store: Any, vectors: Any, repeats: int, *, index: bool) -> dict[str, float]:
    """LanceDB's own search over the workflows table's `vector` column: flat, then IVF_PQ."""
    table = store.db.open_table("workflows__default")

    def search(i: int) -> object:
        query = table.search(vectors[i], vector_column_name="vector").metric("cosine").limit(3)
        return query.refine_factor(10).to_list() if indexed else query.to_list()

    indexed = False
    out = {"lance_flat_p50_ms": p50(search, min(repeats, 100))[0]}
    if index and table.count_rows() >= 5_000:
        start = time.perf_counter()
        table.create_index(metric="cosine", vector_column_name="vector", index_type="IVF_PQ")
        out["lance_index_build_s"] = time.perf_counter() - start
        indexed = True
        out["lance_ivfpq_p50_ms"] = p50(search, min(repeats, 100))[0]
    return out
