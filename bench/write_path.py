"""Does the write path stay flat? N single-record POSTs to a real `flowmem api` process.

8 client threads (keep-alive connections, loopback) post one trajectory per request to
`flowmem api` on a fresh store that already holds one tagged induction run. Printed: per
window of `--window` requests (by completion order) the throughput and p50 / p95 latency, the
API process's RSS and the CPU time it spent per request (what other work on a shared machine
changes least), and the load average before and after; then the trajectories stored (and
duplicates), `flowmem maintain --keep 0` (versions and files before -> after, per table), and
a checkout of every run tag and a rollback of the run.

`--preload N` first stores N trajectories (batches of 1,000, then a compaction, as
`flowmem maintain` leaves a store), so the writes go to a table that is already large: what a
write costs at 100,000 rows against the same writes on a small table.

`flowmem api` limits glibc's malloc arenas to 4 itself (flowmem/cli/malloc_arenas.py);
`--glibc-arenas` starts it with MALLOC_ARENA_MAX at glibc's own default (8 per core), which
turns that limit off: the RSS it had before.

Usage: python bench/write_path.py [--writes 20000] [--clients 8] [--window 2000] [--preload 0]
    [--glibc-arenas]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from flowmem.flows.local import free_port
from flowmem.jobs.factories import store_from
from flowmem.models import InductionRun, Workflow, WorkflowStep
from flowmem.settings import Settings

TOKEN = "bench-token"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def record(i: int, prefix: str = "w") -> dict[str, object]:
    return {
        "id": f"{prefix}-{i:06d}",
        "task": f"Forward the latest email about budget {i % 97} to olga",
        "agent": "bench",
        "success": i % 3 != 0,
        "steps": [
            {"action": "email.search_emails", "args": {"query": f"budget {i % 97}"}, "observation": "[e1]"},
            {"action": "email.forward_email", "args": {"email_id": "e1", "recipient": "olga@corp.test"}},
        ],
    }


def seed_run(settings: Settings) -> str:
    """A tagged induction run, so the bench can check that maintain keeps it restorable."""
    workflow = Workflow(
        id="forward_latest",
        name="forward_latest",
        description="Forward the newest email on a subject to a colleague.",
        steps=[WorkflowStep(action="email.search_emails", args={"query": "{subject}"})],
        parameters={"subject": "the subject"},
    )
    return store_from(settings).commit_run(InductionRun(id="run-bench"), [workflow]).id


def preload(settings: Settings, n: int) -> None:
    """Store n trajectories in batches of 1,000 and compact, as `flowmem maintain` would."""
    from datetime import timedelta

    from flowmem.models import Trajectory

    store = store_from(settings)
    start = time.perf_counter()
    for lo in range(0, n, 1_000):
        batch = range(lo, min(n, lo + 1_000))
        store.insert_trajectories(Trajectory.model_validate(record(i, "pre")) for i in batch)
    store.maintain_table("trajectories", keep=timedelta(0))
    print(f"preloaded {n} trajectories in {time.perf_counter() - start:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--window", type=int, default=2_000)
    parser.add_argument("--preload", type=int, default=0, help="trajectories stored before the writes")
    parser.add_argument(
        "--glibc-arenas", action="store_true", help="glibc's default malloc arenas (8 per core), not 4"
    )
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="flowmem-write-path-"))
    settings = Settings(db=str(root / "db"))
    run_id = seed_run(settings)
    if args.preload:
        preload(settings, args.preload)
    port = free_port()
    env = {**os.environ, "FLOWMEM_DB": settings.db, "FLOWMEM_API_TOKEN": TOKEN, "LANCEDB_LOG": "error"}
    if args.glibc_arenas:  # glibc's default; being set, it also keeps flowmem from limiting them
        env["MALLOC_ARENA_MAX"] = str(8 * (os.cpu_count() or 1))
    print(f"API malloc arenas: {env.get('MALLOC_ARENA_MAX', '4 (flowmem api limits them)')} max", flush=True)
    log = (root / "api.log").open("wb")
    command = [sys.executable, "-m", "flowmem.cli", "api", "--port", str(port)]
    proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the API did not start: see {root / 'api.log'}")
            time.sleep(0.2)
        before = load()
        cpu0, done = drive(base, proc.pid, args.writes, args.clients, args.window)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    print(f"load average (1, 5, 15 min) before: {before}, after: {load()} on {os.cpu_count()} cores")
    report(cpu0, done, args.window)
    after_the_run(settings, run_id, args.writes + args.preload)
    return 0


Done = tuple[float, float, float, float]
"""(completed at, latency, the API's RSS in MB, its CPU seconds so far); the last two at the end
of each window only, else 0."""


def drive(base: str, pid: int, writes: int, clients: int, window: int) -> tuple[float, list[Done]]:
    """The API's CPU seconds at the start, and one `Done` per request in completion order."""
    lock = threading.Lock()
    done: list[Done] = []
    counter = iter(range(writes))
    errors: list[str] = []

    def client() -> None:
        with httpx.Client(base_url=base, timeout=120, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                start = time.perf_counter()
                r = http.post("/v1/trajectories", json=[record(i)])
                end = time.perf_counter()
                if r.status_code != 200 or r.json()["stored"] != 1:
                    errors.append(f"{r.status_code} {r.text[:200]}")
                with lock:
                    last = (len(done) + 1) % window == 0
                    sample = (rss_mb(pid), cpu_seconds(pid)) if last else (0.0, 0.0)
                    done.append((end, end - start, *sample))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    cpu0 = cpu_seconds(pid)
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"{len(errors)} failed writes, e.g. {errors[0]}")
    return cpu0, [(end - t0, latency, rss, cpu) for end, latency, rss, cpu in done]


def report(cpu0: float, done: list[Done], window: int) -> None:
    print(f"{'requests':>15} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7} {'RSS MB':>7} {'CPU ms/req':>10}")
    previous_end, previous_cpu = 0.0, cpu0
    rows = []
    for w in range(0, len(done), window):
        chunk = done[w : w + window]
        end, cpu = chunk[-1][0], chunk[-1][3]
        latencies = sorted(c[1] for c in chunk)
        rate = len(chunk) / (end - previous_end)
        p50, p95 = statistics.median(latencies) * 1000, latencies[int(0.95 * (len(latencies) - 1))] * 1000
        cpu_ms = (cpu - previous_cpu) / len(chunk) * 1000 if cpu else float("nan")
        rows.append((rate, p50, cpu_ms))
        span = f"{w + 1:>7}-{w + len(chunk):<7}"
        print(f"{span} {rate:>7.0f} {p50:>7.1f} {p95:>7.1f} {chunk[-1][2]:>7.0f} {cpu_ms:>10.2f}")
        previous_end, previous_cpu = end, cpu
    (r0, p0, c0), (r1, p1, c1) = rows[0], rows[-1]
    print(
        f"last/first window: throughput {r1 / r0:.2f}x (>= 0.8 wanted), p50 {p1 / p0:.2f}x (<= 1.25 wanted), "
        f"API CPU per request {c1 / c0:.2f}x"
    )


def after_the_run(settings: Settings, run_id: str, writes: int) -> None:
    from datetime import timedelta

    from flowmem.jobs.maintain import maintain

    store = store_from(settings)
    stored = store.count_trajectories()
    distinct = len({t.id for t in store.list_trajectories(limit=None)})
    print(f"stored {stored} of {writes} ({stored - distinct} duplicates)")
    start = time.perf_counter()
    result = maintain(store, keep=timedelta(0))
    print(f"maintain --keep 0 in {time.perf_counter() - start:.1f} s:")
    for t in result.tables:
        b, a = t.before, t.after
        print(
            f"  {b.table}: versions {b.versions} -> {a.versions}, fragments {b.fragments} -> "
            f"{a.fragments}, data files {b.files} -> {a.files}"
        )
    print(f"run tags checked out: {result.tags}")
    before = len(store.list_workflows())
    store.rollback(run_id)
    print(f"rollback of {run_id}: workflows {before} -> {len(store.list_workflows())}")


if __name__ == "__main__":
    raise SystemExit(main())
