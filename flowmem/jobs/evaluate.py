"""`flowmem eval`: induce from a train file in a temporary store, retrieve for each test task,
and score flowmem's workflows against the raw-trajectory baseline (docs/metrics.md)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flowmem.induction.base import Inducer
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.pitfalls.conditions import any_holds
from flowmem.induction.render.metrics import (
    LeakChecker,
    Retrieval,
    clustering_scores,
    contrast_conditions,
    described,
    memory_metrics,
    redundancy,
    rejected_clusters,
    slot_literals,
    warning_metrics,
)
from flowmem.induction.render.render import render_trajectory, render_workflow, subroutines_shown
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import RunReport, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory, Workflow
from flowmem.retrieval.cover import choose, nearest
from flowmem.retrieval.embed import Embedder
from flowmem.retrieval.nearest import ExampleIndex, snap_cosines
from flowmem.retrieval.serving import CANDIDATES
from flowmem.settings import Settings
from flowmem.storage import Store
from flowmem.storage.evidence import evidence_of

__all__ = ["Served", "evaluate", "induced_store", "load", "retrieve", "score", "warnings"]


def load(path: Path, settings: Settings) -> list[Trajectory]:
    """Every valid trajectory of an interchange file (invalid lines are skipped)."""
    return [t for t in read_trajectories(path, settings) if not isinstance(t, Rejection)]


@dataclass(frozen=True)
class Served:
    """What both systems served for each test run, and the memories they served from."""

    flowmem: list[Retrieval]
    """Per test run, the workflows `memory.search` serves, rendered as `memory.context` does."""
    raw: list[Retrieval]
    """Per test run, the k successful stored runs whose task is nearest."""
    workflows: list[Workflow]
    """Every served workflow version of the namespace."""
    examples: list[Trajectory]
    """Every successful stored run of the namespace (raw memory)."""


def retrieve(
    store: Store,
    test: Sequence[Trajectory],
    *,
    namespace: str,
    k: int,
    settings: Settings,
) -> Served:
    """Serve each test task from the store as an agent would be served: flowmem's workflows
    (nearest example, within the settings' relevance gap of the first and above their floor,
    composed) and raw memory's runs."""
    # Brute force over in-process indexes read once from the store: at these sizes it is
    # exact and far faster than one LanceDB query per test task.
    queries = store.embedder.embed([t.task for t in test])
    workflows, k_matrix, owners, k_shares = store.workflow_index(namespace=namespace)
    w_text = {w.id: render_workflow(w) for w in workflows}  # as `memory.context` renders
    index = ExampleIndex(k_matrix, owners, len(workflows), k_shares)
    examples, t_matrix = store.trajectory_index(namespace=namespace, success=True)
    raw_index = ExampleIndex(t_matrix, range(len(examples)), len(examples))
    runs = evidence_of(store, namespace, settings)  # as `memory.search` reads them
    flow: list[Retrieval] = []
    raw: list[Retrieval] = []
    for t, q in zip(test, queries, strict=True):
        near = index.search(q, max(k, CANDIDATES))
        evidence = runs.runs_for(t.task, q)
        # The relevance floor, as `memory.search` applies it; every key here is an example task.
        similarity = [s for _, s in near]
        keep = runs.floor_keeps(q, settings.floor, similarity, [True] * len(near), recurs=bool(evidence))
        near = [pair for pair, kept in zip(near, keep, strict=True) if kept]
        ranked = [workflows[i] for i, _ in near]
        chosen = choose(
            ranked,
            [s for _, s in near],
            evidence,
            k,
            gap=settings.relevance_gap,
            ratio=settings.relevance_ratio,
            weight=settings.cover_weight,
        )
        hits = [ranked[p] for p in chosen]  # what `memory.search` serves
        # As `memory.context` renders them together: a workflow composed of a sub-routine
        # shown beside it names it instead of repeating its steps (`render_block`).
        shown = subroutines_shown(hits)
        texts = [render_workflow(w, shown=shown) if shown else w_text[w.id] for w in hits]
        flow.append(
            Retrieval(
                t.actions,
                t.success is True,
                [(w.id, w.pattern, text) for w, text in zip(hits, texts, strict=True)],
            )
        )
        found = [examples[i] for i, _ in raw_index.search(q, k)]
        raw.append(
            Retrieval(t.actions, t.success is True, [(m.id, m.actions, render_trajectory(m)) for m in found])
        )
    return Served(flow, raw, workflows, examples)


def score(
    served: Served, train: Sequence[Trajectory], settings: Settings, *, memories: int
) -> dict[str, Any]:
    """Both systems' figures (docs/metrics.md): {"flowmem": {...}, "raw": {...}}. `train` is
    what the memories were made from (its rare literals and slot values are the leaks);
    `memories` is flowmem's count (raw's is the successful runs of `train`)."""
    literal_index = LiteralIndex.build(train, max_share=settings.literal_share)
    leak = LeakChecker(literal_index.rare_values())
    slots = [t.meta["slots"] for t in train if isinstance(t.meta.get("slots"), dict)]
    slot_values = slot_literals(slots, [t.task for t in train], max_share=settings.literal_share)
    slot_leak = LeakChecker(slot_values) if slots else None
    n_raw = sum(1 for t in train if t.success is True)
    report: dict[str, Any] = {
        "flowmem": memory_metrics(served.flowmem, leak, slot_leak, memories),
        "raw": memory_metrics(served.raw, leak, slot_leak, n_raw),
    }
    workflows = sorted(served.workflows, key=lambda w: w.id)  # a fixed order, so a sample is reproducible
    # A sub-routine a workflow is composed of counts as one step of it (docs/metrics.md).
    report["flowmem"].update(redundancy([w.composed_actions for w in workflows]))
    report["raw"].update(redundancy([m.actions for m in sorted(served.examples, key=lambda m: m.id)]))
    for system in ("flowmem", "raw"):
        report[system]["slot_values_checked"] = len(slot_values) if slots else None
    report["flowmem"]["described"] = described([w.description for w in served.workflows])
    report["raw"]["described"] = None
    return report


def warnings(
    served: Served,
    train: Sequence[Trajectory],
    test: Sequence[Trajectory],
    embedder: Embedder,
    *,
    k: int = 3,
) -> dict[str, dict[str, float | int | None]]:
    """Whether the served pitfalls' conditions hold on each test run (`warned`,
    `false_alarms`, docs/metrics.md), for flowmem (the pitfalls of the workflows it served the
    run's task) and for the contrast baseline (the pitfalls of the `k` nearest failed and `k`
    nearest successful training runs by task, `metrics.contrast_conditions`)."""
    by_id = {w.id: w for w in served.workflows}
    outcomes = [t.success for t in test]
    flow = []
    for t, got in zip(test, served.flowmem, strict=True):
        conditions = [p.condition for wid, _, _ in got.memories for p in by_id[wid].pitfalls if p.condition]
        flow.append(any_holds(conditions, t))
    failed = [t for t in train if t.success is False]
    ok = [t for t in train if t.success is True]
    contrast = [False] * len(test)
    if failed and test:
        queries = embedder.embed([t.task for t in test])
        f_vectors, o_vectors = embedder.embed([t.task for t in failed]), embedder.embed([t.task for t in ok])
        for i, (t, q) in enumerate(zip(test, queries, strict=True)):
            # Snapped, as retrieval's cosines are: a task two runs share ties on any BLAS kernel.
            near_failed = [failed[j].actions for j in nearest(snap_cosines(f_vectors @ q), k)[:k]]
            near_ok = [ok[j].actions for j in nearest(snap_cosines(o_vectors @ q), k)[:k]] if ok else []
            contrast[i] = any_holds(contrast_conditions(near_failed, near_ok), t)
    return {"flowmem": warning_metrics(outcomes, flow), "contrast": warning_metrics(outcomes, contrast)}


@contextmanager
def induced_store(
    train: Sequence[Trajectory],
    inducer: Inducer,
    *,
    settings: Settings,
    timing: dict[str, float] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Iterator[tuple[Store, RunReport]]:
    """`train` stored in a temporary store (of `settings.namespace`) and one induction run over
    it by the code `flowmem induce` runs (`jobs.induce.run_induction`: its planning, bounded
    fit, reads and commit): what `flowmem eval` and the benchmarks measure, so that a figure
    they report is the production code's. The store is deleted on exit. `timing` receives
    `store_s` and `induce_s`; `progress(phase)` is told of each phase."""
    say = progress or (lambda phase: None)
    times = timing if timing is not None else {}
    ns = settings.namespace
    with tempfile.TemporaryDirectory(prefix="flowmem-eval-") as tmp:
        t0 = time.perf_counter()
        say(f"storing {len(train)} training runs")
        local = settings.model_copy(update={"db": str(Path(tmp) / "db")})
        store = store_from(local)
        store_trajectories(store, [t.model_copy(update={"namespace": ns}) for t in train], settings.scrub)
        times["store_s"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        say(f"inducing from {len(train)} runs")
        report = run_induction(store, local, inducer, namespace=ns)
        times["induce_s"] = time.perf_counter() - t1
        yield store, report


def evaluate(
    train: Sequence[Trajectory],
    test: Sequence[Trajectory],
    inducer: Inducer,
    *,
    settings: Settings,
    k: int = 3,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the evaluation; returns {"flowmem": {...}, "raw": {...}, "timing": {...}}.

    `progress(phase)` is called as each of its four phases starts (storing, inducing,
    retrieving, scoring), with what it works on."""
    say = progress or (lambda phase: None)
    timing: dict[str, float] = {}
    ns = settings.namespace
    train = [t.model_copy(update={"namespace": ns}) for t in train]
    with induced_store(train, inducer, settings=settings, timing=timing, progress=say) as (store, induced):
        result, versions = induced.result, induced.versions
        t2 = time.perf_counter()
        say(f"retrieving for {len(test)} test tasks")
        served = retrieve(
            store,
            test,
            namespace=ns,
            k=k,
            settings=settings,
        )
        warned = warnings(served, train, test, store.embedder, k=3)
        timing["retrieve_s"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    say("scoring")
    report = score(served, train, settings, memories=len(versions))
    labels: list[str | None] = []
    groups: list[str] = []
    label_of = {agent: c.label_of() for agent, c in result.clusterings.items()}
    for t in train:
        if t.group is None:
            continue
        label = label_of[t.agent].get(t.task, -1)
        labels.append(f"{t.agent}/{label}" if label >= 0 else None)
        groups.append(t.group)
    if groups:
        report["flowmem"].update(clustering_scores(groups, labels))
    report["flowmem"]["pitfall_notes"] = len(result.notes)
    report["flowmem"]["pitfalls"] = sum(len(w.pitfalls) for w in result.workflows)
    report["flowmem"].update(warned["flowmem"])
    # Raw runs warn by the contrast of the nearest failed and successful ones: the baseline.
    contrast = {key: warned["contrast"][key] for key in ("warned", "false_alarms")}
    report["flowmem"].update({f"contrast_{key}": value for key, value in contrast.items()})
    report["raw"].update(contrast)
    report["flowmem"]["failed_clusters"] = len(result.failed)
    report["flowmem"]["rejected_clusters"] = rejected_clusters(result.failed_reasons)
    report["raw"]["rejected_clusters"] = {}
    timing["score_s"] = time.perf_counter() - t3
    report["timing"] = {key: round(v, 2) for key, v in timing.items()}
    report["inputs"] = {"train": len(train), "test": len(test), "k": k, "inducer": inducer.kind}
    if inducer.kind == "llm":
        usage = result.usage  # every cluster's, failed ones included
        report["flowmem"]["llm_calls"] = usage.calls
        report["flowmem"]["llm_retries"] = usage.retries
        report["flowmem"]["llm_rejected"] = len(usage.dropped)  # outputs dropped for good
        report["flowmem"]["llm_tokens"] = usage.tokens
    return report
