"""`FLOWMEM_DB=s3://bucket/prefix`, against an S3 server the test session starts (moto's server
mode, on 127.0.0.1): ingest, writers in several processes, induce, search and hot reload,
rollback, compaction and `flowmem maintain`, the API and the dashboard.

Every test works under a prefix of its own in one bucket, and checks the bucket itself where it
matters (the objects are there, not in a local directory named `s3:`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from flowmem.agents.served_index import ServedIndex
from flowmem.cli import app
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import InductionRun
from flowmem.server.api import create_app
from flowmem.settings import Settings
from flowmem.storage.base import TRAJECTORIES
from flowmem.storage.errors import ObjectStoreError
from flowmem.storage.object_store import access_problem, check_endpoint, storage_options
from flowmem.storage.vector_cache import StoreVectorCache
from tests import s3_server
from tests.bounds import idle_bound
from tests.factories import cancel, forward, remind, until
from tests.processes import READY_LIMIT
from tests.s3_server import BUCKET, KEY, S3Server

s3, prefix = s3_server.s3, s3_server.prefix
"""The session's S3 server and a fresh key prefix per test (tests/s3_server.py)."""


def _local_leftovers(cwd: Path) -> list[str]:
    """What a store on S3 must never create in the working directory (a local `s3:` tree)."""
    return sorted(p.name for p in cwd.iterdir() if p.name.startswith("s3"))


BOUNDS = {
    "connect_timeout": "5000ms",
    "timeout": "30000ms",
    "client_max_retries": "2",
    "client_retry_timeout": "20",
}
"""The request bounds every object store gets with the default `storage_*` settings."""


def test_the_settings_reach_lance_only_for_an_object_store() -> None:
    settings = Settings(
        db="s3://bucket/flowmem",
        s3_endpoint="http://127.0.0.1:9000",
        s3_region="eu-west-1",
        s3_access_key_id="AKIA",
        s3_secret_access_key=SecretStr("very-secret"),
        s3_session_token=SecretStr("temporary-token"),
        s3_allow_http=True,
        storage_options={"aws_virtual_hosted_style_request": "true", "aws_region": "overridden"},
    )
    assert storage_options(settings) == BOUNDS | {
        "aws_endpoint": "http://127.0.0.1:9000",
        "aws_region": "eu-west-1",  # the field wins over the same key in storage_options
        "aws_access_key_id": "AKIA",
        "aws_secret_access_key": "very-secret",
        "aws_session_token": "temporary-token",  # temporary credentials are refused without it
        "allow_http": "true",
        "aws_virtual_hosted_style_request": "true",
    }
    assert "very-secret" not in repr(settings) and "temporary-token" not in repr(settings)
    # Unset fields are left out, so the AWS environment still supplies them; a local store gets none.
    assert storage_options(Settings(db="s3://bucket/flowmem")) == BOUNDS
    assert storage_options(Settings(db="./somewhere", s3_region="eu-west-1")) is None
    gcs = Settings(db="gs://bucket/flowmem", s3_region="eu-west-1", storage_options={"k": "v"})
    assert storage_options(gcs) == BOUNDS | {"k": "v"}  # the s3_* settings are for s3:// alone
    with pytest.raises(ValueError, match="http"):
        Settings(s3_endpoint="127.0.0.1:9000")


def test_the_request_bounds_are_settings_and_a_storage_option_wins_over_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "FLOWMEM_STORAGE_CONNECT_TIMEOUT": "1.5",
        "FLOWMEM_STORAGE_TIMEOUT": "120",
        "FLOWMEM_STORAGE_RETRIES": "0",
        "FLOWMEM_STORAGE_RETRY_TIMEOUT": "2.5",
    }.items():
        monkeypatch.setenv(name, value)
    bounded = Settings(db="s3://bucket/flowmem", storage_options={"timeout": "5s"})
    assert storage_options(bounded) == {
        "connect_timeout": "1500ms",
        "timeout": "5s",
        "client_max_retries": "0",
        "client_retry_timeout": "3",  # Lance reads whole seconds: never below the setting
    }


def test_ingest_and_the_ingest_command_store_in_the_bucket(s3: S3Server, prefix: str, tmp_path: Path) -> None:
    settings = s3.settings(prefix)
    store = store_from(settings)
    stored = store_trajectories(store, [forward(i) for i in range(6)], settings.scrub)
    assert stored.count == 6
    lines = [t.model_dump_json() for t in [cancel(i) for i in range(4)] + [forward(0)]]
    (tmp_path / "runs.jsonl").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(app, ["ingest", "runs.jsonl", "--json"], env=s3.env(prefix))
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["stored"] == 4  # forward(0) was stored already
    assert store.count_trajectories() == 10
    assert store_from(s3.settings(prefix)).count_trajectories() == 10  # another connection
    data = [k for k in s3.keys(prefix) if k.startswith(f"{TRAJECTORIES}.lance/data/")]
    assert len(data) == 2  # two commits, one data file each
    assert _local_leftovers(tmp_path) == []


def test_the_standard_aws_environment_is_enough(
    s3: S3Server, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": KEY,
        "AWS_SECRET_ACCESS_KEY": KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    settings = Settings(db=f"s3://{BUCKET}/{prefix}")
    assert storage_options(settings) == BOUNDS  # the request bounds alone: the rest from AWS_*
    store = store_from(settings)
    store_trajectories(store, [remind(i) for i in range(3)], settings.scrub)
    assert store.count_trajectories() == 3
    assert any(k.startswith(f"{TRAJECTORIES}.lance/_versions/") for k in s3.keys(prefix))


def test_a_network_embedders_cache_lives_in_the_bucket(s3: S3Server, prefix: str) -> None:
    settings = s3.settings(prefix)
    cache = StoreVectorCache(settings.db, "remote-model", 4, storage_options=storage_options(settings))
    cache.put_many({"a": np.ones(4, np.float32), "b": np.zeros(4, np.float32)})
    again = StoreVectorCache(settings.db, "remote-model", 4, storage_options=storage_options(settings))
    found = again.get_many(["a", "b", "c"])
    assert sorted(found) == ["a", "b"] and found["a"].tolist() == [1.0] * 4
    assert any(k.startswith("embeddings__remote_model.lance/") for k in s3.keys(prefix))


PROCESSES = 2
"""Writer processes; the test's own process writes too, at the same time."""
PER_WRITER = 6
SHARED = 4

WRITES = textwrap.dedent(
    """
    from flowmem.jobs.ingest import store_trajectories
    from flowmem.models import Trajectory


    def write(store, k, n, shared):
        \"\"\"Writer k's n writes, one commit each (where commits collide most); the first
        `shared` also send an id that every writer sends. Returns how many it stored.\"\"\"
        stored = 0
        for i in range(n):
            mine = [Trajectory(id=f"w{k}-{i}", task=f"Forward report {i} to writer {k}")]
            also = [Trajectory(id=f"shared-{i}", task=f"Shared task {i}")] if i < shared else []
            stored += store_trajectories(store, mine + also, store.settings.scrub).count
        return stored
    """
)

WRITER_SCRIPT = WRITES + textwrap.dedent(
    """
    import sys

    from flowmem.jobs.factories import store_from
    from flowmem.settings import Settings

    k, n, shared = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    store = store_from(Settings())  # FLOWMEM_DB=s3://... and the FLOWMEM_S3_* variables
    store.prepare()
    print("ready", flush=True)
    sys.stdin.readline()  # every writer starts at once
    print("stored", write(store, k, n, shared), flush=True)
    """
)


def test_writers_committing_at_once_store_each_trajectory_exactly_once(s3: S3Server, prefix: str) -> None:
    """Three writers (two processes and this one) append one commit per trajectory, all at once,
    and some ids are sent by every writer: Lance's conditional put of each version's manifest
    makes the colliding commits retry, and the store's append check keeps one copy of each
    shared id."""
    env = {**os.environ, **s3.env(prefix)}
    store = store_from(s3.settings(prefix))
    store_trajectories(store, [forward(0)], store.settings.scrub)  # the table exists before they race
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER_SCRIPT, str(k), str(PER_WRITER), str(SHARED)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(1, PROCESSES + 1)
    ]
    here: dict[str, Any] = {}
    exec(WRITES, here)  # the same writes, from this process
    try:
        for p in processes:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for p in processes:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        mine = here["write"](store_from(s3.settings(prefix)), 0, PER_WRITER, SHARED)
        outputs = [p.communicate(timeout=READY_LIMIT)[0] for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in processes] == [0] * PROCESSES, outputs
    writers = PROCESSES + 1
    ids = [t.id for t in store.list_trajectories(limit=None)]
    assert len(ids) == 1 + writers * PER_WRITER + SHARED
    assert Counter(ids).most_common(1)[0][1] == 1
    assert {f"w{k}-{i}" for k in range(writers) for i in range(PER_WRITER)} <= set(ids)
    # What the writers say they stored is what is there: each shared id counted by one writer.
    assert mine + sum(int(out.split()[-1]) for out in outputs) == writers * PER_WRITER + SHARED


def _served_version(index: ServedIndex, task: str) -> tuple[str, int]:
    [hit] = index.search(task, k=1)
    return hit.workflow.id, hit.workflow.version


def test_induce_search_hot_reload_and_rollback(s3: S3Server, prefix: str) -> None:
    settings = s3.settings(prefix)
    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub)
    first = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert first.summary().versions_created == 2
    index = ServedIndex(store_from(settings), settings.namespace, check_every=0)
    task = "Cancel my next meeting with zed"
    wid, version = _served_version(index, task)
    assert version == 1 and index.reloads == 1

    # Another store object (as another process) commits a revision: the index serves it.
    other = store_from(settings)
    v2 = other.get_workflow(wid).model_copy(
        update={"version": 2, "parent_version": 1, "pitfalls": ["look before you cancel"]}
    )
    run = other.commit_run(InductionRun(id="revision"), [v2])
    # The store is asked behind the searches (not a local store): v2 is served once read.
    until(lambda: _served_version(index, task) == (wid, 2))
    assert index.reloads == 2
    assert other.get_run("revision").tag == "revision"
    assert "revision" in other.checkout_tags(settings.namespace)

    # A rollback restores the table as it was before that run: version 1 is served again.
    other.rollback(run.id)
    until(lambda: _served_version(index, task) == (wid, 1))
    assert index.reloads == 3
    assert [w.version for w in store.history(wid)] == [1]
    assert any(k.startswith(f"workflows__{settings.namespace}.lance/_refs/tags/") for k in s3.keys(prefix))


def test_the_induce_search_and_maintain_commands_and_compaction(s3: S3Server, prefix: str) -> None:
    """Many small commits fragment a table; compaction (the writers' own, through Lance, and
    `flowmem maintain`) leaves one fragment per table, every row and every run tag."""
    settings = s3.settings(prefix)
    store = store_from(settings)
    runs = [forward(i) for i in range(6)] + [remind(i) for i in range(6)]
    for t in runs:
        store_trajectories(store, [t], settings.scrub)  # one commit each
    assert store.table_state(TRAJECTORIES).fragments == 12
    store.compact_trajectories(keep=timedelta(0))
    assert store.table_state(TRAJECTORIES).fragments == 1
    assert store.count_trajectories() == 12

    env = s3.env(prefix)
    runner = CliRunner()
    result = runner.invoke(app, ["induce", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["versions_created"] == 2
    store_trajectories(store, [remind(i) for i in range(6, 9)], settings.scrub)
    result = runner.invoke(app, ["search", "Remind me to call olga on friday", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["steps"][0]["action"] == "tasks.create"

    result = runner.invoke(app, ["maintain", "--keep", "0", "--json"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    trajectories = report["tables"][TRAJECTORIES]
    assert trajectories["fragments"] == [2, 1]
    assert trajectories["versions"][1] == 1 and trajectories["files"] == [None, None]
    assert report["tags_checked"] == 1  # the run's tag was kept, and reads
    assert store.count_trajectories() == 15
    [(tag, rows)] = store.checkout_tags(settings.namespace).items()
    assert tag.startswith("run-") and rows == 2


def test_the_api_and_the_dashboard_serve_from_the_bucket(s3: S3Server, prefix: str) -> None:
    settings = s3.settings(prefix, api_token=SecretStr("t" * 32))
    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    api = TestClient(create_app(settings))
    response = api.get("/v1/workflows/search", params={"task": "Cancel my next meeting with zed", "k": 1})
    assert response.status_code == 200, response.text
    [hit] = response.json()
    assert [s["action"] for s in hit["steps"]] == ["calendar.find_events", "calendar.cancel_event"]
    record = {"id": "via-api", "task": "Cancel my next meeting with olga", "steps": []}
    written = api.post(
        "/v1/trajectories",
        content=json.dumps(record) + "\n",
        headers={"Authorization": f"Bearer {'t' * 32}", "Content-Type": "application/x-ndjson"},
    )
    assert written.status_code == 200, written.text
    assert store.count_trajectories() == 17
    page = api.get("/")  # the dashboard's home page, from the same app
    assert page.status_code == 200 and f'href="/workflows/{hit["id"]}"' in page.text


# -- a location that cannot serve: one line naming it and what to do, exit 2, within 10 s ------------

LIMIT = 10.0
"""Seconds a command may take to say that the object store refused or did not answer."""


def flowmem_command(cwd: Path, env: dict[str, str], *args: str) -> tuple[int, list[str], float]:
    """Run the real `flowmem` command in a process of its own, with no FLOWMEM_*, AWS_* or proxy
    variable but `env`: (exit code, stderr lines, seconds taken)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith(("FLOWMEM_", "AWS_")) and not k.lower().endswith("_proxy")
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "flowmem.cli", *args],
        cwd=cwd,
        env=clean | {"LANCEDB_LOG": "error"} | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stderr.splitlines(), time.monotonic() - started


def one_line(code: int, stderr: list[str], seconds: float, *names: str) -> str:
    """The contract of a configuration error: exit 2, one stderr line naming `names`, no
    traceback, within `LIMIT`."""
    assert code == 2 and len(stderr) == 1, (code, stderr)
    line = stderr[0]
    assert line.startswith("error: ") and "Traceback" not in line
    for name in names:
        assert name in line, (name, line)
    assert seconds < idle_bound(LIMIT), (seconds, os.getloadavg())
    return line


@pytest.fixture
def runs_file(tmp_path: Path) -> Path:
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(forward(i).model_dump_json() + "\n" for i in range(3)))
    return path


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("args", [("ingest", "runs.jsonl"), ("workflows", "list")])
def test_a_bucket_that_does_not_exist(s3: S3Server, runs_file: Path, args: tuple[str, ...]) -> None:
    env = s3.env("db") | {"FLOWMEM_DB": "s3://no-such-bucket/db"}
    line = one_line(*flowmem_command(runs_file.parent, env, *args), "s3://no-such-bucket/db", s3.endpoint)
    assert "the bucket 'no-such-bucket'" in line and "does not exist" in line
    assert f"`aws s3 mb s3://no-such-bucket --endpoint-url {s3.endpoint}`" in line


@pytest.mark.parametrize("args", [("ingest", "runs.jsonl"), ("workflows", "list")])
def test_an_endpoint_on_a_closed_port(s3: S3Server, runs_file: Path, args: tuple[str, ...]) -> None:
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    env = s3.env("db") | {"FLOWMEM_S3_ENDPOINT": endpoint}
    line = one_line(*flowmem_command(runs_file.parent, env, *args), endpoint, f"s3://{BUCKET}/db")
    assert "cannot reach the object store" in line and "connection refused" in line


def test_an_endpoint_that_drops_connections_fails_in_the_connect_timeout(
    s3: S3Server, runs_file: Path
) -> None:
    """A listening socket whose backlog is full: the kernel drops further connections unanswered,
    as a firewall does. Lance alone would try each list request 6 times, each for the timeout."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = int(server.getsockname()[1])
        fillers = [socket.socket() for _ in range(3)]
        for sock in fillers:
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
        try:
            env = s3.env("db") | {
                "FLOWMEM_S3_ENDPOINT": f"http://127.0.0.1:{port}",
                "FLOWMEM_STORAGE_CONNECT_TIMEOUT": "1",
            }
            code, stderr, seconds = flowmem_command(runs_file.parent, env, "ingest", "runs.jsonl")
        finally:
            for sock in fillers:
                sock.close()
    line = one_line(code, stderr, seconds, f"http://127.0.0.1:{port}", "(no connection within 1 s)")
    assert "FLOWMEM_STORAGE_CONNECT_TIMEOUT" in line


def test_an_endpoint_that_takes_connections_and_never_answers(s3: S3Server, runs_file: Path) -> None:
    """Lance alone would wait `storage_timeout` (30 s) for each of its 6 list tries."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts; nothing reads or answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        env = s3.env("db") | {"FLOWMEM_S3_ENDPOINT": endpoint, "FLOWMEM_STORAGE_CONNECT_TIMEOUT": "1"}
        code, stderr, seconds = flowmem_command(runs_file.parent, env, "workflows", "list")
    one_line(code, stderr, seconds, endpoint, "it took the connection but sent no answer within 1 s")


def test_the_request_bounds_reach_lance(s3: S3Server) -> None:
    """Lance reads the bounds under these names: its error says the retries and their timeout
    it was given (a closed port, past flowmem's own check)."""
    import lancedb

    settings = s3.settings("db", storage_retries=1, storage_retry_timeout=7)
    options = storage_options(settings)
    assert options is not None
    options["aws_endpoint"] = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(Exception, match=r"max_retries: 1, elapsed: [^,]+, retry_timeout: 7s"):
        lancedb.connect(settings.db, storage_options=options).table_names()


@pytest.fixture(scope="module")
def strict_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An S3 server that checks credentials (moto's server in a process of its own, with its
    authentication on: it knows no access key, so it refuses every one); its endpoint."""
    pytest.importorskip("moto.server")
    port = _closed_port()
    log = (tmp_path_factory.mktemp("strict-s3") / "moto.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and server.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.skip("the credential-checking S3 test server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


@pytest.mark.parametrize("args", [("ingest", "runs.jsonl"), ("workflows", "list")])
def test_refused_credentials(s3: S3Server, strict_s3: str, runs_file: Path, args: tuple[str, ...]) -> None:
    env = s3.env("db") | {"FLOWMEM_S3_ENDPOINT": strict_s3}
    line = one_line(*flowmem_command(runs_file.parent, env, *args), strict_s3, f"s3://{BUCKET}/db")
    assert "refused the credentials" in line and "InvalidAccessKeyId" in line
    assert "FLOWMEM_S3_ACCESS_KEY_ID" in line and "FLOWMEM_S3_SESSION_TOKEN" in line


WRONG_REGION = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AuthorizationHeaderMalformed</Code>'
    "<Message>The authorization header is malformed; the region 'us-east-1' is wrong; "
    "expecting 'eu-west-1'</Message><Region>eu-west-1</Region><RequestId>0</RequestId></Error>"
)
"""What AWS S3 answers a request signed for another region than its bucket's (moto's server
accepts any region, so a stub answers this)."""


class _WrongRegion(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        body = WRONG_REGION.encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amz-bucket-region", "eu-west-1")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_PUT = do_HEAD = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def test_a_bucket_in_another_region(s3: S3Server, runs_file: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _WrongRegion)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        env = s3.env("db") | {"FLOWMEM_S3_ENDPOINT": endpoint}
        code, stderr, seconds = flowmem_command(runs_file.parent, env, "ingest", "runs.jsonl")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    line = one_line(
        code, stderr, seconds, f"s3://{BUCKET}/db", "another region", "FLOWMEM_S3_REGION=eu-west-1"
    )
    assert "AuthorizationHeaderMalformed" in line


def _lance_error(settings: Settings) -> BaseException:
    """What opening the store raises inside Lance, flowmem's own check of the endpoint skipped
    (as for AWS's own endpoints, which it does not check)."""
    import lancedb

    try:
        lancedb.connect(settings.db, storage_options=storage_options(settings)).table_names()
    except Exception as err:
        return err
    raise AssertionError("the store opened")


def test_lances_own_errors_are_told_in_the_same_line(s3: S3Server, strict_s3: str) -> None:
    missing = s3.settings("db").model_copy(update={"db": "s3://no-such-bucket/db"})
    line = access_problem(_lance_error(missing), missing)
    assert line is not None and line.startswith(
        "the bucket 'no-such-bucket' of FLOWMEM_DB=s3://no-such-bucket/db"
    )
    closed = s3.settings("db").model_copy(update={"s3_endpoint": f"http://127.0.0.1:{_closed_port()}"})
    line = access_problem(_lance_error(closed), closed)
    assert line is not None and line.startswith("cannot reach the object store at http://127.0.0.1:")
    refused = s3.settings("db").model_copy(update={"s3_endpoint": strict_s3})
    line = access_problem(_lance_error(refused), refused)
    assert line is not None and "refused the credentials" in line and "InvalidAccessKeyId" in line
    assert access_problem(RuntimeError("lance error: something else"), refused) is None
    assert access_problem(_lance_error(missing), Settings(db="./local")) is None  # a local store: not these


def test_no_check_of_the_endpoint_where_a_proxy_may_carry_the_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check connects directly: behind a proxy it would refuse an endpoint Lance reaches."""
    closed = Settings(db="s3://b/db", s3_endpoint=f"http://127.0.0.1:{_closed_port()}")
    with pytest.raises(ObjectStoreError, match="connection refused"):
        check_endpoint(closed)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    check_endpoint(closed)  # left to Lance
    monkeypatch.delenv("HTTPS_PROXY")
    check_endpoint(closed.model_copy(update={"storage_options": {"proxy_url": "http://proxy.invalid:3128"}}))
    check_endpoint(Settings(db="s3://b/db"))  # AWS's own endpoint: not checked


def test_a_failed_object_store_request_is_not_retried_as_a_commit_conflict() -> None:
    from flowmem.storage.lance_ops import retry_conflicts

    calls: list[int] = []

    def refused() -> None:
        calls.append(1)
        raise OSError(
            "LanceError(IO): Generic S3 error: Error performing GET http://127.0.0.1:9/b/db after 3 "
            "retries, max_retries: 2, retry_timeout: 20s - HTTP error: error sending request"
        )

    def conflicted() -> str:
        calls.append(2)
        if calls.count(2) < 3:
            raise RuntimeError("Retryable commit conflict for version 7")
        return "committed"

    with pytest.raises(OSError):
        retry_conflicts(refused)
    assert calls == [1]  # once: Lance has retried the request already
    assert retry_conflicts(conflicted) == "committed" and calls.count(2) == 3
