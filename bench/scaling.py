"""How each stage of the induction path grows with the number of trajectories (docs/scaling.md).

For each size (a number of trajectories), on a fresh store in a directory of its own:
- generate that many trajectories (`flowmem.demo.simulate`, in chunks of `--chunk` tasks, each
  chunk a world of its own seed) and store them (`store_trajectories`: scrub, embed, write),
  timed as `ingest` (the generator's own time apart, as `generate`);
- run a full induction in a fresh process (`python bench/scaling.py --child DB`), which
  times its stages and its peak RSS:
  - read: the namespace read in batches of columns, the literal index and the sub-routine
    segments (`induction.plan.catalog.scan`);
  - cluster: every agent's fit on its sample and the placement of the other texts
    (`bounded.fit_namespace`);
  - contrast: each changed cluster's contrast runs, the plan's task texts embedded
    (`jobs.induce.with_contrast`);
  - load: the clusters' runs read, in one pass over the namespace then a group at a time
    (`storage.scans.spill_groups`, `spilled`), or by id when they are under half of it
    (`storage.scans.trajectories_by_id`);
  - induce: the rule inducer over every cluster (`induce_cluster`);
  - commit: assembling the drafts and the one LanceDB commit of the run (`commit_outcomes`);
  and reports `peak_rss_growth_mb`: its peak RSS (VmHWM) less its RSS once imported;
- with `--incremental`, store 1% more trajectories and time `flowmem induce` in a fresh process
  against the full run's process (both wall seconds, start to exit), with its peak RSS
  (`ru_maxrss`) and that peak's growth over the peak of a second `flowmem induce`, which finds
  nothing new (imports and the opened store: `skipped_peak_rss_mb`).
Then the slope of each stage between consecutive sizes: the exponent b in time ~ n^b.

`--dask --sizes 30000` instead, for the first size: one store filled and copied three times,
the induce flow (`flowmem.flows.pipeline.induce_flow`, on a temporary Prefect server of its
own) run in a fresh process on each copy: in process (Prefect's thread pool), then on a local
Dask cluster of 1 and of 2 worker processes (`FLOWMEM_DASK_ADDRESS=local:N`). Each reports the
flow's wall time, the cluster's start (entering the task runner) and the flow's own plan /
induce / commit times; then whether the three stores hold the same workflows (every version,
whole, but for the times of day and the run ids: `committed`) and the same runs.

`--s3 --sizes 30000` instead measures the first size twice, as above, the store in a local
directory and on `s3://` on moto's S3 server started in this process (the dev extra): every
stage, the fill's included.

`--reads DB,DB,...` instead times only the reads of what a full run induces, on stores kept
(e.g. filled by `--dir`): for each store, the groups of ids its full run reads (the plan's
clusters, a group at a time as `jobs.induce.induce_all` reads them, their contrast runs left
out: planned without `with_contrast`; cached next to the store as DB.groups.json), then, each in
a fresh process, those groups read by id (`trajectories_by_id`, after the id index is built,
timed apart) and in one pass (`spill_groups`, then `spilled` per group); then the slope of each
between consecutive stores.

`--agreement FILE,... --samples 500,1000` instead measures what fitting on a sample changes
(`induction.plan.bounded.fit_texts`): for each trajectory file (or `sim:N`, N simulated tasks) and
each agent with more distinct task texts than a sample size, the adjusted Rand index between
each run's cluster fitted on every text and fitted on the sample (the others placed), over the
runs; and, where runs carry their group, each fit's ARI and NMI against the groups.

Usage: python bench/scaling.py [--sizes 100000,300000] [--incremental] [--json] [--dir DIR]
       python bench/scaling.py --reads DIR/db-100000,DIR/db-300000 [--json]
       python bench/scaling.py --dask --sizes 30000 [--json]
       python bench/scaling.py --s3 --sizes 30000 [--json]
       python bench/scaling.py --agreement ../shared/data/workbench_trajectories.jsonl.gz,sim:20000
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.paths import script

STAGES = ["generate", "ingest", "read", "cluster", "contrast", "load", "induce", "commit"]
TIMED = {
    "scan": "read",
    "fit_namespace": "cluster",
    "with_contrast": "contrast",
    "trajectories_by_id": "load",
    "spill_groups": "load",
    "spilled": "load",
    "induce_cluster": "induce",
    "commit_outcomes": "commit",
}
"""The functions `flowmem.jobs.induce` calls by these names, each timed as that stage."""


def reset_peak() -> None:
    """Start the peak RSS (VmHWM) over from the current RSS (Linux: /proc/self/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def status_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def timed(
    spent: dict[str, float], stage: str, fn: Callable[..., Any], peaks: dict[str, float] | None = None
) -> Callable[..., Any]:
    """`fn`, adding its wall seconds to `spent[stage]` (and the peak RSS after it to `peaks`)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[stage] = spent.get(stage, 0.0) + time.perf_counter() - start
            if peaks is not None:
                peaks.setdefault(stage, status_mb("VmHWM"))  # the peak once the stage first ran

    return wrapper


def _env(db: str) -> dict[str, str]:
    return {**os.environ, "FLOWMEM_DB": db, "LANCEDB_LOG": "error"}


def fill(db: str, n: int, *, seed: int, chunk: int) -> dict[str, float]:
    """Store `n` simulated trajectories in `db`, a chunk of tasks (a world of its own) at a
    time; the generator's time and the store's apart."""
    from flowmem.demo import simulate
    from flowmem.jobs.factories import store_from
    from flowmem.jobs.ingest import store_trajectories
    from flowmem.settings import Settings

    settings = Settings(db=db)
    store = store_from(settings)
    store.prepare()
    spent = {"generate": 0.0, "ingest": 0.0}
    stored, k = 0, 0
    while stored < n:
        start = time.perf_counter()
        runs = simulate(chunk, seed=seed * 100_000 + k)[: n - stored]
        spent["generate"] += time.perf_counter() - start
        start = time.perf_counter()
        store_trajectories(store, runs, settings.scrub)
        spent["ingest"] += time.perf_counter() - start
        stored, k = stored + len(runs), k + 1
        del runs
        gc.collect()
    return spent


def child(db: str) -> dict[str, float]:
    """One full induction of the store at `db` in this (fresh) process, timed by stage."""
    from flowmem.induction.cluster.cluster import cluster_tasks
    from flowmem.induction.inducers.rule import RuleInducer
    from flowmem.jobs import induce as induce_job
    from flowmem.jobs.factories import store_from
    from flowmem.settings import Settings

    settings = Settings(db=db)
    store = store_from(settings)
    store.count_trajectories(namespace=settings.namespace)  # the store opened before the peak starts
    cluster_tasks(["warm up", "the imports", "of a fit"])  # sklearn and hdbscan imported, not timed
    gc.collect()
    reset_peak()
    before = status_mb("VmRSS")
    spent: dict[str, float] = {}
    peaks: dict[str, float] = {}
    for name, stage in TIMED.items():
        setattr(induce_job, name, timed(spent, stage, getattr(induce_job, name), peaks))
    start = time.perf_counter()
    report = induce_job.run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    spent["total_induce"] = time.perf_counter() - start
    spent["workflows"] = float(len(report.versions))
    spent["clusters"] = float(len(report.plan.fingerprints))
    spent["trajectories"] = float(report.plan.total)
    spent["peak_rss_growth_mb"] = status_mb("VmHWM") - before
    for stage, peak in peaks.items():  # where the peak was reached
        spent[f"peak_after_first_{stage}_mb"] = peak - before
    spent["rss_before_mb"] = before
    return spent


def _wall(cmd: list[str], db: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env or _env(db), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-3000:]}")
    return time.perf_counter() - start, done.stdout


def _wall_peak(cmd: list[str], db: str) -> tuple[float, float]:
    """`cmd`'s wall seconds, start to exit, and its peak RSS in MB (the process's `ru_maxrss`,
    as `/usr/bin/time -v` reports it)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, env=_env(db), stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-3000:]
            raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {tail}")
    return wall, usage.ru_maxrss / 1024


def measure(n: int, *, root: str, chunk: int, incremental: bool) -> dict[str, float]:
    db = str(Path(root) / f"db-{n}")
    done = Path(db + ".filled")
    spent = json.loads(done.read_text()) if done.exists() else fill(db, n, seed=n % 9973, chunk=chunk)
    done.write_text(json.dumps(spent))  # a store kept in --dir is filled once
    return induced(db, n, spent, chunk=chunk, incremental=incremental)


def induced(db: str, n: int, spent: dict[str, float], *, chunk: int, incremental: bool) -> dict[str, float]:
    """`spent` (the fill's times) and the full induction of `db` in a fresh process, by stage."""
    wall, out = _wall([*script("scaling"), "--child", db], db)
    spent.update(json.loads(out.strip().splitlines()[-1]))
    spent["full_process_s"] = wall
    if incremental:
        added = fill(db, max(1, n // 100), seed=n % 9973 + 1, chunk=chunk)
        spent["incremental_ingest_s"] = added["ingest"]
        cli = str(Path(sys.executable).with_name("flowmem"))
        spent["incremental_process_s"], spent["incremental_peak_rss_mb"] = _wall_peak([cli, "induce"], db)
        spent["incremental_ratio"] = spent["incremental_process_s"] / wall
        # Nothing new now: the run is skipped, so its peak is the imports' and the opened store's.
        spent["skipped_process_s"], spent["skipped_peak_rss_mb"] = _wall_peak([cli, "induce"], db)
        grown = spent["incremental_peak_rss_mb"] - spent["skipped_peak_rss_mb"]
        spent["incremental_peak_rss_growth_mb"] = grown
    return spent


def _runs(source: str) -> list[Any]:
    from flowmem.demo import simulate
    from flowmem.interchange.jsonl import read_trajectories
    from flowmem.models import Trajectory
    from flowmem.settings import Settings

    if source.startswith("sim:"):
        return simulate(int(source[4:]), seed=1)
    return [t for t in read_trajectories(Path(source), Settings()) if isinstance(t, Trajectory)]


def agreement(source: str, samples: list[int]) -> dict[str, dict[str, float]]:
    """What fitting on `samples` task texts changes on one set's runs (see the module doc)."""
    from sklearn.metrics import adjusted_rand_score

    from flowmem.induction.plan.bounded import fit_texts
    from flowmem.induction.render.metrics import clustering_scores
    from flowmem.settings import Settings

    runs, params = _runs(source), Settings().cluster_params
    agents = sorted({t.agent for t in runs})
    texts = {a: sorted({t.task for t in runs if t.agent == a}) for a in agents}
    out: dict[str, dict[str, float]] = {}
    for size in [max(map(len, texts.values())), *samples]:
        start, labels = time.perf_counter(), {}
        for a in agents:
            labels[a] = fit_texts(texts[a], params, sample=size)[1]
        row = {"fit_s": round(time.perf_counter() - start, 2), "texts": float(sum(map(len, texts.values())))}
        label = [f"{t.agent}/{labels[t.agent][t.task]}" for t in runs]
        if not out:
            full = label
        row["ari_with_full_fit"] = round(float(adjusted_rand_score(full, label)), 4)
        grouped = [(t.group, lab) for t, lab in zip(runs, label, strict=True) if t.group is not None]
        if grouped:
            row.update(clustering_scores([g for g, _ in grouped], [lab for _, lab in grouped]))
        out["all" if not out else str(size)] = row
    return out


def read_plan(db: str) -> list[list[str]]:
    """The groups of ids the full run of the store at `db` reads (see the module doc)."""
    from flowmem.jobs import induce as induce_job
    from flowmem.jobs.factories import store_from
    from flowmem.settings import Settings
    from flowmem.storage import scans

    settings = Settings(db=db)
    store = store_from(settings)

    def without_contrast(store: Any, plan: induce_job.RunPlan, *, cap: int) -> induce_job.RunPlan:
        return plan

    # Planned without the contrast: the groups are the clusters' own runs, the same at every
    # size, so that the slope is the reads' alone.
    induce_job.with_contrast = without_contrast
    plan = induce_job.prepare_run(store, settings, namespace=settings.namespace, force=True)
    groups = induce_job._read_groups(plan.changed, scans.READ_CHUNK)
    return [list(dict.fromkeys(i for c in g if hasattr(c, "runs") for i in c.runs())) for g in groups]


def reads_child(db: str, how: str) -> dict[str, float]:
    """The groups of DB.groups.json read from the store at `db` `how` ("by_id" or "pass"),
    in this (fresh) process: seconds, rows read."""
    from flowmem.jobs.factories import store_from
    from flowmem.settings import Settings
    from flowmem.storage import scans

    settings = Settings(db=db)
    store = store_from(settings)
    groups = json.loads(Path(db + ".groups.json").read_text())
    ns = settings.namespace
    out = {"groups": float(len(groups)), "ids": float(sum(map(len, groups)))}
    start = time.perf_counter()
    scans.index_ids(store)
    out["index_s"] = time.perf_counter() - start
    read = 0
    start = time.perf_counter()
    if how == "by_id":
        for ids in groups:
            read += len(scans.trajectories_by_id(store, ids, namespace=ns))
    else:
        with scans.spill_groups(store, groups, namespace=ns) as spill:
            out["pass_s"] = time.perf_counter() - start
            out["spill_mb"] = spill.path.stat().st_size / 2**20 if spill.path.exists() else 0.0
            for g in range(len(groups)):
                read += len(scans.spilled(spill, g))
    out["read_s"] = time.perf_counter() - start
    out["rows"] = float(read)
    out["trajectories"] = float(store.count_trajectories(namespace=ns))
    out["peak_rss_mb"] = status_mb("VmHWM")
    return out


def reads_table(dbs: list[str], *, as_json: bool, ways: tuple[str, ...] = ("by_id", "pass")) -> None:
    """`--reads`: the plan of each store (cached), its reads by id and in one pass, the slopes."""
    found: dict[str, dict[str, dict[str, float]]] = {}
    for db in dbs:
        cached = Path(db + ".groups.json")
        if not cached.exists():
            _, out = _wall([*script("scaling"), "--reads-child", f"plan:{db}"], db)
            cached.write_text(out.strip().splitlines()[-1])
        found[db] = {}
        for how in ways:
            _, out = _wall([*script("scaling"), "--reads-child", f"{how}:{db}"], db)
            found[db][how] = json.loads(out.strip().splitlines()[-1])
            if not as_json:
                r = found[db][how]
                print(
                    f"{db}: {r['trajectories']:.0f} trajectories, {how:>5}: {r['read_s']:7.2f} s "
                    f"({r['rows']:.0f} rows in {r['groups']:.0f} groups; id index {r['index_s']:.2f} s"
                    + f"; peak RSS {r['peak_rss_mb']:.0f} MB"
                    + (f"; the pass {r['pass_s']:.2f} s, {r['spill_mb']:.0f} MB" if "pass_s" in r else "")
                    + ")",
                    flush=True,
                )
    slopes = {
        f"{a}->{b}": {
            how: math.log(found[b][how]["read_s"] / found[a][how]["read_s"])
            / math.log(found[b][how]["trajectories"] / found[a][how]["trajectories"])
            for how in ways
        }
        for a, b in zip(dbs, dbs[1:], strict=False)
    }
    if as_json:
        print(json.dumps({"reads": found, "slopes": slopes}, indent=1))
        return
    for pair, by_how in slopes.items():
        print(f"slope {pair}: " + "  ".join(f"{how} {b:.2f}" for how, b in by_how.items()))


FLOW_RUNNERS: dict[str, str | None] = {"in-process": None, "dask-1": "local:1", "dask-2": "local:2"}
"""Where `--dask` runs the induce flow's tasks: its own thread pool, then `FLOWMEM_DASK_ADDRESS`."""


def flow_child(db: str) -> dict[str, Any]:
    """The induce flow on the store at `db` in this (fresh) process, on the Prefect server of
    PREFECT_API_URL, its tasks where FLOWMEM_DASK_ADDRESS says: the flow's wall seconds, the
    task runner's start and stop (a local Dask cluster's), the flow's own plan / induce /
    commit seconds (those of its artifact) and its summary but for the run's id and tag."""
    from flowmem.flows import pipeline
    from flowmem.flows.runners import task_runner as runner

    found: dict[str, Any] = {}
    artifact = pipeline._artifact

    @contextlib.contextmanager
    def timed_runner(settings: Any) -> Iterator[Any]:
        start = time.perf_counter()
        with runner(settings) as entered:
            found["runner_start_s"] = time.perf_counter() - start
            yield entered
            stop = time.perf_counter()
        found["runner_stop_s"] = time.perf_counter() - stop

    def kept(report: Any, timings: dict[str, float]) -> None:
        found.update({f"flow_{stage}_s": spent for stage, spent in timings.items()})
        artifact(report, timings)

    for name, fn in {"task_runner": timed_runner, "_artifact": kept}.items():
        setattr(pipeline, name, fn)
    start = time.perf_counter()
    summary = pipeline.induce_flow(db=db)
    found["flow_s"] = time.perf_counter() - start
    found["summary"] = summary.model_dump(mode="json", exclude={"run", "tag"})
    return found


def committed(db: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every version of every workflow, and every run, as stored in `db`: whole, but for the
    times of day, and with each run id (new on every run) as the run's place in the sequence
    (as tests/test_dask_cluster.py compares an in-process induction with a cluster's)."""
    from flowmem.jobs.factories import store_from
    from flowmem.settings import Settings

    settings = Settings(db=db)
    store = store_from(settings)
    runs = sorted(store.list_runs(namespace=settings.namespace), key=lambda r: r.id)  # time-ordered
    order = {run.id: f"run {i}" for i, run in enumerate(runs)}
    workflows = []
    for latest in store.list_workflows(namespace=settings.namespace):
        for w in store.history(latest.id, namespace=settings.namespace):
            run_id = w.provenance.run_id
            provenance = w.provenance.model_copy(update={"run_id": order[run_id] if run_id else None})
            workflows.append(
                w.model_copy(update={"provenance": provenance}).model_dump(
                    mode="json", exclude={"created_at"}
                )
            )
    stored_runs = [
        {
            **run.model_dump(mode="json", exclude={"id", "tag", "started_at", "finished_at"}),
            "tag": order.get(run.tag or ""),
        }
        for run in runs
    ]
    return sorted(workflows, key=lambda w: (w["id"], w["version"])), stored_runs


def flow_env(db: str, api: str, home: str, address: str | None) -> dict[str, str]:
    """A flow child's environment: the store, the Prefect server and home, the Dask address."""
    env = {**_env(db), "PREFECT_API_URL": api, "PREFECT_HOME": home, "PREFECT_LOGGING_LEVEL": "WARNING"}
    env.update(DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.pop("FLOWMEM_DASK_ADDRESS", None)
    if address is not None:
        env["FLOWMEM_DASK_ADDRESS"] = address
    return env


def same_stores(dbs: list[str]) -> dict[str, Any]:
    """Whether the stores at `dbs` hold the same workflows (every version) and runs (`committed`)."""
    found = [committed(db) for db in dbs]
    workflows, runs = found[0]
    return {
        "identical": all(f == found[0] for f in found[1:]),
        "workflows": len({w["id"] for w in workflows}),
        "versions": len(workflows),
        "runs": len(runs),
    }


def flow_runs(base: str, root: str, runners: dict[str, str | None]) -> dict[str, Any]:
    """The induce flow on a copy of the store at `base` for each of `runners` (a fresh process
    each, on one Prefect server started first), and whether the copies end up the same."""
    from bench.pipeline import timed_prefect_server

    out: dict[str, Any] = {}
    home = str(Path(root) / "prefect")
    with timed_prefect_server(home) as (api, started):
        out["prefect_server_start_s"] = started
        for label, address in runners.items():
            db = str(Path(root) / f"flow-{label}")
            shutil.copytree(base, db)
            command = [*script("scaling"), "--flow-child", db]
            wall, stdout = _wall(command, db, flow_env(db, api, home, address))
            out[label] = {**json.loads(stdout.strip().splitlines()[-1]), "process_s": wall}
    summaries = [out[label]["summary"] for label in runners]
    out["same_summary"] = all(s == summaries[0] for s in summaries[1:])
    out["stores"] = same_stores([str(Path(root) / f"flow-{label}") for label in runners])
    return out


def dask_comparison(
    n: int, *, root: str, chunk: int, runners: dict[str, str | None] = FLOW_RUNNERS
) -> dict[str, Any]:
    """`n` trajectories in one store, then `flow_runs` on copies of it (see the module doc)."""
    base = str(Path(root) / f"dask-base-{n}")
    return {"fill": fill(base, n, seed=n % 9973, chunk=chunk), **flow_runs(base, root, runners)}


@contextlib.contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3 server in this process (`s3_commits.start_server`, its bucket made), its
    endpoint and credentials in FLOWMEM_S3_* for this process and those it starts, until exit:
    the bucket's `s3://` URI."""
    from bench.s3_commits import BUCKET, KEY, start_server

    server, endpoint = start_server()
    given = {
        "FLOWMEM_S3_ENDPOINT": endpoint,
        "FLOWMEM_S3_REGION": "us-east-1",
        "FLOWMEM_S3_ACCESS_KEY_ID": KEY,
        "FLOWMEM_S3_SECRET_ACCESS_KEY": KEY,
        "FLOWMEM_S3_ALLOW_HTTP": "true",
    }
    saved = {k: os.environ.get(k) for k in given}
    os.environ.update(given)
    try:
        yield f"s3://{BUCKET}"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


def s3_comparison(n: int, *, root: str, chunk: int) -> dict[str, dict[str, float]]:
    """The same `n` trajectories filled and fully induced in a local directory and on S3."""
    out = {"local": measure(n, root=root, chunk=chunk, incremental=False)}
    with s3_server() as bucket:
        db = f"{bucket}/scaling-{n}"
        spent = fill(db, n, seed=n % 9973, chunk=chunk)
        out["s3"] = induced(db, n, spent, chunk=chunk, incremental=False)
    return out


def _flow_row(label: str, r: dict[str, Any]) -> str:
    s = r["summary"]
    return (
        f"{label:>10}: flow {r['flow_s']:6.1f} s (task runner start {r.get('runner_start_s', 0):5.1f}, "
        f"plan {r.get('flow_plan_s', 0):5.1f}, induce {r.get('flow_induce_s', 0):5.1f}, "
        f"commit {r.get('flow_commit_s', 0):5.1f}, runner stop {r.get('runner_stop_s', 0):4.1f}); "
        f"process {r['process_s']:6.1f} s; {s['clusters']} clusters, {s['versions_created']} versions"
    )


def _row(n: int, r: dict[str, float]) -> str:
    stages = "  ".join(f"{s} {r.get(s, 0.0):7.2f}" for s in STAGES)
    line = (
        f"{n:>8} trajectories: {stages}  (induction in all {r['total_induce']:.2f} s, process "
        f"{r['full_process_s']:.1f} s; {r['clusters']:.0f} clusters, {r['workflows']:.0f} versions; "
        f"peak RSS +{r['peak_rss_growth_mb']:.0f} MB)"
    )
    if "incremental_ratio" in r:
        line += (
            f"; incremental 1%: {r['incremental_process_s']:.1f} s = {r['incremental_ratio']:.1%}, "
            f"peak RSS {r['incremental_peak_rss_mb']:.0f} MB (+{r['incremental_peak_rss_growth_mb']:.0f} MB "
            f"over a skipped run's {r['skipped_peak_rss_mb']:.0f} MB)"
        )
    return line


def sizes_table(sizes: list[int], *, root: str | None, chunk: int, incremental: bool, as_json: bool) -> None:
    """The default measurement: every size, then the slopes between consecutive sizes."""
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            results[n] = measure(n, root=root or tmp, chunk=chunk, incremental=incremental)
            if not as_json:
                print(_row(n, results[n]), flush=True)
    slopes = {
        f"{a}->{b}": {
            s: math.log(results[b][s] / results[a][s]) / math.log(b / a)
            for s in [*STAGES, "total_induce", "full_process_s"]
            if results[a].get(s, 0) > 0 and results[b].get(s, 0) > 0
        }
        for a, b in zip(sizes, sizes[1:], strict=False)
    }
    if as_json:
        print(json.dumps({"stages_s": results, "slopes": slopes}, indent=1))
        return
    print("slope b in time ~ n^b between consecutive sizes:")
    for pair, by_stage in slopes.items():
        print(f"  {pair:>15}: " + "  ".join(f"{s} {b:.2f}" for s, b in by_stage.items()))


def compare(kind: str, n: int, *, root: str | None, chunk: int, as_json: bool) -> None:
    """`--dask` or `--s3` at size `n`, printed."""
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "dask":
            found: dict[str, Any] = dask_comparison(n, root=root or tmp, chunk=chunk)
        else:
            found = s3_comparison(n, root=root or tmp, chunk=chunk)
    if as_json:
        print(json.dumps(found, indent=1))
    elif kind == "dask":
        print(f"{n} trajectories, fill: " + ", ".join(f"{k} {v:.1f} s" for k, v in found["fill"].items()))
        for label in FLOW_RUNNERS:
            print(_flow_row(label, found[label]))
        print(f"same summary: {found['same_summary']}; same stores: {found['stores']}")
    else:
        for where, r in found.items():
            print(f"{where:>5}: {_row(n, r)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument("--chunk", type=int, default=5000, help="tasks per simulated world")
    parser.add_argument("--incremental", action="store_true")
    parser.add_argument("--dir", default=None, help="where the stores go and stay (default: a temporary one)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--agreement", default=None, help="trajectory files (or sim:N), comma-separated")
    parser.add_argument("--samples", default="500,1000,2000")
    parser.add_argument(
        "--dask", action="store_true", help="the induce flow in process, on 1 and on 2 Dask workers"
    )
    parser.add_argument("--s3", action="store_true", help="the store in a directory and on moto's S3 server")
    parser.add_argument("--reads", default=None, help="stores kept (DB,DB,...): their full runs' reads")
    parser.add_argument("--ways", default="by_id,pass", help="with --reads: by_id, pass or both")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--reads-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--flow-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.reads_child:
        how, db = args.reads_child.split(":", 1)
        print(json.dumps(read_plan(db) if how == "plan" else reads_child(db, how)))
        return 0
    if args.reads:
        reads_table(args.reads.split(","), as_json=args.json, ways=tuple(args.ways.split(",")))
        return 0
    if args.child or args.flow_child:
        print(json.dumps(child(args.child) if args.child else flow_child(args.flow_child)))
        return 0
    if args.agreement:
        samples = [int(s) for s in args.samples.split(",")]
        found = {src: agreement(src, samples) for src in args.agreement.split(",")}
        print(json.dumps(found, indent=1))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.dask or args.s3:
        kind = "dask" if args.dask else "s3"
        compare(kind, sizes[0], root=args.dir, chunk=args.chunk, as_json=args.json)
    else:
        sizes_table(sizes, root=args.dir, chunk=args.chunk, incremental=args.incremental, as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
