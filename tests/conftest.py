"""Shared fixtures: every test gets its own store directory; nothing touches the network."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.jobs.factories import store_from
from flowmem.models import Workflow, WorkflowStep
from flowmem.settings import Settings
from flowmem.storage import Store

os.environ.setdefault("LANCEDB_LOG", "error")

WORKBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "workbench_trajectories.jsonl.gz"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings on a fresh store in a temporary directory."""
    return Settings(db=str(tmp_path / "db"), flush_interval=0.05)


@pytest.fixture
def store(settings: Settings) -> Store:
    """A fresh, empty store."""
    return store_from(settings)


def make_workflow(
    wid: str = "forward_latest", version: int = 1, *, steps: int = 2, namespace: str = "default", **kw: object
) -> Workflow:
    """A small workflow whose steps vary with `steps` so versions differ."""
    base = [
        WorkflowStep(action="mail.search", args={"query": "{subject}"}),
        WorkflowStep(action="contacts.lookup", args={"name": "{recipient}"}),
        WorkflowStep(action="mail.forward", args={"email_id": "{email_id}", "to": "{recipient_email}"}),
        WorkflowStep(action="mail.read", args={"email_id": "{email_id}"}),
    ]
    return Workflow.model_validate(
        {
            "id": wid,
            "version": version,
            "parent_version": version - 1 if version > 1 else None,
            "name": wid,
            "description": "Forward the newest email on a subject to a colleague.",
            "steps": base[:steps],
            "parameters": {"subject": "the email's subject", "recipient": "who gets it"},
            "namespace": namespace,
            **kw,
        }
    )


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One temporary Prefect server for every flow test (started on first use)."""
    os.environ["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect-home"))
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


@pytest.fixture(scope="session", autouse=True)
def bench_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[subprocess.Popen[str], Path] | None]:
    """`flowmem bench` at tiny sizes, started as the session starts when its test is selected:
    a subprocess on the core pytest leaves idle, waited for by tests/test_bench.py."""
    if not any(item.nodeid.startswith("tests/test_bench.py") for item in request.session.items):
        yield None
        return
    from tests.test_bench import bench_command

    tmp = tmp_path_factory.mktemp("bench")
    argv, env = bench_command(tmp)
    process = subprocess.Popen(
        argv, env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    yield process, tmp
    if process.poll() is None:
        process.kill()
        process.communicate()


def _selected(request: pytest.FixtureRequest, module: str) -> bool:
    return any(item.nodeid.startswith(module) for item in request.session.items)


def _stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session", autouse=True)
def coexist_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str]] | None]:
    """The real Prefect server of tests/test_prefect_coexist.py, started as the session starts
    when those tests are selected (it takes ~10 s to come up)."""
    if not _selected(request, "tests/test_prefect_coexist.py"):
        yield None
        return
    from tests.test_prefect_coexist import start_server

    process, env = start_server(tmp_path_factory.mktemp("prefect-coexist"))
    yield process, env
    _stop(process)


@pytest.fixture(scope="session", autouse=True)
def docs_eval(request: pytest.FixtureRequest) -> Iterator[subprocess.Popen[str] | None]:
    """`bench/eval_sets.py --json` for tests/test_docs_check.py, started as the session starts
    when that test is selected and the shared data is there."""
    if not _selected(request, "tests/test_docs_check.py") or not WORKBENCH.exists():
        yield None
        return
    root = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "bench/eval_sets.py", str(WORKBENCH.parent), "--json"]
    process = subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield process
    _stop(process)
