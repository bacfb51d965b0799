"""Do writers committing at once to a store on S3 lose rows? With the server honouring
conditional puts (`If-None-Match: *`, what Lance writes each version's manifest with) and
with a server that ignores them, side by side.

    python bench/s3_commits.py [--writers 4] [--writes 10] [--repeat 3]

Each writer is a process of its own with a flowmem store on `s3://.../<prefix>` (moto's S3
server in this process, on 127.0.0.1), storing `--writes` trajectories one commit each, all
writers at once. Prints, per run, the rows expected, the rows the table holds, and how many
the writers said they stored. Needs the dev extra (moto[server], boto3), imported only when it
runs. Figures: docs/operations.md, "Object storage (S3)".
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from flowmem.flows.local import free_port

if not __package__:  # run as `python bench/X.py`: import bench.* from this checkout, as `-m` would
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.paths import script

BUCKET = "flowmem-bench"
KEY = "testing"


def writer(k: int, n: int) -> int:
    """One writer process (`python bench/s3_commits.py --writer K N`): opens the store
    the FLOWMEM_* variables name, says "ready", waits for a line on stdin (every writer starts
    at once), stores `n` trajectories one commit each and prints how many it stored."""
    from flowmem.jobs.factories import store_from
    from flowmem.jobs.ingest import store_trajectories
    from flowmem.models import Trajectory
    from flowmem.settings import Settings

    store = store_from(Settings())
    store.prepare()
    print("ready", flush=True)
    sys.stdin.readline()
    stored = 0
    for i in range(n):
        one = [Trajectory(id=f"w{k}-{i}", task=f"Forward report {i} to writer {k}")]
        stored += store_trajectories(store, one, store.settings.scrub).count
    print(stored, flush=True)
    return 0


def ignore_conditional_puts() -> None:
    """Make moto's PutObject ignore `If-None-Match`, as a server without conditional puts does."""
    from moto.s3 import responses

    put = responses.S3Response.put_object

    def unconditional(self: Any) -> Any:
        self.headers = {k: v for k, v in self.headers.items() if k.lower() != "if-none-match"}
        return put(self)

    responses.S3Response.put_object = unconditional


def start_server() -> tuple[Any, str]:
    """moto's S3 server on a free port of 127.0.0.1, with the bucket; (server, endpoint)."""
    import boto3  # type: ignore[import-untyped]
    from moto.server import ThreadedMotoServer

    # Not even its errors: with conditional puts ignored, two writers replacing one manifest at
    # once make moto fail a request now and then (a 500, which the client retries).
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY, aws_secret_access_key=KEY
    )
    client.create_bucket(Bucket=BUCKET)
    return server, endpoint


def one_run(endpoint: str, writers: int, writes: int) -> dict[str, Any]:
    """`writers` processes storing `writes` trajectories each, at once, on a fresh prefix."""
    from flowmem.jobs.factories import store_from
    from flowmem.models import Trajectory
    from flowmem.settings import Settings

    variables = {
        "FLOWMEM_DB": f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}",
        "FLOWMEM_S3_ENDPOINT": endpoint,
        "FLOWMEM_S3_REGION": "us-east-1",
        "FLOWMEM_S3_ACCESS_KEY_ID": KEY,
        "FLOWMEM_S3_SECRET_ACCESS_KEY": KEY,
        "FLOWMEM_S3_ALLOW_HTTP": "true",
    }
    env = {**os.environ, **variables}
    store = store_from(
        Settings.model_validate({k.removeprefix("FLOWMEM_").lower(): v for k, v in variables.items()})
    )
    store.insert_trajectories([Trajectory(id="first", task="the table exists before they race")])
    processes = [
        subprocess.Popen(
            [*script("s3_commits"), "--writer", str(k), str(writes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(writers)
    ]
    for p in processes:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    started = time.perf_counter()
    for p in processes:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    said = sum(int(p.communicate()[0].split()[-1]) for p in processes)
    seconds = time.perf_counter() - started
    return {
        "expected": writers * writes,
        "stored": store.count_trajectories() - 1,
        "writers_said": said,
        "seconds": round(seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--writes", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--writer", nargs=2, type=int, metavar=("K", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        return writer(*args.writer)
    os.environ.setdefault("LANCEDB_LOG", "error")
    server, endpoint = start_server()
    try:
        for honoured in (True, False):
            if not honoured:
                ignore_conditional_puts()
            for _ in range(args.repeat):
                run = one_run(endpoint, args.writers, args.writes)
                print(f"conditional puts {'honoured' if honoured else 'ignored '}: {run}", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
