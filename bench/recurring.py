"""Search for a task that recurs on a store of many runs, this checkout's code and another
revision's side by side in one run.

A task recurs when one of the successful stored runs most similar to it is of the same task
up to its example values (`retrieval.cover.Evidence.runs_for`); its search then chooses what
to serve with those runs as evidence. Finding them scored every stored run (`evidence_limit`,
100,000 by default) on every search of a task whose template is a known one; with an index
of the stored tasks it scores the runs of the task's template and of the stored tasks the
index finds nearest.

A synthetic store of `--n` workflows is filled once (`bench.data.fill`, as `python -m bench
search` fills it), with one successful run of each workflow's own task and action (the
stored runs `python -m bench search` puts in its evidence, stored here as an agent's runs);
then, in turn, a fresh process of each revision opens a `WorkflowMemory` on a copy of it,
waits for its ANNs (the keys' and the stored tasks'), and searches, k=3:
- `--queries` tasks drawn like the stored ones (`bench.data.queries`: most recur), p50
  `recurring`;
- `--queries` tasks from no known domain (`bench.data.foreign_queries`), p50 `foreign`;
counts how often its evidence gives the runs that scoring every stored run gives, over both
(`runs_agree`: 1 where the revision scores every run), and the share of the first that recur
(`recur_share`, by scoring every run); then, as another process's induction run, stores one
run and commits one workflow through another store object, searches until the reload that
reads it is served, and at once searches `--queries` more tasks drawn like the stored ones, p50
`after_induction` (the stored runs are read anew then, and an HNSW of them built anew in the
background).

Usage: python bench/recurring.py [--n 100000] [--queries 200] [--before REV | --before none]
       [--rounds 2] [--json] [--out FILE]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import revisions
from bench.data import foreign_queries, queries, task_text, workflow
from bench.revisions import OPEN, arguments, compared
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Step, Trajectory
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["BEFORE", "main", "recurring", "stored_runs"]

BEFORE = "679bfca"
"""The revision compared with by default: before a recurring task's search asked the stored
tasks' index (issue 41)."""

PROBE = (
    OPEN
    + """
import copy
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Step, Trajectory
from flowmem.retrieval.ann import AnnSlot
from flowmem.settings import Settings

db, tasks, foreign = given()
n = len(tasks) // 2
with WorkflowMemory.open(db) as memory:
    ready(memory, tasks[0])
    deadline = time.monotonic() + 1200
    while memory.index._evidence.index.ann is None and time.monotonic() < deadline:
        time.sleep(0.05)
    out["recurring"] = timed(memory, tasks[:n])
    out["foreign"] = timed(memory, foreign)
    evidence = memory.index._evidence
    exact = copy.copy(evidence)
    object.__setattr__(exact, "index", AnnSlot())
    vectors = memory.store.embedder.embed(tasks[:n] + foreign)
    pairs = list(zip(tasks[:n] + foreign, vectors))
    out["runs_agree"] = sum(evidence.runs_for(t, v) == exact.runs_for(t, v) for t, v in pairs) / len(pairs)
    out["recur_share"] = sum(bool(exact.runs_for(t, v)) for t, v in pairs[:n]) / n
    # Another process's induction run: a new run stored, a new workflow committed.
    other = store_from(Settings(db=db))
    later = Trajectory(id="later", task=tasks[n], steps=[Step(action="task.do")], success=True)
    store_trajectories(other, [later], [])
    made = Workflow(id="later", name="do_later", steps=[WorkflowStep(action="task.do")], status="active")
    other.commit_run(InductionRun(id="later"), [made], keys={"later": other.embedder.embed([tasks[n]])})
    version = memory.index._version
    while memory.index._version == version and time.monotonic() < deadline:
        memory.search(tasks[0], k=3)
        time.sleep(0.01)
    out["after_induction"] = timed(memory, tasks[n:])
done()
"""
)
"""One probe: the p50 search times (ms) of a fresh process on its own copy of the store, and
how often its evidence agrees with scoring every stored run."""


def stored_runs(store: Store, n: int) -> None:
    """One successful run of each of the n workflows `fill` committed: its key's task, its
    step's action."""
    runs = (
        Trajectory(
            id=f"run-{i:07d}",
            task=task_text(i),
            steps=[Step(action=workflow(i).steps[0].action, args={"id": str(i)}, observation="ok")],
            success=True,
        )
        for i in range(n)
    )
    store_trajectories(store, runs, Settings().scrub)


def recurring(
    n: int = 100_000, *, count: int = 200, before: str | None = BEFORE, rounds: int = 2
) -> dict[str, Any]:
    """Each revision's median (over `rounds` probes) of each figure, and the ratios of this
    checkout's to `before`'s."""
    out: dict[str, Any] = {"n": n, "queries": count, "rounds": rounds, "before": before}
    args = arguments(queries(2 * count, seed=13), foreign_queries(count, seed=14))
    found = compared(
        n,
        PROBE,
        args,
        before=before,
        rounds=rounds,
        unit=lambda name: "" if name in ("runs_agree", "recur_share") else "_ms",
        prepare=lambda store: stored_runs(store, n),
    )
    out.update(found)
    return out


def main(argv: list[str] | None = None) -> int:
    args = revisions.parser(__doc__, BEFORE).parse_args(argv)
    before = None if args.before == "none" else args.before
    return revisions.report(recurring(args.n, count=args.queries, before=before, rounds=args.rounds), args)


if __name__ == "__main__":
    raise SystemExit(main())
