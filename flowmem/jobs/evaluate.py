"""`flowmem eval`: induce from a train file in a temporary store, retrieve for each test task,
and score flowmem's workflows against the raw-trajectory baseline (docs/metrics.md)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from flowmem.induction.base import Inducer
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.pitfalls.conditions import any_holds
from flowmem.induction.plan.orchestrate import InductionResult
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

__all__ = [
    "EvalInputs",
    "EvalReport",
    "Figures",
    "FlowmemFigures",
    "RawFigures",
    "Scores",
    "Served",
    "Timing",
    "WarningFigures",
    "evaluate",
    "induced_store",
    "load",
    "retrieve",
    "score",
    "warnings",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


def _absent(value: object) -> bool:
    """A figure left out of the JSON when it is None (it does not apply: no groups, no LLM)."""
    return value is None


class Figures(BaseModel):
    """One system's figures on a set of test runs (definitions: docs/metrics.md): what
    `score` gives flowmem and raw memory alike, offline and per batch of `eval --online`."""

    model_config = _FROZEN

    coverage: float | None
    """Mean over scored test runs of the best memory's LCS with the run / the run's length."""
    step_precision: float | None
    """Mean over scored test runs of the best memory's matched steps / its length."""
    joint_coverage: float | None
    """Mean share of a run's steps that any served memory matches."""
    joint_precision: float | None
    """Mean share of the served memories' steps that match the run."""
    utility_rate: float | None
    """Share of scored test runs whose best memory matches at least two of their steps."""
    leakage: float
    """Share of served (run, memory) pairs whose text holds a rare literal of the training runs."""
    slot_leakage: float | None
    """The same for the training runs' slot values; None without slots."""
    tokens_per_prompt: float
    """Mean whitespace tokens of the memories served for one test run."""
    memories: int
    """Memories the system serves from."""
    scored_test_runs: int
    """Successful test runs with at least one step: what the means are over."""
    served_nothing: float
    """Share of test runs served no memory."""
    redundancy: float | None
    """Mean LCS overlap of pairs of memories (AWM's function overlap); None below two."""
    redundancy_pairs: int
    """How many pairs `redundancy` is over."""
    slot_values_checked: int | None
    """Example-specific slot values `slot_leakage` looks for; None without slots."""
    described: float | None
    """Share of workflows whose description says when to use them; None for raw memory."""


class WarningFigures(BaseModel):
    """Whether the served pitfalls' conditions hold on the test runs (`metrics.warning_metrics`)."""

    model_config = _FROZEN

    warned: float | None
    """Share of failed test runs on which a served pitfall's condition holds (None without any)."""
    false_alarms: float | None
    """The same share of successful test runs (None without any)."""
    failed_test_runs: int
    """Failed test runs (`warned`'s denominator)."""
    successful_test_runs: int
    """Successful test runs (`false_alarms`' denominator)."""


class FlowmemFigures(Figures):
    """flowmem's figures in `flowmem eval`: `Figures`, then how it clustered, its pitfalls and
    their warnings beside the contrast baseline's, its failed clusters and the LLM's usage."""

    cluster_ari: float | None = Field(default=None, exclude_if=_absent)
    """ARI of the clusters against the runs' known groups; absent when no run has a group."""
    cluster_nmi: float | None = Field(default=None, exclude_if=_absent)
    """NMI of the same; absent when no run has a group."""
    noise_fraction: float | None = Field(default=None, exclude_if=_absent)
    """Share of grouped training runs left out of every cluster; absent when no run has a group."""
    pitfall_notes: int
    """Clusters of failed runs only, given pitfall notes instead of a workflow."""
    pitfalls: int
    """Pitfalls of the induced workflows."""
    warned: float | None
    """`WarningFigures.warned` of the pitfalls of the workflows served."""
    false_alarms: float | None
    """`WarningFigures.false_alarms` of the same."""
    failed_test_runs: int
    """Failed test runs."""
    successful_test_runs: int
    """Successful test runs."""
    contrast_warned: float | None
    """`warned` of the contrast baseline (the nearest failed and successful training runs)."""
    contrast_false_alarms: float | None
    """`false_alarms` of the contrast baseline."""
    failed_clusters: int
    """Clusters whose induction failed."""
    rejected_clusters: dict[str, int]
    """Failed clusters counted by reason, most frequent first."""
    llm_calls: int | None = Field(default=None, exclude_if=_absent)
    """LLM calls made; only for the LLM inducer."""
    llm_retries: int | None = Field(default=None, exclude_if=_absent)
    """LLM calls retried; only for the LLM inducer."""
    llm_rejected: int | None = Field(default=None, exclude_if=_absent)
    """LLM outputs dropped for good; only for the LLM inducer."""
    llm_tokens: int | None = Field(default=None, exclude_if=_absent)
    """LLM tokens used; only for the LLM inducer."""


class RawFigures(Figures):
    """Raw memory's figures in `flowmem eval`: `Figures`, with the contrast baseline's warnings."""

    warned: float | None
    """`FlowmemFigures.contrast_warned`: raw runs warn by the contrast of the nearest ones."""
    false_alarms: float | None
    """`FlowmemFigures.contrast_false_alarms`."""
    rejected_clusters: dict[str, int]
    """Always empty (raw memory has no clusters): the row `FlowmemFigures` has, for the table."""


class Scores(BaseModel):
    """Both systems' figures on one set of test runs (`score`)."""

    model_config = _FROZEN

    flowmem: Figures
    """flowmem's workflows, served as `memory.search` serves them."""
    raw: Figures
    """The k successful stored runs whose task is nearest."""


class Timing(BaseModel):
    """Seconds spent in each phase of an evaluation (rounded to 0.01 in a report)."""

    model_config = _FROZEN

    store_s: float = 0.0
    """Storing the training runs."""
    induce_s: float = 0.0
    """Inducing from them."""
    retrieve_s: float = 0.0
    """Serving the test tasks (and checking the pitfalls' warnings)."""
    score_s: float = 0.0
    """Scoring what was served."""

    def __add__(self, other: Timing) -> Timing:
        return Timing(
            store_s=self.store_s + other.store_s,
            induce_s=self.induce_s + other.induce_s,
            retrieve_s=self.retrieve_s + other.retrieve_s,
            score_s=self.score_s + other.score_s,
        )

    def rounded(self) -> Timing:
        """The same, each to 0.01 s."""
        return Timing(
            store_s=round(self.store_s, 2),
            induce_s=round(self.induce_s, 2),
            retrieve_s=round(self.retrieve_s, 2),
            score_s=round(self.score_s, 2),
        )

    @property
    def total(self) -> float:
        """Every phase's seconds."""
        return self.store_s + self.induce_s + self.retrieve_s + self.score_s


class EvalInputs(BaseModel):
    """What an offline evaluation ran on."""

    model_config = _FROZEN

    train: int
    """Training runs (demonstrations included)."""
    test: int
    """Test runs."""
    k: int
    """Memories retrieved per test task."""
    inducer: str
    """The inducer's kind (`rule`, `llm`)."""


class EvalReport(BaseModel):
    """`flowmem eval`'s report (`evaluate`): `--json` prints this model's JSON."""

    model_config = _FROZEN

    flowmem: FlowmemFigures
    """flowmem's figures."""
    raw: RawFigures
    """The raw-trajectory baseline's figures."""
    timing: Timing
    """Seconds per phase."""
    inputs: EvalInputs
    """What was evaluated."""


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


def score(served: Served, train: Sequence[Trajectory], settings: Settings, *, memories: int) -> Scores:
    """Both systems' figures (docs/metrics.md). `train` is what the memories were made from (its
    rare literals and slot values are the leaks); `memories` is flowmem's count (raw's is the
    successful runs of `train`)."""
    literal_index = LiteralIndex.build(train, max_share=settings.literal_share)
    leak = LeakChecker(literal_index.rare_values())
    slots = [t.meta["slots"] for t in train if isinstance(t.meta.get("slots"), dict)]
    slot_values = slot_literals(slots, [t.task for t in train], max_share=settings.literal_share)
    slot_leak = LeakChecker(slot_values) if slots else None
    checked = len(slot_values) if slots else None
    n_raw = sum(1 for t in train if t.success is True)
    workflows = sorted(served.workflows, key=lambda w: w.id)  # a fixed order, so a sample is reproducible
    examples = sorted(served.examples, key=lambda m: m.id)
    flowmem = Figures.model_validate(
        {
            **memory_metrics(served.flowmem, leak, slot_leak, memories),
            # A sub-routine a workflow is composed of counts as one step of it (docs/metrics.md).
            **redundancy([w.composed_actions for w in workflows]),
            "slot_values_checked": checked,
            "described": described([w.description for w in served.workflows]),
        }
    )
    raw = Figures.model_validate(
        {
            **memory_metrics(served.raw, leak, slot_leak, n_raw),
            **redundancy([m.actions for m in examples]),
            "slot_values_checked": checked,
            "described": None,
        }
    )
    return Scores(flowmem=flowmem, raw=raw)


def warnings(
    served: Served,
    train: Sequence[Trajectory],
    test: Sequence[Trajectory],
    embedder: Embedder,
    *,
    k: int = 3,
) -> tuple[WarningFigures, WarningFigures]:
    """Whether the served pitfalls' conditions hold on each test run (`warned`,
    `false_alarms`, docs/metrics.md): for flowmem (the pitfalls of the workflows it served the
    run's task), then for the contrast baseline (the pitfalls of the `k` nearest failed and `k`
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
    return (
        WarningFigures.model_validate(warning_metrics(outcomes, flow)),
        WarningFigures.model_validate(warning_metrics(outcomes, contrast)),
    )


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
) -> EvalReport:
    """Run the evaluation: both systems' figures, the time each phase took, and the inputs.

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
        warned, contrast = warnings(served, train, test, store.embedder, k=3)
        timing["retrieve_s"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    say("scoring")
    scores = score(served, train, settings, memories=len(versions))
    flowmem = FlowmemFigures(
        **scores.flowmem.model_dump(),
        **_clustering(train, result),
        pitfall_notes=len(result.notes),
        pitfalls=sum(len(w.pitfalls) for w in result.workflows),
        **warned.model_dump(),
        # Raw runs warn by the contrast of the nearest failed and successful ones: the baseline.
        contrast_warned=contrast.warned,
        contrast_false_alarms=contrast.false_alarms,
        failed_clusters=len(result.failed),
        rejected_clusters=rejected_clusters(result.failed_reasons),
        **(_llm_usage(result) if inducer.kind == "llm" else {}),
    )
    raw = RawFigures(
        **scores.raw.model_dump(),
        warned=contrast.warned,
        false_alarms=contrast.false_alarms,
        rejected_clusters={},
    )
    timing["score_s"] = time.perf_counter() - t3
    return EvalReport(
        flowmem=flowmem,
        raw=raw,
        timing=Timing.model_validate(timing).rounded(),
        inputs=EvalInputs(train=len(train), test=len(test), k=k, inducer=inducer.kind),
    )


def _clustering(train: Sequence[Trajectory], result: InductionResult) -> dict[str, float]:
    """ARI, NMI and noise of the clusters against the training runs' known groups
    (`metrics.clustering_scores`); empty when no run has a group."""
    labels: list[str | None] = []
    groups: list[str] = []
    label_of = {agent: c.label_of() for agent, c in result.clusterings.items()}
    for t in train:
        if t.group is None:
            continue
        label = label_of[t.agent].get(t.task, -1)
        labels.append(f"{t.agent}/{label}" if label >= 0 else None)
        groups.append(t.group)
    return clustering_scores(groups, labels) if groups else {}


def _llm_usage(result: InductionResult) -> dict[str, int]:
    """The LLM's usage over every cluster, failed ones included."""
    usage = result.usage
    return {
        "llm_calls": usage.calls,
        "llm_retries": usage.retries,
        "llm_rejected": len(usage.dropped),  # outputs dropped for good
        "llm_tokens": usage.tokens,
    }
