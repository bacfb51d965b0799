"""Clustering quality on the WorkBench trajectories: what to embed, and how to cluster it.

Usage: python bench/cluster_quality.py [DATA] [--json]

DATA defaults to ../shared/data/workbench_trajectories.jsonl.gz (relative to the repo root).
Only the training split is used (meta.instance <= 6). Every row clusters the runs (or their
distinct task texts, with each run taking its text's label) and scores the labels against the
ground-truth template (`group`) with ARI and NMI, noise points counted as singletons. Prints a
markdown table, or a JSON document with --json. Deterministic: random_state=0 everywhere.
Seconds are wall-clock per row (embedding + reduction + clustering, libraries already imported),
with BLAS limited to one thread so that the timings stay stable on a busy machine.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from flowmem.induction.cluster.cluster import canonical_linkage, snap

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.paths import SHARED_DATA

DEFAULT_DATA = SHARED_DATA / "workbench_trajectories.jsonl.gz"
MAX_TRAIN_INSTANCE = 6
ACTION_SHARE = 0.3
"""Row 6: a task text is augmented with the action names used by at least this share of its runs."""

Points = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Run:
    """One training run: what it asked, what it did, and its ground-truth template."""

    task: str
    actions: tuple[str, ...]
    group: str


@dataclass(frozen=True)
class Outcome:
    """What a clustering method produced: a label per run (None for noise)."""

    points: int
    features: str
    labels: list[str | None]


@dataclass(frozen=True)
class Row:
    """One line of the result table."""

    embedded: str
    points: int
    features: str
    ari: float
    nmi: float
    noise: float
    clusters: int
    seconds: float


# --- data -------------------------------------------------------------------------------------


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        yield from fh


def load_runs(path: Path) -> tuple[list[Run], int]:
    """Training runs of the file, and the number of runs in it overall."""
    runs: list[Run] = []
    total = 0
    for line in _lines(path):
        if not line.strip():
            continue
        record = json.loads(line)
        total += 1
        if record["meta"]["instance"] > MAX_TRAIN_INSTANCE:
            continue
        actions = tuple(str(step["action"]) for step in record.get("steps") or [])
        runs.append(Run(str(record["task"]), actions, str(record["group"])))
    return runs, total


def distinct_tasks(runs: Sequence[Run]) -> list[str]:
    """Sorted distinct task texts."""
    return sorted({r.task for r in runs})


def common_actions(runs: Sequence[Run], share: float = ACTION_SHARE) -> dict[str, list[str]]:
    """Task text -> the action names used by at least `share` of its runs (sorted)."""
    per_task: dict[str, list[Run]] = {}
    for r in runs:
        per_task.setdefault(r.task, []).append(r)
    out: dict[str, list[str]] = {}
    for task, group in per_task.items():
        counts = Counter(a for r in group for a in set(r.actions))
        out[task] = sorted(a for a, n in counts.items() if n >= share * len(group))
    return out


# --- embedding and clustering -----------------------------------------------------------------


def _normalise(points: npt.NDArray[Any]) -> Points:
    points = np.asarray(points, dtype=np.float64)
    norms = np.linalg.norm(points, axis=1, keepdims=True)
    unit: Points = np.divide(points, norms, out=np.zeros_like(points), where=norms > 0)
    return snap(unit)  # as the product does: the same clusters on any CPU (docs/induction.md)


def _label_strings(labels: npt.NDArray[Any]) -> list[str | None]:
    return [str(int(x)) if x >= 0 else None for x in labels]


def hashing_cluster(texts: Sequence[str]) -> tuple[list[str | None], str]:
    """HashingEmbedder(384) -> PCA(32) -> L2 -> HDBSCAN(min_cluster_size=3)."""
    import hdbscan
    from sklearn.decomposition import PCA

    from flowmem.retrieval.embed import HashingEmbedder

    embedder = HashingEmbedder(384)
    vectors = embedder.embed(list(texts))
    reduced = PCA(32, svd_solver="full").fit_transform(vectors.astype(np.float64))
    with canonical_linkage():
        labels = hdbscan.HDBSCAN(min_cluster_size=3).fit(_normalise(reduced)).labels_
    return _label_strings(labels), f"{embedder.dim} hashed → 32 PCA"


def tfidf_cluster(texts: Sequence[str]) -> tuple[list[str | None], str]:
    """TF-IDF 1–2-grams (min_df 3) -> SVD(64) -> L2 -> HDBSCAN(3, min_samples 2, epsilon 0.3)."""
    import hdbscan
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    matrix = TfidfVectorizer(ngram_range=(1, 2), min_df=3, sublinear_tf=True).fit_transform(list(texts))
    with np.errstate(divide="ignore", invalid="ignore"):
        reduced = TruncatedSVD(64, random_state=0).fit_transform(matrix)
    clusterer = hdbscan.HDBSCAN(min_cluster_size=3, min_samples=2, cluster_selection_epsilon=0.3)
    with canonical_linkage():
        labels = clusterer.fit(_normalise(reduced)).labels_
    return _label_strings(labels), f"{matrix.shape[1]} tf-idf → 64 SVD"


Clusterer = Callable[[Sequence[str]], tuple[list[str | None], str]]


def per_run(runs: Sequence[Run], text_of: Callable[[Run], str], clusterer: Clusterer) -> Outcome:
    """Cluster one text per run."""
    labels, features = clusterer([text_of(r) for r in runs])
    return Outcome(len(runs), features, labels)


def per_task(runs: Sequence[Run], text_of: Callable[[str], str], clusterer: Clusterer) -> Outcome:
    """Cluster one text per distinct task; every run takes its task's label."""
    tasks = distinct_tasks(runs)
    labels, features = clusterer([text_of(t) for t in tasks])
    label_of = dict(zip(tasks, labels, strict=True))
    return Outcome(len(tasks), features, [label_of[r.task] for r in runs])


def flowmem_default(runs: Sequence[Run], min_cluster_size: int = 3) -> Outcome:
    """The product's clustering: flowmem.induction.cluster.cluster.cluster_tasks on the task texts."""
    from flowmem.induction.cluster.cluster import ClusterParams, cluster_tasks

    params = ClusterParams(min_cluster_size=min_cluster_size)
    clustering = cluster_tasks([r.task for r in runs], params)  # wraps its SVD fit in np.errstate
    label_of = clustering.label_of()
    labels = [str(label_of[r.task]) if label_of[r.task] >= 0 else None for r in runs]
    vocabulary = len(clustering.model[0].vocabulary_) if clustering.model else 0
    dims = clustering.model[1].n_components if clustering.model else 0
    return Outcome(len(clustering.texts), f"{vocabulary} tf-idf → {dims} SVD", labels)


# --- the table --------------------------------------------------------------------------------


def methods(runs: Sequence[Run]) -> list[tuple[str, Callable[[], Outcome]]]:
    """(row name, thunk producing its outcome), in table order."""
    actions = common_actions(runs)

    def task_and_actions(r: Run) -> str:
        return r.task + " " + " ".join(r.actions)

    def task_and_common(task: str) -> str:
        return " ".join([task, *actions[task]])

    return [
        ("hashing / task text / every run", lambda: per_run(runs, lambda r: r.task, hashing_cluster)),
        (
            "hashing / action names / every run",
            lambda: per_run(runs, lambda r: " ".join(r.actions), hashing_cluster),
        ),
        ("hashing / task + actions / every run", lambda: per_run(runs, task_and_actions, hashing_cluster)),
        ("hashing / task text / distinct tasks", lambda: per_task(runs, lambda t: t, hashing_cluster)),
        ("tf-idf / task text / every run", lambda: per_run(runs, lambda r: r.task, tfidf_cluster)),
        ("tf-idf / task + actions / distinct tasks", lambda: per_task(runs, task_and_common, tfidf_cluster)),
        ("flowmem default (min_cluster_size=3)", lambda: flowmem_default(runs)),
        ("flowmem default, min_cluster_size=5", lambda: flowmem_default(runs, 5)),
        ("flowmem default, min_cluster_size=10", lambda: flowmem_default(runs, 10)),
    ]


HEAVY_MODULES = (
    "hdbscan",
    "sklearn.decomposition",
    "sklearn.feature_extraction.text",
    "sklearn.metrics",
    "flowmem.induction.cluster.cluster",
    "flowmem.induction.render.metrics",
)


def warm_up() -> None:
    """Import the heavy libraries before timing, so no row pays for them."""
    for module in HEAVY_MODULES:
        importlib.import_module(module)


def measure(name: str, runs: Sequence[Run], thunk: Callable[[], Outcome]) -> Row:
    """Run one method, time it, and score its labels against the groups."""
    from flowmem.induction.render.metrics import clustering_scores

    start = time.perf_counter()
    outcome = thunk()
    seconds = time.perf_counter() - start
    scores = clustering_scores([r.group for r in runs], outcome.labels)
    return Row(
        embedded=name,
        points=outcome.points,
        features=outcome.features,
        ari=scores["cluster_ari"],
        nmi=scores["cluster_nmi"],
        noise=scores["noise_fraction"],
        clusters=len({label for label in outcome.labels if label is not None}),
        seconds=round(seconds, 2),
    )


def header(path: Path, runs: Sequence[Run], total: int) -> str:
    """One line naming the data and the counts."""
    return (
        f"Data: {path} — {total} runs, training split (meta.instance <= {MAX_TRAIN_INSTANCE}): "
        f"{len(runs)} runs, {len(distinct_tasks(runs))} distinct tasks, "
        f"{len({r.group for r in runs})} templates."
    )


def markdown(rows: Sequence[Row]) -> str:
    """The result table in markdown."""
    lines = [
        "| what is embedded | points | features | ARI | NMI | noise | clusters | seconds |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.embedded} | {r.points} | {r.features} | {r.ari:.3f} | {r.nmi:.3f} "
            f"| {r.noise:.1%} | {r.clusters} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA, help="trajectories JSONL(.gz)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    args = parser.parse_args(argv)
    path = args.data.resolve()
    runs, total = load_runs(path)
    warm_up()
    # One BLAS thread: the fits are small, and extra threads only add jitter under load.
    with threadpool_limits(limits=1, user_api="blas"):
        rows = [measure(name, runs, thunk) for name, thunk in methods(runs)]
    if args.json:
        doc = {
            "data": str(path),
            "runs": total,
            "training_runs": len(runs),
            "distinct_tasks": len(distinct_tasks(runs)),
            "templates": len({r.group for r in runs}),
            "rows": [asdict(r) for r in rows],
        }
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print(header(path, runs, total))
        print()
        print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
