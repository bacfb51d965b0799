"""Search on a store whose versions have outcomes, and the search right after an outcome, this
checkout's code and another revision's side by side in one run.

`python -m bench search` times stores where no version has an outcome: every rank factor is 1.
An agent's store has outcomes, which rank some versions up (a factor up to 1.5) and others
down, and a process that reports one (`WorkflowMemory`'s runs, `POST /v1/runs/{id}/outcome`)
reloads the usage before its next search. Here a synthetic store of `--n` workflows is filled
once (`bench.data.fill`, as `python -m bench search` fills it); then, in turn, a fresh process
of each revision works on a copy of it: it opens a `WorkflowMemory`, waits for its ANN, and
- searches `--queries` distinct tasks, k=3 (p50: `untried`);
- `--queries` times, reports one success of a version chosen at random through its own store
  and searches (p50 of those searches: `after_outcome`);
- for each count B of `--boosted`, gives B versions chosen at random three successes (one
  commit) and searches `--queries` other tasks (p50: `boosted_B`), then, once a new ANN
  built for the factors now (if one is: more keys ranked up than `ranking.BOOSTED`) has
  landed, `--queries` more (`boosted_B_built`).
The other revision (`--before`) is its `flowmem/` from `git archive`, run by the same interpreter;
the revisions alternate by process, `--rounds` times; a figure is the median of the rounds'.

Usage: python bench/outcomes.py [--n 100000] [--queries 200] [--boosted 1,2000]
       [--before REV | --before none] [--rounds 2] [--json] [--out FILE]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import revisions
from bench.data import queries
from bench.revisions import OPEN, arguments, compared

__all__ = ["BEFORE", "main", "outcomes"]

BEFORE = "76354dc"
"""The revision compared with by default: before the usage reload applied the changed versions
alone and the ANN's proof scored the versions ranked up beside its keys (issue 41)."""

PROBE = (
    OPEN
    + """
import random
from flowmem.models import UsageStats

db, tasks, boosted = given()
n = len(tasks) // (2 + 2 * len(boosted))
with WorkflowMemory.open(db) as memory:
    ready(memory, tasks[0])
    rows, store, rng = memory.index._snapshot.rows, memory.store, random.Random(7)

    def key(i):
        return rows.ids[i], int(rows.versions[i])

    out["untried"] = timed(memory, tasks[:n])
    after = []
    for task in tasks[n : 2 * n]:
        store.add_usage({key(rng.randrange(len(rows))): UsageStats(served=1, successes=1)})
        start = time.perf_counter()
        memory.search(task, k=3)
        after.append((time.perf_counter() - start) * 1000)
    out["after_outcome"] = statistics.median(after)
    for j, count in enumerate(boosted):
        chosen = rng.sample(range(len(rows)), count)
        store.add_usage({key(i): UsageStats(served=3, successes=3) for i in chosen})
        memory.search(tasks[0], k=3)  # the usage reloaded
        out[f"boosted_{count}"] = timed(memory, tasks[(2 + 2 * j) * n : (3 + 2 * j) * n])
        # Once a new ANN, if one is being built for the factors now, has landed.
        deadline = time.monotonic() + 1200
        while memory.index._snapshot.slot.ann is None and time.monotonic() < deadline:
            time.sleep(0.05)
        out[f"boosted_{count}_built"] = timed(memory, tasks[(3 + 2 * j) * n : (4 + 2 * j) * n])
done()
"""
)
"""One probe: the p50 search times (ms) of a fresh process on its own copy of the store."""


def outcomes(
    n: int = 100_000,
    *,
    count: int = 200,
    boosted: tuple[int, ...] = (1, 2000),
    before: str | None = BEFORE,
    rounds: int = 2,
) -> dict[str, Any]:
    """Each revision's median (over `rounds` probes) of each p50, and the ratios of this
    checkout's to `before`'s."""
    out: dict[str, Any] = {"n": n, "queries": count, "rounds": rounds, "before": before}
    tasks = queries(count * (2 + 2 * len(boosted)), seed=11)
    out.update(compared(n, PROBE, arguments(tasks, list(boosted)), before=before, rounds=rounds))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = revisions.parser(__doc__, BEFORE)
    parser.add_argument("--boosted", default="1,2000", help="versions given successes, in turn")
    args = parser.parse_args(argv)
    boosted = tuple(int(b) for b in args.boosted.split(",") if b)
    before = None if args.before == "none" else args.before
    found = outcomes(args.n, count=args.queries, boosted=boosted, before=before, rounds=args.rounds)
    return revisions.report(found, args)


if __name__ == "__main__":
    raise SystemExit(main())
