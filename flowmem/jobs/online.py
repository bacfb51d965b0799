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
from typing import Any

from flowmem.induction.base import Inducer
from flowmem.jobs.evaluate import Served, retrieve, score
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import RunSummary, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory
from flowmem.settings import Settings

__all__ = [
    "CURVE_KEYS",
    "ORDER",
    "Batch",
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

_INDUCTION_KEYS = ("refit", "clusters", "clusters_changed", "clusters_deferred", "versions_created")
"""What a batch's JSON reports of the induction run that made its memory (no run ids: they
differ from one replay to the next)."""


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
    figures: dict[str, Any]
    """`jobs.evaluate.score`: {"flowmem": {...}, "raw": {...}}."""
    induction: RunSummary | None
    """The induction run that made the memory (`RunReport.summary`); None for batch 1."""
    timing: dict[str, float]
    """Seconds spent storing, inducing, retrieving and scoring for this batch."""

    def to_json(self) -> dict[str, Any]:
        """The batch's figures as JSON-ready data."""
        return {
            "batch": self.index,
            "runs": len(self.runs),
            "memory_runs": len(self.memory),
            "judged": self.index > 1,
            "induction": None
            if self.induction is None
            else self.induction.model_dump(mode="json", include=set(_INDUCTION_KEYS)),
            **self.figures,
        }


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
            timing: dict[str, float] = {}
            if b > 1:
                t0 = time.perf_counter()
                joining = [t.model_copy(update={"namespace": ns}) for t in order[b - 2]]
                store_trajectories(store, joining, settings.scrub)
                stored += order[b - 2]
                t1 = time.perf_counter()
                induction = run_induction(store, run_settings, inducer, namespace=ns).summary()
                timing["store_s"], timing["induce_s"] = t1 - t0, time.perf_counter() - t1
            t2 = time.perf_counter()
            served = retrieve(store, batch, namespace=ns, k=k, settings=settings)
            t3 = time.perf_counter()
            figures = score(served, stored, settings, memories=len(served.workflows))
            timing["retrieve_s"], timing["score_s"] = t3 - t2, time.perf_counter() - t3
            yield Batch(b, batch, [t.id for t in stored], served, figures, induction, timing)


def evaluate_online(
    runs: Sequence[Trajectory],
    inducer: Inducer,
    *,
    settings: Settings,
    batches: int = 6,
    seed: int = 0,
    k: int = 3,
) -> dict[str, Any]:
    """The whole replay as one report: {"batches": [...], "inputs": {...}, "timing": {...}}."""
    done = list(replay(runs, inducer, settings=settings, batches=batches, seed=seed, k=k))
    return report_of(done, inducer_kind=inducer.kind, batches=batches, seed=seed, k=k)


def report_of(done: Sequence[Batch], *, inducer_kind: str, batches: int, seed: int, k: int) -> dict[str, Any]:
    """The report of a replay's batches (what `flowmem eval --online --json` prints)."""
    timing: dict[str, float] = {}
    for batch in done:
        for key, seconds in batch.timing.items():
            timing[key] = timing.get(key, 0.0) + seconds
    return {
        "batches": [b.to_json() for b in done],
        "inputs": {
            "runs": sum(len(b.runs) for b in done),
            "batches": batches,
            "seed": seed,
            "k": k,
            "inducer": inducer_kind,
            "order": ORDER,
        },
        "timing": {key: round(v, 2) for key, v in timing.items()},
    }


def plot_curve(report: dict[str, Any], path: Path, *, title: str = "flowmem eval --online") -> Path | None:
    """Save the per-batch curve of `CURVE_KEYS` (flowmem against raw memory, batches 2 on) as
    a PNG; None when matplotlib is not installed (`pip install 'flowmem[plot]'`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    judged = [b for b in report["batches"] if b["judged"]]
    xs = [b["batch"] for b in judged]
    fig, axes = plt.subplots(1, len(CURVE_KEYS), figsize=(9, 3.6), constrained_layout=True)
    for ax, key in zip(axes, CURVE_KEYS, strict=True):
        ax.plot(xs, [b["flowmem"][key] for b in judged], "o-", label="flowmem")
        ax.plot(xs, [b["raw"][key] for b in judged], "s--", label="raw runs")
        ax.set_xlabel("batch (served by the memory of the batches before it)")
        ax.set_ylabel(key.replace("_", " "))
        ax.set_xticks(xs)
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower right")
    inputs = report["inputs"]
    fig.suptitle(f"{title}: {inputs['runs']} runs, {inputs['batches']} batches, seed {inputs['seed']}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
