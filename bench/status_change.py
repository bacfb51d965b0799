"""Search around a change of the served versions, this checkout's code and another revision's
side by side in one run.

A served index reloads when the versions it serves change: a person retires or promotes one
(the dashboard, `flowmem workflows`, the API), a rollback, an induction run's new versions. A
process that made the change itself reloads before its next search; another process's change
is reloaded behind its searches. Until a new ANN is built (~16 s at 100k keys, in the
background) the reloaded snapshot scored every key, unless it serves the one before through a
map of keys (`retrieval.ann_reuse`).

Here a synthetic store of `--n` workflows is filled once (`bench.data.fill`); then, in turn, a
fresh process of each revision works on a copy of it: it opens a `WorkflowMemory`, waits for
its ANN, searches `--queries` tasks (p50: `steady`), and then
- retires one served version through its own store: the first search after it (`own_first`,
  the reload included) and the p50 of the next `--queries` (`own_after`);
- another store object (as another process) retires one: the seconds until the change is
  served (`other_served_s`) and the p50 of the next `--queries` searches (`other_after`);
- another store object commits `--added` new versions with one key each (as an induction run):
  the seconds until served (`added_served_s`) and the p50 of the next searches (`added_after`).
The other revision (`--before`) is its `flowmem/` from `git archive`, run by the same
interpreter; the revisions alternate by process, `--rounds` times; a figure is the median of
the rounds'.

Usage: python bench/status_change.py [--n 100000] [--queries 200] [--added 100]
       [--before REV | --before none] [--rounds 2] [--json] [--out FILE]
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import revisions
from bench.data import queries
from bench.revisions import OPEN, arguments, compared

__all__ = ["BEFORE", "main", "status_change"]

BEFORE = "db6562e"
"""The revision compared with by default: before a reload borrowed the ANN it replaced and a
change of status alone was read without the workflows table (issue 41)."""

PROBE = (
    OPEN
    + """
from flowmem.policy.lifecycle import Transition

db, tasks, added = given()
n = len(tasks) // 4

def served_after(memory, change):
    # Seconds from the change until a search serves it (searching every 10 ms meanwhile).
    before = memory.index.reloads
    start = time.perf_counter()
    change()
    while memory.index.reloads == before:
        memory.search(tasks[0], k=3)
        time.sleep(0.01)
    return time.perf_counter() - start

with WorkflowMemory.open(db) as memory:
    ready(memory, tasks[0])
    rows = memory.index._snapshot.rows
    key = lambda i: (rows.ids[i], int(rows.versions[i]))
    out["steady"] = timed(memory, tasks[:n])
    memory.store.record_transitions([Transition(*key(1), "active", "retired", "bench")])
    start = time.perf_counter()
    memory.search(tasks[n], k=3)
    out["own_first"] = (time.perf_counter() - start) * 1000
    out["own_after"] = timed(memory, tasks[n + 1 : 2 * n])
    other = store_from(memory.store.settings)
    retire = lambda: other.record_transitions([Transition(*key(2), "active", "retired", "bench")])
    out["other_served_s"] = served_after(memory, retire)
    out["other_after"] = timed(memory, tasks[2 * n : 3 * n])
    new = [
        Workflow(id=f"zz-added-{i}", version=1, name=f"added {i}", description=f"added workflow {i}",
                 steps=[WorkflowStep(action="task.do", args={})], status="active")
        for i in range(added)
    ]
    keys = {w.id: other.embedder.embed([f"{tasks[3 * n + i % n]} added"]) for i, w in enumerate(new)}
    commit = lambda: other.commit_run(InductionRun(id="bench-added"), new, keys=keys)
    out["added_served_s"] = served_after(memory, commit)
    out["added_after"] = timed(memory, tasks[3 * n :])
done()
"""
)
"""One probe: the p50 search times (ms) and seconds to serve of a fresh process on its own
copy of the store."""


def status_change(
    n: int = 100_000, *, count: int = 200, added: int = 100, before: str | None = BEFORE, rounds: int = 2
) -> dict[str, Any]:
    """Each revision's median (over `rounds` probes) of each figure, and the ratios of this
    checkout's to `before`'s."""
    out: dict[str, Any] = {"n": n, "queries": count, "added": added, "rounds": rounds, "before": before}
    tasks = queries(count * 4, seed=13)
    unit: Callable[[str], str] = lambda name: "" if name.endswith("_s") else "_ms"  # noqa: E731
    out.update(compared(n, PROBE, arguments(tasks, added), before=before, rounds=rounds, unit=unit))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = revisions.parser(__doc__, BEFORE)
    parser.add_argument("--added", type=int, default=100, help="versions another store commits")
    args = parser.parse_args(argv)
    before = None if args.before == "none" else args.before
    found = status_change(args.n, count=args.queries, added=args.added, before=before, rounds=args.rounds)
    return revisions.report(found, args)


if __name__ == "__main__":
    raise SystemExit(main())
