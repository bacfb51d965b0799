"""`FLOWMEM_DB=s3://bucket/prefix`, against an S3 server the test session starts (moto's server
mode, on 127.0.0.1): ingest, writers in several processes, induce, search and hot reload,
rollback, compaction and `flowmem maintain`, the API and the dashboard.

Every test works under a prefix of its own in one bucket, and checks the bucket itself where it
matters (the objects are there, not in a local directory named `s3:`).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from flowmem.agents.retrieval import ServedIndex
from flowmem.cli import app
from flowmem.flows.local import free_port
from flowmem.induction.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import InductionRun
from flowmem.server.api import create_app
from flowmem.settings import Settings
from flowmem.storage.base import TRAJECTORIES
from flowmem.storage.object_store import storage_options
from flowmem.storage.vector_cache import StoreVectorCache
from tests.factories import cancel, forward, remind
from tests.processes import READY_LIMIT

BUCKET = "flowmem-tests"
KEY = "testing"
"""Access key id and secret of the test server (moto accepts any)."""


@dataclass(frozen=True)
class S3Server:
    """The test session's S3 server."""

    endpoint: str
    client: Any
    """A boto3 S3 client of it."""

    def settings(self, prefix: str, **kw: Any) -> Settings:
        """Settings on `s3://BUCKET/<prefix>`, endpoint and credentials from the settings."""
        return Settings(
            db=f"s3://{BUCKET}/{prefix}",
            s3_endpoint=self.endpoint,
            s3_region="us-east-1",
            s3_access_key_id=KEY,
            s3_secret_access_key=SecretStr(KEY),
            s3_allow_http=True,
            **kw,
        )

    def env(self, prefix: str) -> dict[str, str]:
        """The same as FLOWMEM_* variables, for commands and other processes."""
        return {
            "FLOWMEM_DB": f"s3://{BUCKET}/{prefix}",
            "FLOWMEM_NAMESPACE": "default",
            "FLOWMEM_S3_ENDPOINT": self.endpoint,
            "FLOWMEM_S3_REGION": "us-east-1",
            "FLOWMEM_S3_ACCESS_KEY_ID": KEY,
            "FLOWMEM_S3_SECRET_ACCESS_KEY": KEY,
            "FLOWMEM_S3_ALLOW_HTTP": "true",
        }

    def keys(self, prefix: str) -> list[str]:
        """The object keys under a prefix, relative to it."""
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/")
        return [o["Key"].removeprefix(prefix + "/") for page in pages for o in page.get("Contents", [])]


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Server]:
    """moto's S3 server in a thread, on a free port, with one bucket; the tests are skipped
    (saying why) only when it cannot start."""
    try:
        import boto3  # type: ignore[import-untyped]
        from moto.server import ThreadedMotoServer
    except ImportError as err:
        pytest.skip(f"no S3 test server: {err} (`make setup` installs moto[server] and boto3)")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        server.start()
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id=KEY,
            aws_secret_access_key=KEY,
        )
        client.create_bucket(Bucket=BUCKET)
    except Exception as err:  # a port taken meanwhile, a server that does not answer
        server.stop()
        pytest.skip(f"the S3 test server did not start: {err}")
    yield S3Server(endpoint=endpoint, client=client)
    server.stop()


@pytest.fixture
def prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A prefix no other test uses; the working directory is a fresh one (to see that nothing
    is written locally instead)."""
    monkeypatch.chdir(tmp_path)
    return f"t-{uuid.uuid4().hex[:12]}"


def _local_leftovers(cwd: Path) -> list[str]:
    """What a store on S3 must never create in the working directory (a local `s3:` tree)."""
    return sorted(p.name for p in cwd.iterdir() if p.name.startswith("s3"))


def test_the_settings_reach_lance_only_for_an_object_store() -> None:
    settings = Settings(
        db="s3://bucket/flowmem",
        s3_endpoint="http://127.0.0.1:9000",
        s3_region="eu-west-1",
        s3_access_key_id="AKIA",
        s3_secret_access_key=SecretStr("very-secret"),
        s3_allow_http=True,
        storage_options={"aws_virtual_hosted_style_request": "true", "aws_region": "overridden"},
    )
    assert storage_options(settings) == {
        "aws_endpoint": "http://127.0.0.1:9000",
        "aws_region": "eu-west-1",  # the field wins over the same key in storage_options
        "aws_access_key_id": "AKIA",
        "aws_secret_access_key": "very-secret",
        "allow_http": "true",
        "aws_virtual_hosted_style_request": "true",
    }
    assert "very-secret" not in repr(settings)
    # Unset fields are left out, so the AWS environment still supplies them; a local store gets none.
    assert storage_options(Settings(db="s3://bucket/flowmem")) is None
    assert storage_options(Settings(db="./somewhere", s3_region="eu-west-1")) is None
    gcs = Settings(db="gs://bucket/flowmem", s3_region="eu-west-1", storage_options={"k": "v"})
    assert storage_options(gcs) == {"k": "v"}  # the s3_* settings are for s3:// alone
    with pytest.raises(ValueError, match="http"):
        Settings(s3_endpoint="127.0.0.1:9000")


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
    assert storage_options(settings) is None
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
    assert first.summary()["versions_created"] == 2
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
    assert _served_version(index, task) == (wid, 2) and index.reloads == 2
    assert other.get_run("revision").tag == "revision"
    assert "revision" in other.checkout_tags(settings.namespace)

    # A rollback restores the table as it was before that run: version 1 is served again.
    other.rollback(run.id)
    assert _served_version(index, task) == (wid, 1) and index.reloads == 3
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
