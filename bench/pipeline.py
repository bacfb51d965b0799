"""The hot path and the pipeline, timed: the recording hook, ingest + induce through the CLI and
through the Prefect flow (on a running Prefect server), an incremental run, HTTP search with 8
and 32 clients, memharness."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.api_load import measure
from bench.data import fill, queries
from bench.hook_warnings import load_recording
from bench.hook_warnings import measure as hook_measure
from bench.paths import REPO, script
from flowmem.agents import recording
from flowmem.flows.local import prefect_server
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings

__all__ = ["api_search", "hook_step", "induction", "memharness", "timed_prefect_server"]

_CLI = [sys.executable, "-c", "from flowmem.cli import main; main()"]


def _flowmem(*args: str, db: str, home: str, check: bool = True, api: str | None = None) -> float:
    """Seconds one `flowmem` command takes in a fresh process on store `db` (an induction
    whose every cluster was refused exits 1 and is timed all the same: `check=False`), its
    flows on the Prefect server at `api` if given."""
    return _flowmem_cpu(*args, db=db, home=home, check=check, api=api)[0]


def _flowmem_cpu(
    *args: str, db: str, home: str, check: bool = True, api: str | None = None
) -> tuple[float, float]:
    """`_flowmem`'s seconds, and the CPU seconds (user + system) its process used: on a shared
    machine the CPU time moves less with the load than the wall time."""
    env = _cli_env(db=db, home=home, api=api)
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([*_CLI, *args], env=env, check=check, capture_output=True)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _cli_env(*, db: str, home: str, api: str | None = None) -> dict[str, str]:
    """The environment of a `flowmem` command on store `db`, its flows on the Prefect server at
    `api` if given."""
    env = {**os.environ, "FLOWMEM_DB": db, "PREFECT_HOME": home, "LANCEDB_LOG": "error"}
    env.pop("PREFECT_API_URL", None)
    if api:
        env["PREFECT_API_URL"] = api
    env.update(DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    return env


_GENERATE = """
import sys
from flowmem.cli import app

for out, tasks, seed in zip(*[iter(sys.argv[1:])] * 3, strict=True):
    app(["generate", out, "--tasks", tasks, "--seed", seed], standalone_mode=False)
"""


def _generate(*files: tuple[str, int, int], db: str, home: str) -> None:
    """`flowmem generate FILE --tasks N --seed S` for each (FILE, N, S), one after another in one
    fresh process (untimed: the data the timed commands read, not a figure)."""
    argv = [str(part) for file in files for part in file]
    env = _cli_env(db=db, home=home)
    subprocess.run([sys.executable, "-c", _GENERATE, *argv], env=env, check=True, capture_output=True)


HOOK_BEFORE = "e31b2b3"
"""The revision the hook is compared with in the same run: the last whose `Run.step` took the
run's lock on every call, the hook issue 41 found (883ba40's `Run.step`, its imports moved)."""

HOOK_ROUNDS = 5
"""Rounds of `n` steps per hook; the figures are the medians over rounds (one round's p99 moves
by a third between runs on a shared machine)."""


def hook_step(
    n: int = 100_000, *, rounds: int = HOOK_ROUNDS, before: str | None = HOOK_BEFORE
) -> dict[str, Any]:
    """`run.step` in µs (p50, p99) over n steps of one run, as an agent loop calls it: the
    medians over `rounds` rounds, each also timing `before`'s `Run` (its
    flowmem/agents/recording.py from git, when the checkout has the history) on the same steps,
    in turn; with their ratios (this checkout / before)."""
    hooks: dict[str, Any] = {"": recording}
    if before is not None and (module := _recording_at(before)) is not None:
        hooks["_before"] = module
    found: dict[str, list[tuple[float, float]]] = {suffix: [] for suffix in hooks}
    for _ in range(rounds):
        for suffix, module in hooks.items():
            found[suffix].append(hook_measure(module, n))
    out: dict[str, Any] = {"hook_rounds": rounds}
    for suffix, times in found.items():
        out[f"hook_step_us_median{suffix}"] = statistics.median(p50 for p50, _ in times)
        out[f"hook_step_us_p99{suffix}"] = statistics.median(p99 for _, p99 in times)
    if "_before" in found:
        out["hook_before"] = before
        out["hook_p50_ratio"] = out["hook_step_us_median"] / out["hook_step_us_median_before"]
        out["hook_p99_ratio"] = out["hook_step_us_p99"] / out["hook_step_us_p99_before"]
    return out


def _recording_at(revision: str) -> Any:
    """`revision`'s flowmem/agents/recording.py loaded as a module, or None without git history."""
    shown = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{revision}:flowmem/agents/recording.py"],
        capture_output=True,
        check=False,
    )
    if shown.returncode != 0:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "recording_before.py"
        path.write_bytes(shown.stdout)
        return load_recording(path)


def induction(n: int, *, flow: bool = True) -> dict[str, float]:
    """Ingest + induce n generated trajectories with the CLI, then 1% new trajectories and an
    incremental `flowmem induce`, against the full run (and one with nothing new: the
    process's fixed cost), in seconds and in CPU seconds (`*_cpu_s`); the same ingest +
    induction as the Prefect flow (`flowmem run induce`) on a second store, against a Prefect
    server started first (timed on its own)."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data, extra = f"{tmp}/runs.jsonl.gz", f"{tmp}/more.jsonl.gz"
        _generate((data, n, 0), (extra, max(1, n // 100), 1), db=f"{tmp}/gen", home=tmp)
        db = f"{tmp}/cli"
        out["ingest_s"] = _flowmem("ingest", data, db=db, home=tmp)
        out["induce_s"], out["induce_cpu_s"] = _flowmem_cpu("induce", db=db, home=tmp, check=False)
        _flowmem("ingest", extra, db=db, home=tmp)
        incremental = _flowmem_cpu("induce", db=db, home=tmp, check=False)
        out["induce_incremental_s"], out["induce_incremental_cpu_s"] = incremental
        out["incremental_ratio"] = out["induce_incremental_s"] / out["induce_s"]
        out["incremental_cpu_ratio"] = out["induce_incremental_cpu_s"] / out["induce_cpu_s"]
        # Nothing new: what any `flowmem induce` process costs before it does any work.
        nothing = _flowmem_cpu("induce", db=db, home=tmp, check=False)
        out["induce_nothing_new_s"], out["induce_nothing_new_cpu_s"] = nothing
        out.update(_in_one_process(data, extra, f"{tmp}/inproc", home=tmp))
        if flow:
            db, home = f"{tmp}/flow", f"{tmp}/prefect"
            with timed_prefect_server(home) as (api, started):
                out["prefect_server_start_s"] = started
                out["flow_ingest_s"] = _flowmem("ingest", data, db=db, home=home)
                out["flow_induce_s"] = _flowmem("run", "induce", db=db, home=home, check=False, api=api)
    return out


def _in_one_process(data: str, extra: str, db: str, *, home: str) -> dict[str, float]:
    """The full induction and the incremental one in one long-lived process (imports and the
    store's opening paid once, as in the API's induce route; `flowmem serve` starts a
    subprocess per flow run), `bench.inprocess` in a process of its own: seconds, CPU
    seconds and their ratios."""
    env = {**os.environ, "PREFECT_HOME": home, "LANCEDB_LOG": "error"}
    command = [*script("inprocess"), db, data, extra]
    done = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    (full_s, full_cpu), (inc_s, inc_cpu) = found["full"], found["incremental"]
    return {
        "inprocess_induce_s": full_s,
        "inprocess_incremental_s": inc_s,
        "incremental_inprocess_ratio": inc_s / full_s,
        "incremental_inprocess_cpu_ratio": inc_cpu / full_cpu,
    }


@contextlib.contextmanager
def timed_prefect_server(home: str, *, timeout: float = 120.0) -> Iterator[tuple[str, float]]:
    """A Prefect server of its own (`prefect server start`, SQLite under `home`; in a process
    group of its own, stopped whole on exit): its API URL and the seconds it took to answer."""
    env = {
        **os.environ,
        "PREFECT_HOME": home,
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    with prefect_server(env=env, timeout=timeout, new_session=True) as server:
        assert server.ready_s is not None
        yield server.api_url, server.ready_s


API_WORKERS = 2
"""Server processes of the bench's `flowmem api` (`--workers`): one per core of a 2-core machine."""


def api_search(
    n: int, *, clients: tuple[int, ...] = (8, 32), seconds: float = 5.0, workers: int = API_WORKERS
) -> dict[str, Any]:
    """`GET /v1/workflows/search` on a `flowmem api` process serving n workflows
    (`bench.api_load`: keep-alive clients on one asyncio loop): the p50 latency of one client,
    and for each client count requests per second, p50 / p99 latency and errors."""
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/db"
        fill(store_from(Settings(db=db)), n)
        found = measure(db, n, src=REPO, clients=list(clients), seconds=seconds, workers=workers, home=tmp)
    out: dict[str, Any] = {"api_search": found, "api_workers": workers}
    out["api_search_ms_p50_1"] = found["p50_ms_1"]
    runs = found["runs"]
    assert isinstance(runs, list)
    for r in runs[1:]:
        c = r["clients"]
        out[f"api_search_rps_{c}"] = r["rps"]
        out[f"api_search_ms_p50_{c}"] = r["p50_ms"]
        out[f"api_search_ms_p99_{c}"] = r["p99_ms"]
        out[f"api_search_errors_{c}"] = r["errors"]
    return out


def memharness(python: str | None, n: int, *, repeats: int = 50) -> dict[str, Any]:
    """memharness 1.0.4's add and search, run by `python` (≥ 3.13, memharness installed) on
    the benchmark's task texts; {} with a note when no such Python is given."""
    if not python:
        return {
            "memharness_skipped": "set FLOWMEM_BENCH_PY313=/path/to/python3.13 (with memharness installed)"
        }
    probe = Path(__file__).with_name("memharness_probe.py")
    texts = "\n".join(queries(n, seed=3) + queries(repeats, seed=4))
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [python, str(probe), str(n), str(repeats)], input=texts, text=True, capture_output=True, cwd=tmp
        )
    if done.returncode != 0:
        return {"memharness_skipped": f"{python} failed: {done.stderr.strip().splitlines()[-1:]}"}
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found
