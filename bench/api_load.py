"""`flowmem api` under load: `GET /v1/workflows/search` from 1, 8 and 32 keep-alive clients,
requests per second, p50 / p99 latency and errors, with the server's own settings or from
another checkout's source (today's against a past commit's, in one run).

The clients are one asyncio loop in this process writing raw HTTP/1.1 on keep-alive sockets
(~30 µs of CPU a request): on a 2-core machine the load generator shares the cores with the
server, and a thread per client through httpx (~0.4 ms of CPU a request, under one GIL) would
measure the client as much as the server.

Usage: python -m bench api_load [--n N] [--clients 8,32] [--seconds S] [--src DIR[,DIR]]
                                [--workers W] [--json]
  --src: run the server from these checkouts' `flowmem` (PYTHONPATH), one after the other on
  the same store, e.g. a `git archive` of a past commit against this one (`.`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

if not __package__:  # run as `python bench/api_load.py`: import bench.* from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import fill, queries
from bench.paths import REPO
from flowmem.flows.local import free_port
from flowmem.jobs.factories import store_from
from flowmem.retrieval.ranking import ANN_MIN
from flowmem.settings import Settings

__all__ = ["Load", "load", "main", "serving"]

WARM_UP_S = 5.0
"""Seconds of searches before any is timed, on an index large enough for an ANN (its build
runs in the background after the first search); 0.5 s below that."""


@dataclass
class Load:
    """What `clients` keep-alive clients got in `seconds`."""

    clients: int
    requests: int = 0
    errors: int = 0
    """Responses other than 200, and failed connections."""
    seconds: float = 0.0
    rps: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    statuses: dict[int, int] = field(default_factory=dict)
    server_cpu_us: float = 0.0
    """CPU time the server's processes used per request (user + system): what a request
    costs whatever else the machine runs."""


def _request(host: str, port: int, task: str) -> bytes:
    query = urllib.parse.urlencode({"task": task})
    return f"GET /v1/workflows/search?{query} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()


async def _response(reader: asyncio.StreamReader) -> int:
    """Read one response; its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _load(host: str, port: int, tasks: list[str], clients: int, seconds: float) -> Load:
    requests = [_request(host, port, t) for t in tasks]
    times: list[float] = []
    out = Load(clients)
    clock = time.perf_counter

    async def client(c: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        i = c
        try:
            while clock() < stop:
                start = clock()
                writer.write(requests[i % len(requests)])
                try:
                    status = await _response(reader)
                except (OSError, asyncio.IncompleteReadError):
                    out.errors += 1
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                    continue
                times.append(clock() - start)
                out.statuses[status] = out.statuses.get(status, 0) + 1
                out.errors += status != 200
                i += clients
        finally:
            writer.close()

    stop = clock() + seconds
    began = clock()
    await asyncio.gather(*(client(c) for c in range(clients)))
    out.seconds = clock() - began
    out.requests = len(times)
    out.rps = out.requests / out.seconds
    times.sort()
    if times:
        out.p50_ms = statistics.median(times) * 1000
        out.p99_ms = times[min(len(times) - 1, int(len(times) * 0.99))] * 1000
    return out


async def _one(url: str) -> int:
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(_request(parts.hostname, parts.port, "warm up"))
        return await _response(reader)
    finally:
        writer.close()


def load(url: str, tasks: list[str], clients: int, seconds: float, *, group: int | None = None) -> Load:
    """`clients` keep-alive clients searching `tasks` in turn on the server at `url` for
    `seconds`; with `group`, the server's process group, the CPU it used per request."""
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    before = cpu_seconds(group) if group is not None else 0.0
    out = asyncio.run(_load(parts.hostname, parts.port, tasks, clients, seconds))
    if group is not None and out.requests:
        out.server_cpu_us = (cpu_seconds(group) - before) / out.requests * 1e6
    return out


def cpu_seconds(group: int) -> float:
    """User + system CPU seconds of the live processes of a process group (Linux /proc)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group:  # pgrp; utime and stime are fields 14 and 15 of stat
                total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def serving(db: str, *, src: Path = REPO, workers: int | None = None, home: str) -> Iterator[tuple[str, int]]:
    """`flowmem api` on store `db`, run from the checkout `src`, in a process group of its own
    (stopped whole on exit): its base URL once it answers a search, and the group's id."""
    port = free_port()
    env = {
        **os.environ,
        "FLOWMEM_DB": db,
        "LANCEDB_LOG": "error",
        "PREFECT_HOME": home,
        "PYTHONPATH": str(src),
    }
    if workers is not None:
        env["FLOWMEM_API_WORKERS"] = str(workers)
    cmd = [sys.executable, "-c", "from flowmem.cli import main; main()", "api", "--port", str(port)]
    cmd += ["--host", "127.0.0.1"]
    log = Path(home) / f"api-{port}.log"
    with log.open("wb") as out:
        server = subprocess.Popen(cmd, env=env, stdout=out, stderr=out, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_up(url, server)
        # Each worker process logs its start; a search only tells that one of them is up.
        deadline = time.monotonic() + 120
        while log.read_text(errors="replace").count("Application startup complete") < (workers or 1):
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError(f"not every worker started: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        yield url, server.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, 15)
        server.wait(timeout=30)


def _wait_until_up(url: str, server: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"flowmem api exited with {server.returncode}")
        try:
            if asyncio.run(_one(url)) == 200:
                return
        except (OSError, asyncio.IncompleteReadError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"flowmem api did not answer at {url} in {timeout} s")
        time.sleep(0.2)


def measure(
    db: str,
    n: int,
    *,
    src: Path,
    clients: list[int],
    seconds: float,
    workers: int | None,
    home: str,
    warm_up: float | None = None,
) -> dict[str, object]:
    """One server from `src` on `db`: warmed up, then 1 client (p50), then each client count."""
    tasks = queries(200)
    out: dict[str, object] = {"src": str(src), "workers": workers, "load_average_1m": os.getloadavg()[0]}
    with serving(db, src=src, workers=workers, home=home) as (url, group):
        # Every worker warm: several connections, which the workers accept in turn.
        load(url, tasks, 8, warm_up if warm_up is not None else WARM_UP_S if n >= ANN_MIN else 0.5)
        one = load(url, tasks, 1, min(seconds, 2.0), group=group)
        out["p50_ms_1"] = one.p50_ms
        out["runs"] = [asdict(one)] + [asdict(load(url, tasks, c, seconds, group=group)) for c in clients]
    out["load_average_1m_after"] = os.getloadavg()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench api_load", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="served workflows (default 10,000)")
    parser.add_argument("--clients", default="8,32", help="client counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of load per client count")
    parser.add_argument("--src", default=str(REPO), help="checkouts to serve from, comma-separated")
    parser.add_argument("--workers", type=int, default=None, help="FLOWMEM_API_WORKERS for the server")
    parser.add_argument("--warm-up", type=float, default=None, help=f"seconds (default {WARM_UP_S:g})")
    parser.add_argument("--db", default=None, help="an existing store to serve (default: a new one)")
    parser.add_argument("--json", action="store_true", dest="as_json")
    parser.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="measure as `make bench` does (this checkout, 2 workers) and write only the API's "
        "figures into FILE (e.g. bench/results/latest.json), with the machine and its load",
    )
    args = parser.parse_args(argv)
    if args.record is not None:
        return _record(args.record, args.n, args.seconds)
    clients = [int(c) for c in args.clients.split(",") if c]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"{tmp}/db"
        if args.db is None:
            fill(store_from(Settings(db=db)), args.n)
        for src in args.src.split(","):
            found = measure(
                db,
                args.n,
                src=Path(src).resolve(),
                clients=clients,
                seconds=args.seconds,
                workers=args.workers,
                home=tmp,
                warm_up=args.warm_up,
            )
            results.append(found)
            if not args.as_json:
                _print(found)
    if args.as_json:
        print(json.dumps(results))
    return 0


def _record(path: Path, n: int, seconds: float) -> int:
    """Replace the API's figures of a recorded bench run by new ones (the rest stays as it was
    measured), noting when and on what they were measured."""
    from bench.pipeline import api_search
    from bench.run import machine

    record = json.loads(path.read_text()) if path.exists() else {}
    record = {k: v for k, v in record.items() if not k.startswith("api_")}
    record.update(api_search(n, seconds=seconds))
    record["api_machine"] = {**machine(), "command": "python -m bench api_load --record " + str(path)}
    path.write_text(json.dumps(record, indent=2) + "\n")
    _print(record["api_search"])
    return 0


def _print(found: dict[str, object]) -> None:
    print(
        f"{found['src']} (workers {found['workers']}; load {found['load_average_1m']:.2f} → "
        f"{found['load_average_1m_after']:.2f}):"
    )
    runs = found["runs"]
    assert isinstance(runs, list)
    for r in runs:
        print(
            f"  {r['clients']:>3} clients: {r['rps']:>7,.0f} req/s  p50 {r['p50_ms']:.2f} ms  "
            f"p99 {r['p99_ms']:.2f} ms  errors {r['errors']}  server CPU {r['server_cpu_us']:,.0f} µs/req  "
            f"({r['requests']:,} in {r['seconds']:.1f} s)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
