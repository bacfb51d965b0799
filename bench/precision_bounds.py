"""What memories built from the training split can reach at all: joint precision bounds.

Issue 12 asks, on each set, for `joint_coverage` >= raw's - 0.02 with `joint_precision` >=
raw's + 0.10 (`flowmem eval`, k = 3). This script asks whether any choice of memories made
from the training runs could clear that bar, by replacing flowmem's retrieval with choices
that know more than a retriever can. Every row is scored with
`flowmem.induction.render.metrics.memory_metrics` over the same scored test runs (successful, with
steps), against the same rule-inducer workflows (`flowmem.jobs.evaluate.induced_store`:
`flowmem induce`'s code, default settings):

- `raw k=3`: the 3 successful training runs whose task is nearest (hashing cosine): the bar
  is computed from this row;
- `retrieved k=1` / `retrieved k=3`: the workflows ranked by nearest source task (with
  shares, `ExampleIndex`), as flowmem ranks them, first one / first three;
- `group known, chosen on train k=1|2`: the test task's group (its task template, the data
  set's `group` field) is given; per group, the workflow with the best F1 (harmonic mean of
  mean LCS coverage and precision) over the group's *training* runs, and for k=2 the one
  that most raises the F1 of the pair (joint coverage / joint precision) beside it -- the
  best a retriever that recognised every task's kind perfectly could serve;
- `group oracle, chosen on test k=1|2`: the same, chosen on the group's *test* runs (it sees
  the answers: an optimistic bound of any choice made per kind of task);
- `same task's other runs`: each test run is shown the run, among the other successful test
  runs of the *same task* (other agents), with the best F1 against the rest (leave-one-out):
  what knowing exactly how this task goes would give. Only runs whose task has another run.

The group rows need a `group` field; the last row needs tasks with several test runs. A set
without them (tau2: one run per task, no group) prints only the rows it can.

Deterministic, offline; ~1 minute for WorkBench on 2 cores.

Usage (from the repo root): python bench/precision_bounds.py [DATA_DIR]
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.render.metrics import LeakChecker, Retrieval, memory_metrics
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.evaluate import induced_store
from flowmem.models import Trajectory, Workflow
from flowmem.retrieval.align import lcs_pairs
from flowmem.retrieval.embed import HashingEmbedder
from flowmem.retrieval.nearest import ExampleIndex
from flowmem.settings import Settings

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.paths import SHARED_DATA

SPLITS: dict[str, tuple[str, Callable[[Trajectory], bool]]] = {
    "workbench": ("workbench_trajectories.jsonl.gz", lambda t: t.meta["instance"] <= 6),
    "tau2": ("tau2_oracle_trajectories.jsonl.gz", lambda t: t.meta["split"] == "train"),
}
KEY_LIMIT = 32
"""Keys per workflow, as `flowmem.jobs.induce.key_vectors` stores them."""

Actions = Sequence[str]


def joint(runs: Sequence[Actions], memories: Sequence[Actions]) -> tuple[float, float, float]:
    """Mean joint coverage and joint precision of memories shown together, and their F1."""
    cov, pre = [], []
    for run in runs:
        matched: set[int] = set()
        hits = shown = 0
        for m in memories:
            pairs = lcs_pairs(run, m)
            matched |= {i for i, _ in pairs}
            hits, shown = hits + len(pairs), shown + len(m)
        cov.append(len(matched) / len(run))
        pre.append(hits / shown if shown else 0.0)
    c, p = float(np.mean(cov)), float(np.mean(pre))
    return c, p, 2 * c * p / (c + p) if c + p else 0.0


def best_choice(runs: Sequence[Actions], memories: Sequence[Actions], k: int) -> list[int]:
    """Greedily, up to k memories that most raise the F1 of `joint` over the runs."""
    chosen: list[int] = []
    score = -1.0
    for _ in range(k):
        gains = [
            (joint(runs, [memories[i] for i in [*chosen, j]])[2], -j)
            for j in range(len(memories))
            if j not in chosen
        ]
        if not gains or max(gains)[0] <= score:
            break
        score, j = max(gains)
        chosen.append(-j)
    return chosen


def spread(tasks: Sequence[str]) -> list[str]:
    """At most KEY_LIMIT of the distinct tasks, evenly spread (as `key_vectors` picks them)."""
    distinct = sorted(set(tasks))
    step = max(1, -(-len(distinct) // KEY_LIMIT))
    return distinct[::step][:KEY_LIMIT]


def run_set(
    train: Sequence[Trajectory], test: Sequence[Trajectory], settings: Settings
) -> dict[str, dict[str, Any]]:
    task_level = settings.model_copy(update={"subroutines": False})
    with induced_store(train, RuleInducer(), settings=task_level) as (_, induced):
        result = induced.result
    shares = result.key_shares()
    workflows = [w for w in result.workflows if w.kind == "task"]
    memories = [w.actions for w in workflows]
    scored = [t for t in test if t.success is True and t.steps]
    successes = [t for t in train if t.success is True and t.steps]
    embedder = HashingEmbedder(settings.embedding_dim)
    index = ExampleIndex(*key_index(workflows, shares, embedder))
    queries = embedder.embed([t.task for t in scored])
    rows = nearest_rows(successes, queries, memories, index, embedder)
    if all(t.group is not None for t in [*successes, *scored]):
        rows.update(group_rows(successes, scored, queries, memories, index))

    no_leak = LeakChecker(set())
    report = {name: score(scored, shown, no_leak, len(memories)) for name, shown in rows.items()}
    twins, twin_rows = same_task_rows(scored)
    if twins:
        report["same task's other runs"] = score(twins, twin_rows, no_leak, 0)
    return report


def key_index(
    workflows: Sequence[Workflow], shares: Mapping[str, Mapping[str, float]], embedder: HashingEmbedder
) -> tuple[Any, list[int], int, list[float]]:
    """The arguments of the workflows' `ExampleIndex`: their keys as `key_vectors` stores them."""
    keys = [(i, task) for i, w in enumerate(workflows) for task in spread(list(shares.get(w.id, {})))]
    return (
        embedder.embed([task for _, task in keys]),
        [i for i, _ in keys],
        len(workflows),
        [shares[workflows[i].id][task] for i, task in keys],
    )


def nearest_rows(
    successes: Sequence[Trajectory],
    queries: Any,
    memories: Sequence[Actions],
    index: ExampleIndex,
    embedder: HashingEmbedder,
) -> dict[str, list[Sequence[Actions]]]:
    """The `raw k=3` and `retrieved` rows: the nearest training runs, the nearest workflows."""
    raw_index = ExampleIndex(
        embedder.embed([t.task for t in successes]), range(len(successes)), len(successes)
    )
    rows: dict[str, list[Sequence[Actions]]] = defaultdict(list)
    for q in queries:
        rows["raw k=3"].append([successes[i].actions for i, _ in raw_index.search(q, 3)])
        ranked = [memories[i] for i, _ in index.search(q, 3)]
        rows["retrieved k=1"].append(ranked[:1])
        rows["retrieved k=3"].append(ranked)
    return rows


def group_rows(
    successes: Sequence[Trajectory],
    scored: Sequence[Trajectory],
    queries: Any,
    memories: Sequence[Actions],
    index: ExampleIndex,
) -> dict[str, list[Sequence[Actions]]]:
    """The `group known` and `group oracle` rows: per group, the best memories chosen on its
    training runs (the nearest ones for a group with none), or on its test runs."""
    train_runs: dict[str, list[Actions]] = defaultdict(list)
    test_runs: dict[str, list[Actions]] = defaultdict(list)
    for t in successes:
        train_runs[str(t.group)].append(t.actions)
    for t in scored:
        test_runs[str(t.group)].append(t.actions)
    rows: dict[str, list[Sequence[Actions]]] = defaultdict(list)
    for k in (1, 2):
        on_train = {g: best_choice(runs, memories, k) for g, runs in train_runs.items()}
        on_test = {g: best_choice(runs, memories, k) for g, runs in test_runs.items()}
        for t, q in zip(scored, queries, strict=True):
            fallback = [i for i, _ in index.search(q, k)]  # a group with no training run
            rows[f"group known, chosen on train k={k}"].append(
                [memories[i] for i in on_train.get(str(t.group), fallback)]
            )
            rows[f"group oracle, chosen on test k={k}"].append([memories[i] for i in on_test[str(t.group)]])
    return rows


def same_task_rows(scored: Sequence[Trajectory]) -> tuple[list[Trajectory], list[list[Actions]]]:
    """The test runs whose task has another test run, each with the other run of its task
    that best matches the rest (leave-one-out)."""
    by_task: dict[str, list[Trajectory]] = defaultdict(list)
    for t in scored:
        by_task[t.task].append(t)
    twins = [t for t in scored if len(by_task[t.task]) > 1]
    twin_rows: list[list[Actions]] = []
    for t in twins:
        others = [o.actions for o in by_task[t.task] if o is not t]
        best = max(
            range(len(others)),
            key=lambda i: (
                joint([o for j, o in enumerate(others) if j != i] or [others[i]], [others[i]])[2],
                -i,
            ),
        )
        twin_rows.append([others[best]])
    return twins, twin_rows


def score(
    runs: Sequence[Trajectory], shown: Sequence[Sequence[Actions]], no_leak: LeakChecker, memories: int
) -> dict[str, Any]:
    """One row of the report: the joint coverage and precision of what each run was shown."""
    retrievals = [
        Retrieval(t.actions, True, [(str(n), list(m), "") for n, m in enumerate(s)])
        for t, s in zip(runs, shown, strict=True)
    ]
    metrics = memory_metrics(retrievals, no_leak, None, memories)
    return {
        "joint_coverage": metrics["joint_coverage"],
        "joint_precision": metrics["joint_precision"],
        "runs": len(runs),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = [a for a in argv if not a.startswith("--")]
    data = Path(args[0]) if args else SHARED_DATA
    settings = Settings()
    for name, (file, is_train) in SPLITS.items():
        path = data / file
        if not path.exists():
            print(f"{name}: {path} not found, skipped")
            continue
        runs = [t for t in read_trajectories(path, settings) if not isinstance(t, Rejection)]
        report = run_set([t for t in runs if is_train(t)], [t for t in runs if not is_train(t)], settings)
        raw = report["raw k=3"]
        need_cov = round(float(raw["joint_coverage"]) - 0.02, 4)
        need_pre = round(float(raw["joint_precision"]) + 0.10, 4)
        print(f"\n{name}: bar joint_coverage >= {need_cov}, joint_precision >= {need_pre}")
        print(f"{'memories shown':<38}{'joint_cov':>11}{'joint_prec':>12}{'runs':>7}  clears")
        for system, row in report.items():
            clears = row["joint_coverage"] >= need_cov and row["joint_precision"] >= need_pre
            print(
                f"{system:<38}{row['joint_coverage']:>11}{row['joint_precision']:>12}{row['runs']:>7}"
                f"  {'yes' if clears else 'no'}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
