"""Task-level workflows against sub-routines, as memories an agent is shown (one run, one metric).

For each shared set (WorkBench split by `meta.instance`, 0-6 train / 7-9 test; the tau2 oracle
set by `meta.split`, as bench/eval_sets.py splits them) it retrieves memories for every scored
test run (successful, with steps) from several memory systems built from the same training
runs, and scores them all with `flowmem.induction.render.metrics.memory_metrics` (docs/metrics.md):

- `raw`: the k successful training runs whose task is nearest;
- `workflows`: the rule inducer's task-level workflows (`flowmem induce`'s code through
  `jobs.evaluate.induced_store`, without its own sub-routine workflows), each retrieved by its
  nearest source task (`ExampleIndex`), top k; `workflows k=1`: the first-ranked one only;
- `oracle single`: per test run, the one workflow of them all with the highest LCS coverage
  (ties: higher precision, then the first by id) -- an upper bound of k=1, so the gap to
  `workflows k=1` is what ranking loses;
- `sub-routines`: the intent segments (`segments.segment`) of every successful training run,
  grouped by `segments.shape_of`; a group made from at least 3 distinct tasks is kept, its
  memory is the actions of its medoid segment (`align.medoid`), keyed by its segments' tasks;
  top k by nearest key;
- `workflows+sub`: workflows and sub-routines in one index, top k (ties: workflows first);
- `workflows+sub floor`: the same index, but after the first memory the next ones in rank order
  are kept only while their similarity is >= 0.9 x the first's (at most k in all); one that
  adds no action the memories kept so far lack is passed over.

Then the first-ranked workflow with up to k-1 sub-routines next to it, each added only when it
brings an action the memories before it lack, chosen four ways:
- `k=1 + oracle sub`: the sub-routines that match the most test steps not yet matched (LCS)
  -- the bound of any way of matching sub-routines to a task;
- `k=1 + sub by sentence`: each sub-routine keyed by the sentences of its tasks that share the
  most words with its segments (goal action's name words, argument values), the task split
  into sentences, a sub-routine scoring its best sentence pair; kept at cosine >= 0.5;
- `k=1 + neighbours' sub`: the sub-routines found in at least 2 of the 5 nearest training
  tasks' successful runs, most found first;
- `k=1 + sub classifier`: per sub-routine, a logistic regression (scikit-learn, C=10,
  balanced) on the task vectors of the training tasks, positive where a successful run of the
  task has one of its segments; kept at probability >= 0.3.

Every similarity is the cosine of hashing-embedder vectors (`HashingEmbedder`, 384 dims). A
memory's keys are its distinct task texts, at most 32 evenly spread, as
`flowmem.jobs.induce.key_vectors` stores a workflow's, a workflow's with each key's share of
its task (`flowmem.retrieval.nearest.key_shares`). Columns: `coverage` (best of k),
`step_prec`, `joint_cov`, `joint_prec`, `utility` (utility_rate), `shown` (mean memories shown
per scored test run) and `memories` (how many the system holds). Per set it also prints the
number of segments, shapes, shapes kept, and the share of scored test steps (pooled) whose
action some kept sub-routine contains: the most sub-routines could cover.

Deterministic, offline; about 10 s for both sets on a 2-core machine.

Usage (from the repo root): python bench/subroutines.py [DATA_DIR] [--json]
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.linear_model import LogisticRegression

from flowmem.induction.abstract.segments import Segment, segment, shape_of
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import scalars
from flowmem.induction.render.metrics import LeakChecker, Retrieval, memory_metrics
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.evaluate import induced_store
from flowmem.models import Trajectory
from flowmem.retrieval.align import lcs_len, lcs_pairs, medoid
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
K = 3
MIN_TASKS = 3
"""A sub-routine is kept when its segments come from at least this many distinct tasks."""
FLOOR = 0.9
"""Relative relevance floor: a further memory needs this share of the first's similarity."""
KEY_LIMIT = 32
"""Keys per memory, as `flowmem.jobs.induce.key_vectors` stores them."""
METRICS = ("coverage", "step_precision", "joint_coverage", "joint_precision", "utility_rate")
HEADERS = ("coverage", "step_prec", "joint_cov", "joint_prec", "utility", "shown", "memories")

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Memory:
    """One retrievable memory: its id, action names and retrieval keys (task texts), with
    each key's share of its task where known (`flowmem.retrieval.nearest`)."""

    id: str
    actions: list[str]
    keys: list[str]
    shares: dict[str, float] | None = None
    phrases: tuple[str, ...] = ()
    """For a sub-routine: the sentence of each segment's task that names what it does."""


def spread(tasks: Sequence[str], limit: int = KEY_LIMIT) -> list[str]:
    """The distinct tasks, sorted, at most `limit` evenly spread (as `key_vectors` picks them)."""
    distinct = sorted(set(tasks))
    step = max(1, -(-len(distinct) // limit))
    return distinct[::step][:limit]


def build_index(memories: Sequence[Memory], vector: dict[str, Vectors], dim: int) -> ExampleIndex:
    """An `ExampleIndex` over the memories' key vectors, each memory's keys together."""
    owners = [i for i, m in enumerate(memories) for _ in spread(m.keys)]
    rows = [vector[task] for m in memories for task in spread(m.keys)]
    shares = [(m.shares or {}).get(task, 1.0) for m in memories for task in spread(m.keys)]
    matrix = np.array(rows, dtype=np.float32).reshape(len(rows), dim)
    return ExampleIndex(matrix, owners, len(memories), shares)


def top_k(index: ExampleIndex, query: Vectors, k: int) -> list[int]:
    """The k nearest memories, best first."""
    return [i for i, _ in index.search(query, k)]


def floored(index: ExampleIndex, query: Vectors, memories: Sequence[Memory], k: int) -> list[int]:
    """The first memory, then in rank order those within `FLOOR` x its similarity that add an
    action the ones kept so far lack, at most k in all."""
    order, sims = index.ranked(query)
    if not len(order) or not np.isfinite(sims[order[0]]):
        return []
    first = int(order[0])
    chosen, have = [first], set(memories[first].actions)
    for i in order[1:]:
        if len(chosen) >= k or not sims[i] >= FLOOR * sims[first]:
            break
        new = set(memories[i].actions) - have
        if new:
            chosen.append(int(i))
            have |= new
    return chosen


def oracle(test_actions: list[str], memories: Sequence[Memory], cache: dict[Any, tuple[float, float]]) -> int:
    """The memory with the highest LCS coverage of the run (ties: precision, then the first)."""
    best, best_key = 0, (-1.0, -1.0)
    for i, m in enumerate(memories):
        key = (tuple(test_actions), tuple(m.actions))
        if key not in cache:
            n = lcs_len(test_actions, m.actions)
            cache[key] = (n / len(test_actions), n / len(m.actions) if m.actions else 0.0)
        if cache[key] > best_key:
            best, best_key = i, cache[key]
    return best


_SENTENCE = re.compile(r"(?<=[.!?;])\\s+|\\n+")
_WORD = re.compile(r"[a-z0-9]+")
SENTENCE_FLOOR = 0.5
PROBABILITY_FLOOR = 0.3


def sentences(text: str) -> list[str]:
    """A task's sentences of at least two words (the whole text when it has none)."""
    return [x.strip() for x in _SENTENCE.split(text) if len(_WORD.findall(x.lower())) >= 2] or [text]


def phrase(seg: Segment) -> str:
    """The sentence of a segment's task sharing the most words with the segment: its goal
    action's name words and its steps' argument values."""
    run = seg.trajectory
    words = set(_WORD.findall(seg.goal_action.replace("_", " ").lower()))
    for p in seg.positions:
        for value in scalars(run.steps[p].args):
            words |= set(_WORD.findall(value.lower()))
    return max(sentences(run.task), key=lambda x: len(words & set(_WORD.findall(x.lower()))))


def beside_first(
    first: int, candidates: Sequence[int], workflows: Sequence[Memory], subs: Sequence[Memory]
) -> list[int]:
    """The first workflow (position in `workflows`), then candidate sub-routines (positions in
    `subs`, offset by len(workflows)) that bring an action the ones before lack, k in all."""
    chosen, have = [first], set(workflows[first].actions)
    for j in candidates:
        if len(chosen) >= K:
            break
        if set(subs[j].actions) - have:
            chosen.append(len(workflows) + j)
            have |= set(subs[j].actions)
    return chosen


def oracle_subs(test_actions: list[str], first: list[str], subs: Sequence[Memory]) -> list[int]:
    """Greedily, the sub-routines matching the most test steps the ones before left unmatched."""
    matched = {a for a, _ in lcs_pairs(test_actions, first)}
    out: list[int] = []
    for _ in range(K - 1):
        gains = [len({a for a, _ in lcs_pairs(test_actions, m.actions)} - matched) for m in subs]
        if not gains or max(gains) == 0:
            break
        best = int(np.argmax(gains))
        out.append(best)
        matched |= {a for a, _ in lcs_pairs(test_actions, subs[best].actions)}
    return out


def subroutines(train: Sequence[Trajectory]) -> tuple[list[Memory], dict[str, Any]]:
    """The kept sub-routines of the successful training runs, and counts of how they were made."""
    segs = [s for t in train if t.success is True and t.steps for s in segment(t)]
    groups: dict[tuple[str, tuple[str, ...]], list[Segment]] = defaultdict(list)
    for s in segs:
        groups[shape_of(s)].append(s)
    kept: list[Memory] = []
    for shape, members in sorted(groups.items()):
        tasks = [s.trajectory.task for s in members]
        if len(set(tasks)) < MIN_TASKS:
            continue
        centre = members[medoid([s.actions for s in members])]
        phrases = tuple(sorted({phrase(s) for s in members}))
        kept.append(Memory(f"sub:{shape[0]}:{'>'.join(shape[1])}", centre.actions, tasks, phrases=phrases))
    return kept, {"segments": len(segs), "shapes": len(groups), "shapes_kept": len(kept)}


def _found(train: Sequence[Trajectory], subs: Sequence[Memory]) -> dict[str, set[int]]:
    """Per training task with a successful run: the sub-routines its runs' segments are."""
    ids = {m.id: j for j, m in enumerate(subs)}
    found: dict[str, set[int]] = defaultdict(set)
    for t in train:
        if t.success is True and t.steps:
            for seg in segment(t):
                goal, actions = shape_of(seg)
                j = ids.get(f"sub:{goal}:{'>'.join(actions)}")
                if j is not None:
                    found[t.task].add(j)
    return found


def _best_first(scores: dict[int, float], floor: float) -> list[int]:
    return sorted((j for j, x in scores.items() if x >= floor), key=lambda j: (-scores[j], j))


def beside(
    scored: Sequence[Trajectory],
    firsts: Sequence[list[int]],
    workflows: Sequence[Memory],
    subs: Sequence[Memory],
    train: Sequence[Trajectory],
    embedder: HashingEmbedder,
) -> dict[str, tuple[Sequence[Memory], list[list[int]]]]:
    """The `k=1 + ...` systems: the first workflow with sub-routines chosen four ways."""
    if not subs:
        return {}
    found = _found(train, subs)
    tasks = sorted(found)
    task_vectors = embedder.embed(tasks)
    owners = [j for j, m in enumerate(subs) for _ in m.phrases]
    by_phrase = ExampleIndex(embedder.embed([p for m in subs for p in m.phrases]), owners, len(subs))
    models = {}
    for j in range(len(subs)):
        y = np.array([j in found[task] for task in tasks])
        if 0 < y.sum() < len(y):
            models[j] = LogisticRegression(C=10.0, class_weight="balanced", max_iter=1000).fit(
                task_vectors, y
            )
    rows: dict[str, list[list[int]]] = defaultdict(list)
    for t, first in zip(scored, firsts, strict=True):
        q = embedder.embed([t.task])[0]
        sentence: dict[int, float] = defaultdict(lambda: -1.0)
        for v in embedder.embed(sentences(t.task)):
            for j, x in by_phrase.search(v, len(subs)):
                sentence[j] = max(sentence[j], x)
        votes: dict[int, float] = defaultdict(float)
        for n in np.argsort(-(task_vectors @ q), kind="stable")[:5]:
            for j in found[tasks[int(n)]]:
                votes[j] += 1
        probability = {j: float(m.predict_proba(q[None, :])[0, 1]) for j, m in models.items()}
        if not first:
            for name in ("oracle sub", "sub by sentence", "neighbours' sub", "sub classifier"):
                rows[f"k=1 + {name}"].append([])
            continue
        f = first[0]
        candidates = {
            "oracle sub": oracle_subs(t.actions, workflows[f].actions, subs),
            "sub by sentence": _best_first(sentence, SENTENCE_FLOOR),
            "neighbours' sub": _best_first(votes, 2),
            "sub classifier": _best_first(probability, PROBABILITY_FLOOR),
        }
        for name, picked in candidates.items():
            rows[f"k=1 + {name}"].append(beside_first(f, picked, workflows, subs))
    both = [*workflows, *subs]
    return {name: (both, chosen) for name, chosen in rows.items()}


def run_set(train: Sequence[Trajectory], test: Sequence[Trajectory], settings: Settings) -> dict[str, Any]:
    """Every system's metrics on one split, and the sub-routine counts."""
    t0 = time.perf_counter()
    embedder = HashingEmbedder(settings.embedding_dim)
    # Task-level workflows only: induction's own sub-routine workflows are turned off (they
    # could otherwise merge with a task-level draft of the same steps).
    task_level = settings.model_copy(update={"subroutines": False})
    with induced_store(train, RuleInducer(), settings=task_level) as (_, induced):
        result = induced.result
    induce_s = time.perf_counter() - t0
    workflows = task_workflows(result)
    subs, counts = subroutines(train)
    raw = [Memory(t.id, t.actions, [t.task]) for t in train if t.success is True]
    scored = [t for t in test if t.success is True and t.steps]
    picks = choices(scored, workflows, subs, raw, train, embedder)
    systems = {name: score(scored, memories, chosen) for name, (memories, chosen) in picks.items()}
    sub_actions = {a for m in subs for a in m.actions}
    steps = [a for t in scored for a in t.actions]
    counts["test_steps_in_subroutines"] = (
        round(sum(a in sub_actions for a in steps) / len(steps), 4) if steps else None
    )
    return {
        "inputs": {
            "train": len(train),
            "train_successful": len(raw),
            "test": len(test),
            "scored_test_runs": len(scored),
            "workflows": len(workflows),
            "k": K,
        },
        "subroutines": counts,
        "systems": systems,
        "seconds": {"induce": round(induce_s, 2), "total": round(time.perf_counter() - t0, 2)},
    }


def task_workflows(result: Any) -> list[Memory]:
    """The task-level workflows of an induction result, each keyed by its source tasks."""
    shares = result.key_shares()
    return [
        Memory(w.id, w.actions, sorted(shares.get(w.id, {})), shares.get(w.id))
        for w in result.workflows
        if getattr(w, "kind", "task") == "task"
    ]


def choices(
    scored: Sequence[Trajectory],
    workflows: Sequence[Memory],
    subs: Sequence[Memory],
    raw: Sequence[Memory],
    train: Sequence[Trajectory],
    embedder: HashingEmbedder,
) -> dict[str, tuple[Sequence[Memory], list[list[int]]]]:
    """Every system's memories and what it shows each scored run (indices into them)."""
    texts = sorted({*(t.task for t in scored), *(k for m in [*workflows, *subs, *raw] for k in m.keys)})
    vector = dict(zip(texts, embedder.embed(texts), strict=True))
    dim = embedder.dim
    raw_index = build_index(raw, vector, dim)
    flow_index = build_index(workflows, vector, dim)
    sub_index = build_index(subs, vector, dim)
    both = [*workflows, *subs]
    both_index = build_index(both, vector, dim)

    picks: dict[str, tuple[Sequence[Memory], list[list[int]]]] = {}
    lcs_cache: dict[Any, tuple[float, float]] = {}
    queries = [vector[t.task] for t in scored]
    picks["raw"] = (raw, [top_k(raw_index, q, K) for q in queries])
    picks["workflows"] = (workflows, [top_k(flow_index, q, K) for q in queries])
    picks["workflows k=1"] = (workflows, [top_k(flow_index, q, 1) for q in queries])
    picks["oracle single"] = (workflows, [[oracle(t.actions, workflows, lcs_cache)] for t in scored])
    picks["sub-routines"] = (subs, [top_k(sub_index, q, K) for q in queries])
    picks["workflows+sub"] = (both, [top_k(both_index, q, K) for q in queries])
    picks["workflows+sub floor"] = (both, [floored(both_index, q, both, K) for q in queries])
    firsts = [top_k(flow_index, q, 1) for q in queries]
    picks.update(beside(scored, firsts, workflows, subs, train, embedder))
    return picks


def score(
    scored: Sequence[Trajectory], memories: Sequence[Memory], chosen: list[list[int]]
) -> dict[str, Any]:
    """One system's row: `METRICS` of what it showed, the memories shown per run, its memories."""
    retrievals = [
        Retrieval(t.actions, True, [(memories[i].id, memories[i].actions, "") for i in ids])
        for t, ids in zip(scored, chosen, strict=True)
    ]
    report = memory_metrics(retrievals, LeakChecker(set()), None, len(memories))
    row: dict[str, Any] = {key: report[key] for key in METRICS}
    row["shown"] = round(sum(map(len, chosen)) / len(scored), 4) if scored else None
    row["memories"] = len(memories)
    return row


def print_table(name: str, report: dict[str, Any]) -> None:
    """One set's side-by-side table."""
    inputs, counts = report["inputs"], report["subroutines"]
    print(
        f"\n{name}: train {inputs['train']} ({inputs['train_successful']} successful), "
        f"test {inputs['test']} ({inputs['scored_test_runs']} scored), k={inputs['k']}"
    )
    print(
        f"segments {counts['segments']}, shapes {counts['shapes']}, shapes kept {counts['shapes_kept']}"
        f" (>= {MIN_TASKS} tasks), test steps a kept one contains {counts['test_steps_in_subroutines']}"
    )
    print(f"{'system':<22}" + "".join(f"{h:>11}" for h in HEADERS))
    for system, row in report["systems"].items():
        cells = [row[key] for key in (*METRICS, "shown", "memories")]
        print(f"{system:<22}" + "".join(f"{'-' if c is None else c!s:>11}" for c in cells))
    seconds = report["seconds"]
    print(f"time (s): induce {seconds['induce']}, total {seconds['total']}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = [a for a in argv if not a.startswith("--")]
    data = Path(args[0]) if args else SHARED_DATA
    settings = Settings()
    results: dict[str, Any] = {}
    for name, (file, is_train) in SPLITS.items():
        path = data / file
        if not path.exists():
            print(f"{name}: {path} not found, skipped", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        runs = [t for t in read_trajectories(path, settings) if not isinstance(t, Rejection)]
        train = [t for t in runs if is_train(t)]
        test = [t for t in runs if not is_train(t)]
        load_s = time.perf_counter() - t0
        results[name] = run_set(train, test, settings)
        results[name]["seconds"]["load"] = round(load_s, 2)
    if "--json" in argv:
        print(json.dumps(results))
        return 0
    for name, report in results.items():
        print_table(name, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
