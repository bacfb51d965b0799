"""Search on the shared sets' stores: `memory.search` of each test task, as an agent is served,
this checkout's code and another revision's side by side in one run.

Each set's training runs are stored and induced (the rule inducer, as `flowmem eval` does:
WorkBench instances 0-6, tau2 oracle `meta.split` train, the retail agents' train split with the
oracle's retail train runs as demonstrations: `bench/eval_sets.py`). Then a fresh process per
revision opens a `WorkflowMemory` on that store, searches once (loading the index, untimed),
and searches each distinct test task once, in file order, k=3: the embedding, the ranking, the
relevance floor, the choice by a recurring task's nearest runs (`cover`) and building the hits,
as `memory.search` does them. The revisions alternate, a process each, `--rounds` times,
each first in every other round; a figure is the median over the rounds of each process's p50,
p95 or mean (and of its thread's CPU p50), and a ratio the median of the rounds' ratios. The
other revision (`--before`) is its `flowmem/` from `git archive`, run by the same interpreter on
the same store; `same_hits` says whether both served the same versions to every task.

The synthetic stores of `python -m bench search` hold one key per workflow and tasks that never
recur; these hold what induction commits from real runs (a workflow keyed by its source tasks,
sub-routines, loops) and tasks that recur, which `cover` chooses for by their past runs.

With `--gap`, each search comes that many seconds after the last, as an agent's do while it
waits on its model: past the served index's `check_every` (0.25 s), every search first asks
whether the store moved on, and the CPU's caches have gone cold.

With `--s3`, each induced store is copied to moto's S3 server (started in this process, as
`bench/s3_commits.py` starts it) and searched there: a check whether the store moved on is
then three listings over HTTP.

Usage: python bench/search_sets.py [DATA_DIR] [--before REV | --before none] [--rounds N]
       [--gap SECONDS] [--tasks N] [--s3] [--json] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.agent_start import _code_at, emitted, run_probe
from bench.eval_sets import AGENT_RUNS, SPLITS, agent_split
from bench.paths import REPO, SHARED_DATA
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.interchange import Rejection, read_trajectories
from flowmem.jobs.evaluate import induced_store
from flowmem.models import Trajectory
from flowmem.settings import Settings

__all__ = ["BEFORE", "main", "search_sets"]

BEFORE = "dcf240e"
"""The revision compared with by default: main before `cover` kept its matches and cut its
tables (issue 41)."""

PROBE = """
import hashlib, json, sys, time
from flowmem.agents import WorkflowMemory

tasks, gap = json.load(open(sys.argv[2])), float(sys.argv[3])
with WorkflowMemory.open(sys.argv[1]) as memory:
    memory.search(tasks[0], k=3)  # loads the index, as an agent's first search does
    times, cpu, served = [], [], hashlib.sha256()
    for task in tasks:
        time.sleep(gap)  # an agent's wait for its model between two searches
        start, used = time.perf_counter(), time.thread_time()
        hits = memory.search(task, k=3)
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.thread_time() - used) * 1000)
        served.update(repr([(h.workflow.id, h.workflow.version) for h in hits]).encode())
    import flowmem.agents
print(json.dumps({"times": times, "cpu": cpu, "served": served.hexdigest(), "code": flowmem.agents.__file__}))
"""
"""One probe: every test task searched once, each search timed (ms), wall and the thread's CPU
(which a busy machine's waits for a core do not add to), and a digest of what each served."""


def _sets(data: Path, settings: Settings) -> dict[str, tuple[list[Trajectory], list[Trajectory]]]:
    """Each shared set's train and test runs, as `bench/eval_sets.py` splits them (a set whose
    file is absent is left out)."""
    found: dict[str, tuple[list[Trajectory], list[Trajectory]]] = {}
    for name, (file, is_train) in SPLITS.items():
        if (data / file).exists():
            runs = [t for t in read_trajectories(data / file, settings) if not isinstance(t, Rejection)]
            found[name] = [t for t in runs if is_train(t)], [t for t in runs if not is_train(t)]
    agents = agent_split(data, settings)
    if agents is not None:
        found["tau2_agents"] = agents
    return found


def _probe(
    code: Path, db: str, tasks: Path, gap: float = 0.0, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """One fresh process of the flowmem at `code` searching every task of the file `tasks`,
    `gap` seconds after the last search each (`env`: FLOWMEM_* settings besides the store)."""
    found: dict[str, Any] = run_probe(code, PROBE, [db, str(tasks), str(gap)], tasks.parent, env)
    return found


class _Bucket:
    """moto's S3 server (in this process) with a bucket that stores are copied to."""

    def __init__(self, endpoint: str) -> None:
        import boto3  # type: ignore[import-untyped]

        from bench.s3_commits import BUCKET, KEY

        self.endpoint, self.name, self.key = endpoint, BUCKET, KEY
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=KEY,
            aws_secret_access_key=KEY,
        )

    def upload(self, db: Path, prefix: str) -> tuple[str, dict[str, str]]:
        """A local store's files copied under `prefix` (a Lance table is its files, at paths
        relative to it): its URI, and the FLOWMEM_* settings that open it."""
        for path in sorted(p for p in db.rglob("*") if p.is_file()):
            self.client.upload_file(str(path), self.name, f"{prefix}/{path.relative_to(db).as_posix()}")
        env = {
            "FLOWMEM_S3_ENDPOINT": self.endpoint,
            "FLOWMEM_S3_REGION": "us-east-1",
            "FLOWMEM_S3_ACCESS_KEY_ID": self.key,
            "FLOWMEM_S3_SECRET_ACCESS_KEY": self.key,
            "FLOWMEM_S3_ALLOW_HTTP": "true",
        }
        return f"s3://{self.name}/{prefix}", env


@contextlib.contextmanager
def _object_store(wanted: bool) -> Iterator[_Bucket | None]:
    """moto's S3 server while the bench runs (`bench/s3_commits.start_server`), if `wanted`."""
    if not wanted:
        yield None
        return
    from bench.s3_commits import start_server

    server, endpoint = start_server()
    try:
        yield _Bucket(endpoint)
    finally:
        server.stop()


def _percentiles(times: Sequence[float]) -> tuple[float, float, float]:
    """p50, p95 and the mean of some times."""
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95, statistics.fmean(ordered)


def _figures(probes: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Each revision's median p50, p95, mean and CPU p50 over its probes (ms), and, with a
    revision before, whether both served the same and the median ratios of their rounds."""
    row: dict[str, Any] = {}
    for code, found in probes.items():
        suffix = "" if code == "now" else "_before"
        figures = [_percentiles(p["times"]) for p in found]
        for at, label in enumerate(("p50", "p95", "mean")):
            row[f"{label}_ms{suffix}"] = statistics.median(f[at] for f in figures)
        row[f"cpu_p50_ms{suffix}"] = statistics.median(_percentiles(p["cpu"])[0] for p in found)
        if len({p["served"] for p in found}) != 1:
            raise RuntimeError(f"the probes on {code} served different hits")
    if "before" in probes:
        row["same_hits"] = probes["now"][0]["served"] == probes["before"][0]["served"]
        pairs = list(zip(probes["now"], probes["before"], strict=True))
        for at, label in enumerate(("ratio", "ratio_p95", "ratio_mean")):
            row[label] = statistics.median(
                _percentiles(now["times"])[at] / _percentiles(then["times"])[at] for now, then in pairs
            )
        row["ratio_cpu"] = statistics.median(
            _percentiles(now["cpu"])[0] / _percentiles(then["cpu"])[0] for now, then in pairs
        )
    return row


def search_sets(
    data: Path = SHARED_DATA,
    *,
    before: str | None = BEFORE,
    rounds: int = 5,
    gap: float = 0.0,
    limit: int | None = None,
    s3: bool = False,
) -> dict[str, Any]:
    """Per shared set: the store's size, the test tasks searched (the first `limit`), and each
    revision's median p50 and p95 over `rounds` probes (ms), with the median ratio of this
    checkout's p50 to `before`'s; each search `gap` seconds after the last; with `s3`, the
    store copied to moto's S3 server and searched there."""
    settings = Settings()
    out: dict[str, Any] = {
        "rounds": rounds,
        "gap_s": gap,
        "s3": s3,
        "before": before,
        "load_average_1m": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory() as tmp, _object_store(s3) as bucket:
        codes = {"now": REPO}
        if before is not None:
            codes["before"] = _code_at(before, Path(tmp) / "before")
        for name, (train, test) in _sets(data, settings).items():
            tasks = list(dict.fromkeys(t.task for t in test))[:limit]
            task_file = Path(tmp) / f"{name}.json"
            task_file.write_text(json.dumps(tasks))
            with induced_store(train, RuleInducer(), settings=settings) as (store, report):
                db, env = str(store.settings.db), dict[str, str]()
                if bucket is not None:
                    db, env = bucket.upload(Path(db), name)
                probes: dict[str, list[dict[str, Any]]] = {code: [] for code in codes}
                for turn in range(rounds):  # in turn first, so that neither always follows the other
                    for code, path in list(codes.items())[:: -1 if turn % 2 else 1]:
                        probes[code].append(_probe(path, db, task_file, gap, env))
            row: dict[str, Any] = {
                "store": db if bucket is not None else "local",
                "workflows": len(report.versions),
                "train": len(train),
                "tasks": len(tasks),
            }
            row.update(_figures(probes))
            out[name] = row
    return out


def _table(found: dict[str, Any], before: str | None) -> str:
    """The figures as a Markdown table: per set, each revision's p50, p95 and mean (ms), and
    the ratios."""
    head = "| set | workflows | test tasks | p50 | p95 | mean |"
    rule = "|---|---:|---:|---:|---:|---:|"
    if before:
        head += f" {before}: p50 | p95 | mean | ratio p50 | p95 | mean | CPU p50 |"
        rule += "---:|" * 7
    lines = [head, rule]
    for name, row in found.items():
        if isinstance(row, dict):
            cells = [name, str(row["workflows"]), str(row["tasks"])]
            cells += [f"{row[f'{x}_ms']:.3f}" for x in ("p50", "p95", "mean")]
            if before:
                cells += [f"{row[f'{x}_ms_before']:.3f}" for x in ("p50", "p95", "mean")]
                cells += [f"{row[x]:.2f}" for x in ("ratio", "ratio_p95", "ratio_mean", "ratio_cpu")]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "data", nargs="?", type=Path, default=SHARED_DATA, help="the shared data sets' folder"
    )
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with ('none': no other)")
    parser.add_argument("--rounds", type=int, default=5, help="probes of each revision (the median is kept)")
    parser.add_argument(
        "--gap", type=float, default=0.0, help="seconds between two searches (an agent waiting on its model)"
    )
    parser.add_argument("--tasks", type=int, help="search only each set's first N test tasks")
    parser.add_argument("--s3", action="store_true", help="search each store copied to moto's S3 server")
    parser.add_argument("--json", action="store_true", dest="as_json", help="print one JSON object")
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args(argv)
    before = None if args.before == "none" else args.before
    if not any((args.data / f).exists() for f in (*(s[0] for s in SPLITS.values()), AGENT_RUNS)):
        print(f"no shared data set in {args.data}", file=sys.stderr)
        return 1
    found = search_sets(
        args.data, before=before, rounds=args.rounds, gap=args.gap, limit=args.tasks, s3=args.s3
    )
    if not emitted(found, args.out, as_json=args.as_json):
        print(_table(found, before))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
