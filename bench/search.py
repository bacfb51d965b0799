"""Search at N served workflows, side by side: `memory.search`, numpy exact, LanceDB flat and
indexed, with recall@3 against exact and the memory the served index takes; at the largest
size, a task that does not recur, from no known domain, against that many stored runs.

`memory.search` (embedding the task included) and numpy exact are timed in turn, in blocks
of queries, so that a busy machine slows both alike (`interleaved`). Numpy exact is one
matrix-vector product over the same key matrix and `argpartition` (the query already
embedded), as a caller would write it (on its BLAS's threads), and the same on one BLAS
thread, as the served index runs its products. "Same work" is numpy exact doing what a search
does besides ranking: the task embedded (no cache), the product and `argpartition`, and the
three nearest versions built as `Workflow`s from the served rows (not from the search's cache
of recent hits).

Usage: python -m bench search [N ...] [--repeats R] [--no-lance] [--json] [--record FILE]
  (default: 10000 100000, with 100000 stored runs at the largest size; `--record` writes the
  search figures into a recorded run, e.g. bench/results/latest.json, the rest of it kept)
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import fill, foreign_queries, queries, task_text
from flowmem.agents import WorkflowMemory
from flowmem.agents.served_index import ServedIndex
from flowmem.jobs.factories import store_from
from flowmem.retrieval.ann import AnnSlot, build_ann
from flowmem.retrieval.blas import ONE_BLAS_THREAD
from flowmem.retrieval.cover import Evidence
from flowmem.settings import Settings

__all__ = ["interleaved", "main", "measure_search", "p50", "rss_mb"]


def rss_mb() -> float:
    """This process's resident memory now, in MB (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 / 1e6
    except OSError:
        return 0.0


def p50(fn: Callable[[int], object], repeats: int) -> tuple[float, float]:
    """Median and 95th percentile of fn(i) over `repeats` calls, in ms."""
    return interleaved({"fn": fn}, repeats)["fn"][:2]


def interleaved(
    fns: dict[str, Callable[[int], object]], repeats: int, blocks: int = 3
) -> dict[str, tuple[float, float, float]]:
    """Median and 95th percentile of each fn(i) over `repeats` values of i, in ms, and the
    median of the calling thread's CPU time (what a busy machine does not add to: the time
    waiting for a core is left out; a BLAS's other threads too). The functions take turns in
    `blocks` blocks of queries each, so that a busy machine slows them alike; not query by
    query, as a BLAS's threads spin on after a product (OpenBLAS: ~0.1 s), taking the other
    core from whatever runs next."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for block in np.array_split(np.arange(repeats), min(blocks, repeats)):
        for name, fn in fns.items():
            for i in block.tolist():
                start, used = time.perf_counter(), time.thread_time()
                fn(i)
                times[name].append((time.perf_counter() - start) * 1000)
                cpu[name].append((time.thread_time() - used) * 1000)
    return {
        name: (statistics.median(t), float(np.percentile(t, 95)), statistics.median(cpu[name]))
        for name, t in times.items()
    }


def _wait_for_ann(index: ServedIndex, timeout: float) -> float:
    """Seconds until the served index's ANN is ready and its most served versions are kept
    built (`Settings.keep_built_mb`; both in the background)."""
    start = time.perf_counter()
    snap = index._snapshot
    while snap.wants_ann() and snap.slot.ann is None and time.perf_counter() - start < timeout:
        time.sleep(0.05)
    if snap.built.started:
        snap.built.kept.wait(max(0.0, timeout - (time.perf_counter() - start)))
    return time.perf_counter() - start


def measure_search(
    n: int, *, repeats: int = 300, lance: bool = True, lance_index: bool = True, evidence: bool = False
) -> dict[str, Any]:
    """Every search figure at n workflows (one key each), on a fresh temporary store; with
    `evidence`, a task that does not recur against n stored runs (`_nonrecurring`)."""
    out: dict[str, Any] = {"n": n, "load_average_1m": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=f"{tmp}/db")
        store = store_from(settings)
        start = time.perf_counter()
        fill(store, n, examples=True)
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

            def one_thread(i: int) -> object:
                with ONE_BLAS_THREAD:
                    return np.argpartition(-(keys @ vectors[i]), 3)[:3]

            embedder = getattr(memory.store.embedder, "inner", memory.store.embedder)  # no cache
            owners, rows = snap.index.owners, snap.rows

            def same_work(i: int) -> object:
                """Numpy exact doing what a search does besides ranking: the task embedded, the
                three nearest keys' versions built as `Workflow`s (read from the served rows, not
                from the search's cache of recent hits)."""
                query = embedder.embed([tasks[i]])[0]
                top = np.argpartition(-(keys @ query), 3)[:3]
                return rows.workflows(list(dict.fromkeys(owners[top].tolist())))

            timed = interleaved(
                {
                    "flowmem": lambda i: memory.search(tasks[i], k=3),
                    "numpy": lambda i: np.argpartition(-(keys @ vectors[i]), 3)[:3],
                    "numpy_1thread": one_thread,
                    "numpy_same_work": same_work,
                },
                repeats,
            )
            out["numpy_same_work_p50_ms"] = timed["numpy_same_work"][0]
            out["flowmem_p50_ms"], out["flowmem_p95_ms"], out["flowmem_cpu_p50_ms"] = timed["flowmem"]
            out["numpy_p50_ms"], out["numpy_1thread_p50_ms"] = timed["numpy"][0], timed["numpy_1thread"][0]
            out["numpy_1thread_cpu_p50_ms"] = timed["numpy_1thread"][2]
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
            if evidence:
                out.update(_nonrecurring(memory, settings, n, repeats))
        if lance:
            out.update(_lance(store, vectors, repeats, index=lance_index))
    out["vs_numpy"] = out["flowmem_p50_ms"] / out["numpy_p50_ms"]
    out["vs_numpy_same_work"] = out["flowmem_p50_ms"] / out["numpy_same_work_p50_ms"]
    out["vs_numpy_1thread"] = out["flowmem_p50_ms"] / out["numpy_1thread_p50_ms"]
    out["vs_numpy_1thread_cpu"] = out["flowmem_cpu_p50_ms"] / out["numpy_1thread_cpu_p50_ms"]
    return out


def _nonrecurring(memory: WorkflowMemory, settings: Settings, runs: int, repeats: int) -> dict[str, Any]:
    """`memory.search` of tasks from no known domain (`foreign_queries`: none recurs, the
    nearest memory is below the floor, so the stored runs are asked whether the domain is
    known) against `runs` stored runs, with the evidence's ANN (`Evidence.familiar`) and
    without it (every stored task scored, as before), in turn; and how often the two agree
    on whether a task is familiar, over those tasks and tasks like the stored ones.

    The stored runs are the bench's workflows' own tasks (`task_text(i)`, the vectors of their
    keys), and their ANN the keys' (the same vectors, built alike) unless a task is stored twice
    (then one of their own), put in the served index as `newest_successes` would read them from
    that many recorded runs. `bench/recurring.py` stores the runs, each HNSW its own."""
    index, snap = memory.index, memory.index._snapshot
    count = min(runs, len(snap.index.vectors))
    texts = [task_text(i) for i in range(count)]
    exact = Evidence(texts, [["task.do"]] * count, snap.index.vectors[:count], settings.literal_share)
    indexed = copy.copy(exact)
    # The keys' HNSW serves as the stored tasks' when they are the keys, each once; a task
    # stored twice is one row of theirs, so then they get one of their own, as the served index
    # builds it.
    ann = snap.slot.ann if exact.seen_vectors is exact.vectors else build_ann(exact.seen_vectors)
    object.__setattr__(indexed, "index", AnnSlot(ann if count == len(snap.index.vectors) else None))
    if indexed.index.ann is not None:  # as the served index does once that HNSW is built
        indexed.work_out_keys(snap.index.vectors)
    foreign = foreign_queries(repeats)

    def search(evidence: Evidence) -> Callable[[int], object]:
        def run(i: int) -> object:
            index._evidence = evidence
            return memory.search(foreign[i], k=3)

        return run

    timed = interleaved({"indexed": search(indexed), "exact": search(exact)}, repeats)
    floor = settings.floor
    vectors = memory.store.embedder.embed(foreign + queries(repeats, seed=3))
    agree = sum(indexed.familiar(v, floor) == exact.familiar(v, floor) for v in vectors) / len(vectors)
    return {
        "evidence_runs": count,
        "evidence_indexed": indexed.index.ann is not None,
        "nonrecurring_p50_ms": timed["indexed"][0],
        "nonrecurring_p95_ms": timed["indexed"][1],
        "nonrecurring_cpu_p50_ms": timed["indexed"][2],
        "nonrecurring_exact_p50_ms": timed["exact"][0],
        "nonrecurring_served_nothing": sum(not memory.search(t, k=3) for t in foreign) / len(foreign),
        "familiar_agreement": agree,
    }


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


_RECORDED = ("search_{key}", "search_ms_p50_{key}", "search_recall_at_3_{key}", "search_rss_mb_{key}")


def record_into(record: dict[str, Any], found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A recorded run with these search figures (by size key: 10k, 100k) in place of its own,
    as `python -m bench` writes them, and the machine's load when they were measured."""
    out = dict(record)
    for key, s in found.items():
        out[f"search_{key}"] = s
        out[f"search_ms_p50_{key}"] = s["flowmem_p50_ms"]
        out[f"search_recall_at_3_{key}"] = s["recall_at_3"]
        out[f"search_rss_mb_{key}"] = s["rss_mb"]
        if "nonrecurring_p50_ms" in s:
            out[f"search_nonrecurring_ms_p50_{key}"] = s["nonrecurring_p50_ms"]
    if "100k" in found:
        out["search_vs_bruteforce_ratio"] = found["100k"]["vs_numpy"]
    return out


def _key(n: int) -> str:
    return f"{n // 1_000_000}m" if n >= 1_000_000 else f"{n // 1000}k"


_HEADER = (
    "size",
    "load",
    "flowmem p50",
    "numpy exact",
    "1 BLAS thread",
    "same work",
    "ratio",
    "recall@3",
    "CPU ratio 1 th",
)


def _print(found: dict[str, dict[str, Any]]) -> None:
    """One row per size (p50s in ms), and the task that does not recur under the largest."""
    print(" ".join(f"{h:>13}" for h in _HEADER))
    for key, s in found.items():
        cells = [key, f"{s['load_average_1m']:.2f}"]
        shown = ("flowmem_p50_ms", "numpy_p50_ms", "numpy_1thread_p50_ms", "numpy_same_work_p50_ms")
        cells += [f"{s[k]:.3f}" for k in shown]
        cells += [f"{s['vs_numpy']:.2f}", f"{s['recall_at_3']:.3f}", f"{s['vs_numpy_1thread_cpu']:.2f}"]
        print(" ".join(f"{c:>13}" for c in cells))
        if "nonrecurring_p50_ms" in s:
            print(
                f"{key:>13} a task that does not recur, {s['evidence_runs']:,} stored runs: "
                f"{s['nonrecurring_p50_ms']:.3f} ms p50, CPU {s['nonrecurring_cpu_p50_ms']:.3f} ms "
                "(scoring every stored task: "
                f"{s['nonrecurring_exact_p50_ms']:.3f} ms); familiar agrees {s['familiar_agreement']:.3f}, "
                f"served nothing {s['nonrecurring_served_nothing']:.2f}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench search", description=__doc__.split("\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--json", action="store_true", dest="as_json")
    parser.add_argument("--no-lance", action="store_true", help="leave LanceDB's own search out")
    parser.add_argument(
        "--record", type=Path, metavar="FILE", help="write the figures into this recorded run"
    )
    args = parser.parse_args(argv)
    found: dict[str, dict[str, Any]] = {}
    for n in args.sizes:
        last = n == max(args.sizes)
        found[_key(n)] = measure_search(
            n, repeats=args.repeats, lance=not args.no_lance and n <= 10_000, evidence=last
        )
    if args.record:
        record = json.loads(args.record.read_text()) if args.record.exists() else {}
        args.record.write_text(json.dumps(record_into(record, found), indent=2) + "\n")
    if args.as_json:
        print(json.dumps(found))
        return 0
    _print(found)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
