"""What serving alone can do for joint precision: replay serving policies over the same ranked
candidates, on both shared sets, side by side in one run.

For each set (WorkBench split by `meta.instance` 0-6 / 7-9, tau2 by `meta.split`, the tau2
retail agent runs as bench/eval_sets.py splits them) it induces with the rule inducer (default
settings), ranks the
30 best workflows for every scored test run (successful, with steps) as `flowmem eval` does
(`ExampleIndex` over the stored retrieval keys and shares), then replays each policy on that
same ranking and scores what it serves with `flowmem.induction.render.metrics.memory_metrics`:

- `served now`: the relevance gap and ratio (settings) and `retrieval.serving.compose`, k=3, what
  `memory.search` serves;
- `first only`: k=1;
- `gap G alone`, `gap G`: the memories within G of the first's score, k=3 (compose as above;
  no ratio);
- `ratio R`: the memories within the settings' gap and scoring at least R times the first;
- `alone above T`: the first alone when it scores at least T, else the gap alone;
- `oracle single`: per test run, the workflow (of all) with the best coverage, then precision:
  the bound of any k=1 ranking.

Deterministic, offline, ~15 s on 2 cores. Usage: python bench/serving_frontier.py [DATA_DIR]
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.render.metrics import LeakChecker, Retrieval, memory_metrics
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory, Workflow
from flowmem.retrieval.align import lcs_pairs
from flowmem.retrieval.nearest import ExampleIndex
from flowmem.retrieval.serving import compose, within_gap
from flowmem.settings import Settings
from flowmem.storage import Store

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.eval_sets import agent_split  # the retail agent runs' split, as flowmem eval's
from bench.paths import SHARED_DATA

SPLITS: dict[str, tuple[str, Callable[[Trajectory], bool]]] = {
    "workbench": ("workbench_trajectories.jsonl.gz", lambda t: t.meta["instance"] <= 6),
    "tau2": ("tau2_oracle_trajectories.jsonl.gz", lambda t: t.meta["split"] == "train"),
}
METRICS = ("coverage", "step_precision", "joint_coverage", "joint_precision", "utility_rate")
Ranked = list[tuple[int, float]]
Policy = Callable[[Trajectory, Ranked, list[Workflow]], list[int]]


def served(gap: float | None, k: int = 3, ratio: float | None = None) -> Policy:
    def pick(t: Trajectory, ranked: Ranked, ws: list[Workflow]) -> list[int]:
        near = ranked[: within_gap([s for _, s in ranked], gap, ratio)]
        return [near[p][0] for p in compose([ws[i] for i, _ in near], k)]

    return pick


def alone_above(threshold: float, gap: float | None) -> Policy:
    rest = served(gap)  # the gap alone, as served before the ratio

    def pick(t: Trajectory, ranked: Ranked, ws: list[Workflow]) -> list[int]:
        return [ranked[0][0]] if ranked and ranked[0][1] >= threshold else rest(t, ranked, ws)

    return pick


def oracle(t: Trajectory, ranked: Ranked, ws: list[Workflow]) -> list[int]:
    def fit(i: int) -> tuple[float, float]:
        n = len(lcs_pairs(t.actions, ws[i].actions))
        return n / len(t.actions), n / max(1, len(ws[i].actions))

    return [max(range(len(ws)), key=fit)]


def induced_store(
    train: Sequence[Trajectory], settings: Settings, db: Path
) -> tuple[Store, list[Workflow], ExampleIndex]:
    """A store at `db` holding `train` and one full rule induction of it, as `flowmem eval`
    builds its memory; its workflows and their index over the stored retrieval keys."""
    ns = settings.namespace
    local = settings.model_copy(update={"db": str(db)})
    store = store_from(local)
    store_trajectories(store, [t.model_copy(update={"namespace": ns}) for t in train], local.scrub)
    run_induction(store, local, RuleInducer(), namespace=ns)  # `flowmem induce`'s code
    ws, matrix, owners, k_shares = store.workflow_index(namespace=ns)
    return store, ws, ExampleIndex(matrix, owners, len(ws), k_shares)


def replay(
    train: Sequence[Trajectory], test: Sequence[Trajectory], settings: Settings
) -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        store, ws, index = induced_store(train, settings, Path(tmp) / "db")
        scored = [t for t in test if t.success and t.actions]
        queries = store.embedder.embed([t.task for t in scored])
        rankings = [index.search(q, 30) for q in queries]
    gap, ratio = settings.relevance_gap, settings.relevance_ratio
    policies: dict[str, Policy] = {
        "served now": served(gap, ratio=ratio),
        "first only": served(gap, k=1, ratio=ratio),
        f"gap {gap} alone": served(gap),
        **{f"ratio {r}": served(gap, ratio=r) for r in (0.6, 0.7, 0.75, 0.8)},
        **{f"gap {g}": served(g) for g in (0.2, 0.15, 0.1, 0.05)},
        **{f"alone above {x}": alone_above(x, gap) for x in (0.9, 0.8, 0.7)},
        "oracle single": oracle,
    }
    leak = LeakChecker(LiteralIndex.build(train).rare_values())
    out = {}
    for name, policy in policies.items():
        retrievals = []
        for t, ranked in zip(scored, rankings, strict=True):
            chosen = policy(t, ranked, ws)
            retrievals.append(Retrieval(t.actions, True, [(ws[i].id, ws[i].actions, "") for i in chosen]))
        report = memory_metrics(retrievals, leak, None, len(ws))
        shown = sum(len(r.memories) for r in retrievals) / max(1, len(retrievals))
        out[name] = {**{m: report[m] for m in METRICS}, "shown": round(shown, 2)}
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    data = Path(argv[0]) if argv else SHARED_DATA
    settings = Settings()
    for name, (file, is_train) in SPLITS.items():
        path = data / file
        if not path.exists():
            print(f"{name}: {path} not found, skipped", file=sys.stderr)
            continue
        runs = [t for t in read_trajectories(path, settings) if not isinstance(t, Rejection)]
        show(name, replay([t for t in runs if is_train(t)], [t for t in runs if not is_train(t)], settings))
    agents = agent_split(data, settings)
    if agents is None:
        print("tau2_agents: the retail agent runs or the oracle set not found, skipped", file=sys.stderr)
    else:
        show("tau2_agents", replay(*agents, settings))
    return 0


def show(name: str, table: dict[str, dict[str, Any]]) -> None:
    print(f"\n{name}")
    print(f"{'policy':<18}" + "".join(f"{m[:14]:>16}" for m in (*METRICS, "shown")))
    for policy, row in table.items():
        print(f"{policy:<18}" + "".join(f"{row[m]!s:>16}" for m in (*METRICS, "shown")))


if __name__ == "__main__":
    raise SystemExit(main())
