"""Serving chosen to cover the nearest past runs: how close does it come to issue 24's bars?

Online, raw memory serves a recurring task's own earlier runs, and three real runs of one task
cover more of a new run than the workflows the relevance gap and ratio leave (docs/metrics.md,
"Measured online"). This replays, over the same induced memory, the relevance gap and ratio alone
against a choice made with the nearest successful stored runs as evidence of what the task
will need: greedily, the workflows among the 30 best-ranked that most raise the mean, over
those runs (the 3 nearest, and any tied with the third), of joint coverage + W x joint
precision, stopping when nothing raises it (at most k = 3).

Memories are induced as `flowmem eval` does (rule inducer, keys as `jobs.induce.key_vectors`
chooses them, one full induction, not incremental); sets: the three shared sets' splits and the
online replays of `bench/online_sets.py` (6 batches, seed 0, batches 3-6 each served by a full
induction of the batches before it). Prints joint coverage / joint precision per policy,
raw memory first.

Usage: python bench/serving_cover.py [DATA_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.online import split_batches
from flowmem.models import Trajectory
from flowmem.retrieval.align import lcs_pairs
from flowmem.retrieval.cover import cover
from flowmem.retrieval.serving import compose, within_gap
from flowmem.settings import Settings

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.eval_sets import SPLITS, agent_split
from bench.online_sets import BATCHES, JUDGED_FROM, sets
from bench.paths import SHARED_DATA
from bench.serving_frontier import induced_store

Actions = list[str]
WEIGHTS = (0.2, 0.25, 0.3)
"""W, the weight of precision against coverage in the choice."""
POOL = 30
"""Ranked workflows the choice looks at."""


def figures(test: Sequence[Actions], served: Sequence[Sequence[Actions]]) -> tuple[float, float]:
    """Mean joint coverage and joint precision (docs/metrics.md) of `served` on `test`."""
    coverage = precision = 0.0
    for actions, memories in zip(test, served, strict=True):
        matched: set[int] = set()
        hits = shown = 0
        for memory in memories:
            pairs = lcs_pairs(actions, memory)
            matched.update(i for i, _ in pairs)
            hits, shown = hits + len(pairs), shown + len(memory)
        coverage += len(matched) / len(actions)
        precision += hits / shown if shown else 0.0
    return coverage / len(test), precision / len(test)


def nearest_runs(scores: npt.NDArray[np.float32], runs: Sequence[Trajectory], k: int = 3) -> list[Actions]:
    """The k most similar runs' actions, and any tied with the k-th."""
    order = np.lexsort((np.arange(len(runs)), -scores))
    if len(order) == 0:
        return []
    tie = scores[order[min(k, len(order)) - 1]]
    return [runs[i].actions for i in order if scores[i] >= tie - 1e-6]


def replay(train: Sequence[Trajectory], test: Sequence[Trajectory], settings: Settings) -> list[str]:
    """One memory: raw, the gap and ratio alone and each weight's choice, as 'coverage/precision' cells."""
    ns = settings.namespace
    scored = [t for t in test if t.success and t.actions]
    with tempfile.TemporaryDirectory() as tmp:
        store, ws, index = induced_store(train, settings, Path(tmp) / "db")
        examples, t_matrix = store.trajectory_index(namespace=ns, success=True)
        queries = store.embedder.embed([t.task for t in scored])
    tests = [t.actions for t in scored]
    raw, now = [], []
    choices: dict[float, list[list[Actions]]] = {w: [] for w in WEIGHTS}
    for q in queries:
        scores = t_matrix @ q
        evidence = nearest_runs(scores, examples)
        raw.append([examples[i].actions for i in np.lexsort((np.arange(len(examples)), -scores))[:3]])
        ranked = index.search(q, POOL)
        cut = ranked[: within_gap([s for _, s in ranked], settings.relevance_gap, settings.relevance_ratio)]
        shown = [ws[i] for i, _ in cut]
        now.append([shown[p].actions for p in compose(shown, 3)])
        candidates = [ws[i].actions for i, _ in ranked]
        for w in WEIGHTS:
            picked = cover(candidates, evidence, 3, w) if evidence else list(range(min(1, len(candidates))))
            choices[w].append([candidates[i] for i in picked])
    cells = [figures(tests, raw), figures(tests, now), *(figures(tests, choices[w]) for w in WEIGHTS)]
    return [f"{c:.3f}/{p:.3f}" for c, p in cells]


def memories(data: Path, settings: Settings) -> Iterator[tuple[str, list[Trajectory], list[Trajectory]]]:
    """(name, train, test) of the three shared sets and of each judged online batch."""
    for name, (file, is_train) in SPLITS.items():
        if (data / file).exists():
            runs = [t for t in read_trajectories(data / file, settings) if not isinstance(t, Rejection)]
            yield name, [t for t in runs if is_train(t)], [t for t in runs if not is_train(t)]
    agents = agent_split(data, settings)
    if agents is not None:
        yield ("tau2_agents", *agents)
    for name, runs in sets(data, settings).items():
        batches = split_batches(runs, BATCHES, seed=0)
        for b in range(JUDGED_FROM, BATCHES + 1):
            yield f"{name} batch {b}", [t for x in batches[: b - 1] for t in x], batches[b - 1]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    data = Path(argv[0]) if argv else SHARED_DATA
    settings = Settings()
    heads = ["raw", "gap and ratio", *(f"cover, W={w}" for w in WEIGHTS)]
    print("| memory | " + " | ".join(heads) + " |")
    print("|---|" + "---|" * len(heads))
    for name, train, test in memories(data, settings):
        print(f"| {name} | " + " | ".join(replay(train, test, settings)) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
