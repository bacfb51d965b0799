"""`flowmem eval --online`: replay a set of runs batch by batch, as production would see them.

The runs are put in a fixed order — sorted by id, then shuffled by `random.Random(seed)` —
and cut into `batches` consecutive batches. Batch b is served (each run's task, as an agent
would ask it) by the memory of the runs of batches 1..b-1: flowmem's workflows, induced by the
production path (`jobs.induce.run_induction`, incremental: one induction run after each batch joins
the store, placing new tasks in the stored clusters or refitting them), and raw memory (the
successful runs stored). Batch b then joins the store. Each batch is scored as `flowmem eval`
scores its test set (`jobs.evaluate.retrieve` and `score`), so the figures compare. Batch 1
is served by an empty memory: it is reported, and left out of any judgement.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from flowmem.induction.base import Inducer
from flowmem.jobs.evaluate import Figures, Scores, Served, Timing, retrieve, score
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import RunSummary, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory
from flowmem.settings import Settings

__all__ = [
    "CURVE_KEYS",
    "ORDER",
    "Batch",
    "BatchInduction",
    "BatchReport",
    "OnlineReport",
    "ReplayInputs",
    "evaluate_online",
    "plot_curve",
    "replay",
    "report_of",
    "split_batches",
]

ORDER = "sorted by id, then random.Random(seed).shuffle; cut into consecutive batches"
"""How the replay orders the runs (reported with the figures)."""

CURVE_KEYS = ("joint_coverage", "joint_precision")
"""The figures the curve shows, per batch, for both systems."""

_FROZEN = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class BatchInduction(BaseModel):
    """What a batch's report tells of the induction run that made its memory (`RunSummary`'s
    figures, without run ids: they differ from one replay to the next)."""

    model_config = _FROZEN

    clusters: int
    """Clusters of the namespace after the run."""
    clusters_changed: int
    """Clusters induced by the run."""
    clusters_deferred: int
    """Clusters whose new runs wait until they change the cluster materially."""
    refit: str | None
    """Why the clusters were fitted again; None when the new runs were placed in the stored ones."""
    versions_created: int
    """New workflow versions stored."""

    @classmethod
    def of(cls, summary: RunSummary) -> BatchInduction:
        """The figures of an induction run's summary."""
        return cls.model_validate(summary.model_dump(include=set(cls.model_fields)))


class BatchReport(BaseModel):
    """One batch of `flowmem eval --online`'s report."""

    model_config = _FROZEN

    batch: int
    """1-based position of the batch in the replay."""
    runs: int
    """The batch's runs (its test runs)."""
    memory_runs: int
    """Runs the store held when the batch was served: those of the batches before it."""
    judged: bool
    """Whether the batch counts in a judgement (batch 1 is served by an empty memory)."""
    induction: BatchInduction | None
    """The induction run that made the memory; None for batch 1."""
    flowmem: Figures
    """flowmem's figures on the batch (`jobs.evaluate.score`)."""
    raw: Figures
    """Raw memory's figures on the batch."""


class ReplayInputs(BaseModel):
    """What a replay ran on."""

    model_config = _FROZEN

    runs: int
    """Runs replayed (distinct ids)."""
    batches: int
    """Batches they were cut into."""
    seed: int
    """The shuffle's seed."""
    k: int
    """Memories retrieved per task."""
    inducer: str
    """The inducer's kind (`rule`, `llm`)."""
    order: str
    """How the runs were ordered (`ORDER`)."""


class OnlineReport(BaseModel):
    """`flowmem eval --online`'s report (`report_of`): `--json` prints this model's JSON, with
    the curve's path."""

    model_config = _FROZEN

    batches: list[BatchReport]
    """Every batch, in replay order."""
    inputs: ReplayInputs
    """What was replayed."""
    timing: Timing
    """Seconds per phase, every batch together."""


def split_batches(runs: Sequence[Trajectory], batches: int, *, seed: int) -> list[list[Trajectory]]:
    """The replay order, cut into `batches` consecutive batches whose sizes differ by at most
    one (the first ones take the remainder). A run whose id came earlier is dropped.

    Raises:
        ValueError: if `batches` < 2 or there are fewer distinct runs than batches.
    """
    unique: dict[str, Trajectory] = {}
    for t in runs:
        unique.setdefault(t.id, t)
    if batches < 2:
        raise ValueError(f"--batches must be at least 2 (batch 1 has no memory), not {batches}")
    if len(unique) < batches:
        raise ValueError(f"{len(unique)} distinct runs cannot make {batches} batches")
    order = sorted(unique.values(), key=lambda t: t.id)
    random.Random(seed).shuffle(order)
    size, extra = divmod(len(order), batches)
    out, start = [], 0
    for b in range(batches):
        end = start + size + (b < extra)
        out.append(order[start:end])
        start = end
    return out


@dataclass(frozen=True)
class Batch:
    """One batch of the replay: its runs, the memory that served them, and the figures."""

    index: int
    """1-based position of the batch in the replay."""
    runs: list[Trajectory]
    """The batch's runs, in replay order (its test runs)."""
    memory: list[str]
    """Ids of the runs the store held when the batch was served: those of batches < index."""
    served: Served
    """What both systems served for each run, and what they served from."""
    figures: Scores
    """Both systems' figures on the batch (`jobs.evaluate.score`)."""
    induction: RunSummary | None
    """The induction run that made the memory (`RunReport.summary`); None for batch 1."""
    timing: Timing
    """Seconds spent storing, inducing, retrieving and scoring for this batch."""

    def report(self) -> BatchReport:
        """The batch's figures, as the online report shows them."""
        return BatchReport(
            batch=self.index,
            runs=len(self.runs),
            memory_runs=len(self.memory),
            judged=self.index > 1,
            induction=None if self.induction is None else BatchInduction.of(self.induction),
            flowmem=self.figures.flowmem,
            raw=self.figures.raw,
        )


def replay(
    runs: Sequence[Trajectory],
    inducer: Inducer,
    *,
    settings: Settings,
    batches: int = 6,
    seed: int = 0,
    k: int = 3,
) -> Iterator[Batch]:
    """Replay `runs` in a temporary store (`split_batches` order): yield each batch as it is
    served, then store it and run one incremental induction over the namespace."""
    order = split_batches(runs, batches, seed=seed)
    ns = settings.namespace
    with tempfile.TemporaryDirectory(prefix="flowmem-online-") as tmp:
        run_settings = settings.model_copy(update={"db": str(Path(tmp) / "db")})
        store = store_from(run_settings)
        stored: list[Trajectory] = []
        induction: RunSummary | None = None
        for b, batch in enumerate(order, 1):
            store_s = induce_s = 0.0
            if b > 1:
                t0 = time.perf_counter()
                joining = [t.model_copy(update={"namespace": ns}) for t in order[b - 2]]
                store_trajectories(store, joining, settings.scrub)
                stored += order[b - 2]
                t1 = time.perf_counter()
                induction = run_induction(store, run_settings, inducer, namespace=ns).summary()
                store_s, induce_s = t1 - t0, time.perf_counter() - t1
            t2 = time.perf_counter()
            served = retrieve(store, batch, namespace=ns, k=k, settings=settings)
            t3 = time.perf_counter()
            figures = score(served, stored, settings, memories=len(served.workflows))
            timing = Timing(
                store_s=store_s, induce_s=induce_s, retrieve_s=t3 - t2, score_s=time.perf_counter() - t3
            )
            yield Batch(b, batch, [t.id for t in stored], served, figures, induction, timing)


def evaluate_online(
    runs: Sequence[Trajectory],
    inducer: Inducer,
    *,
    settings: Settings,
    batches: int = 6,
    seed: int = 0,
    k: int = 3,
) -> OnlineReport:
    """The whole replay as one report."""
    done = list(replay(runs, inducer, settings=settings, batches=batches, seed=seed, k=k))
    return report_of(done, inducer_kind=inducer.kind, batches=batches, seed=seed, k=k)


def report_of(done: Sequence[Batch], *, inducer_kind: str, batches: int, seed: int, k: int) -> OnlineReport:
    """The report of a replay's batches (what `flowmem eval --online --json` prints)."""
    return OnlineReport(
        batches=[b.report() for b in done],
        inputs=ReplayInputs(
            runs=sum(len(b.runs) for b in done),
            batches=batches,
            seed=seed,
            k=k,
            inducer=inducer_kind,
            order=ORDER,
        ),
        timing=sum((b.timing for b in done), Timing()).rounded(),
    )


def plot_curve(report: OnlineReport, path: Path, *, title: str = "flowmem eval --online") -> Path | None:
    """Save the per-batch curve of `CURVE_KEYS` (flowmem against raw memory, batches 2 on) as
    a PNG; None when matplotlib is not installed (`pip install 'flowmem[plot]'`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    judged = [b for b in report.batches if b.judged]
    xs = [b.batch for b in judged]
    fig, axes = plt.subplots(1, len(CURVE_KEYS), figsize=(9, 3.6), constrained_layout=True)
    for ax, key in zip(axes, CURVE_KEYS, strict=True):
        ax.plot(xs, [getattr(b.flowmem, key) for b in judged], "o-", label="flowmem")
        ax.plot(xs, [getattr(b.raw, key) for b in judged], "s--", label="raw runs")
        ax.set_xlabel("batch (served by the memory of the batches before it)")
        ax.set_ylabel(key.replace("_", " "))
        ax.set_xticks(xs)
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right")
    inputs = report.inputs
    fig.suptitle(f"{title}: {inputs.runs} runs, {inputs.batches} batches, seed {inputs.seed}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
