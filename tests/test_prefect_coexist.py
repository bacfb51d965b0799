"""`prefect deploy --all` and `flowmem serve` on one Prefect server: both sides' runs complete,
and SIGTERM stops `flowmem serve` cleanly (issue #13)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.flows.local import PrefectServer
from tests.prefect_servers import seed_database
from tests.processes import READY_LIMIT

pytestmark = pytest.mark.xdist_group("prefect")  # the migrated Prefect database, made once

ROOT = Path(__file__).resolve().parents[1]


def test_served_names_never_equal_a_prefect_yaml_name() -> None:
    import yaml

    from flowmem.flows.serve import DEPLOYMENTS

    spec = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())
    declared = {d["name"] for d in spec["deployments"]}
    served = {d.served_name for d in DEPLOYMENTS}
    assert served == {f"{name}-served" for name in declared} and not served & declared


def start_server(home: Path) -> PrefectServer:
    """`prefect server start` on a free port (`flowmem serve`'s, `flowmem.flows.local`), not
    waited for."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env |= {
        "PREFECT_HOME": str(home / "prefect"),
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "FLOWMEM_DB": str(home / "db"),
    }
    return PrefectServer(env=env, name="coexisting Prefect server")


@pytest.fixture(scope="module")
def coexist_server(
    tmp_path_factory: pytest.TempPathFactory, prefect_database: Path
) -> Iterator[PrefectServer]:
    """`start_server` on a copy of the session's migrated database; stopped after the module."""
    home = tmp_path_factory.mktemp("prefect-coexist")
    seed_database(prefect_database, home / "prefect")  # the server's PREFECT_HOME
    started = start_server(home)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def server(coexist_server: PrefectServer) -> dict[str, str]:
    """A real `prefect server start` on a free port, once healthy: the environment to reach it
    (its URL as `ready` gives it: on another port if its first was taken meanwhile)."""
    api = coexist_server.ready(READY_LIMIT)  # a bound: it waits while the server starts
    return coexist_server.env | {"PREFECT_API_URL": api}


def _prefect(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "prefect", "--no-prompt", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=READY_LIMIT,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def _serve(env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "flowmem.cli", "serve", "--only", "collect"]
    return subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for_line(process: subprocess.Popen[str], prefix: str, timeout: float = READY_LIMIT) -> str:
    """Read the process's stdout until a line starts with `prefix` (serve prints it once its
    deployments are registered and it is about to poll)."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith(prefix):
            return line
        assert line or process.poll() is None, (
            f"serve exited: {process.stderr.read() if process.stderr else ''}"
        )
    raise AssertionError(f"no line starting {prefix!r}")


def _client(env: dict[str, str]) -> Any:
    from prefect.client.orchestration import SyncPrefectClient

    return SyncPrefectClient(env["PREFECT_API_URL"])


def _create_pool(env: dict[str, str], name: str) -> None:
    """What `prefect work-pool create NAME --type process --overwrite` does (the process
    worker's default job template), through the client: no CLI process to start (~3 s)."""
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    template = ProcessWorker.get_default_base_job_template()
    with _client(env) as client:
        client.create_work_pool(
            WorkPoolCreate(name=name, type="process", base_job_template=template), overwrite=True
        )


def _state(env: dict[str, str], flow_run_id: Any, timeout: float = READY_LIMIT) -> str:
    """The flow run's final state type, waited for."""
    with _client(env) as client:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = client.read_flow_run(flow_run_id).state
            if state is not None and state.is_final():
                return str(state.type.value)
            time.sleep(0.5)
    return "TIMEOUT"


def _stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=READY_LIMIT)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.slow
def test_prefect_deploy_and_flowmem_serve_both_run_to_completion(server: dict[str, str]) -> None:
    serving = _serve(server)  # starts while `prefect deploy` runs: they register concurrently
    try:
        _create_pool(server, "flowmem-pool")
        _prefect(server, "deploy", "--all", "--prefect-file", "deployments/prefect.yaml")
        assert "flowmem-collect/collect-served" in _wait_for_line(serving, "flowmem serve:")
        with _client(server) as client:
            deployed = client.read_deployment_by_name("flowmem-collect/collect")
            served = client.read_deployment_by_name("flowmem-collect/collect-served")
            assert deployed.id != served.id and deployed.work_pool_name == "flowmem-pool"
            assert served.work_pool_name is None and deployed.pull_steps  # serve left it alone
            runs = {
                "deployed": client.create_flow_run_from_deployment(deployed.id).id,
                "served": client.create_flow_run_from_deployment(served.id).id,
            }
        worker = ["worker", "start", "--pool", "flowmem-pool", "--run-once"]
        _prefect(server, *worker)  # runs the work-pool side once, in a subprocess
        assert {side: _state(server, run) for side, run in runs.items()} == {
            "deployed": "COMPLETED",
            "served": "COMPLETED",
        }
    finally:
        _stop(serving)
    with _client(server) as client:  # the stop paused the served side only
        assert client.read_deployment_by_name("flowmem-collect/collect-served").paused
        assert not client.read_deployment_by_name("flowmem-collect/collect").paused


@pytest.mark.slow
def test_sigterm_stops_flowmem_serve_cleanly_and_pauses_its_deployments(
    server: dict[str, str],
) -> None:
    serving = _serve(server)
    try:
        _wait_for_line(serving, "flowmem serve:")
        with _client(server) as client:
            assert not client.read_deployment_by_name("flowmem-collect/collect-served").paused
    finally:
        out, err = _stop(serving)
    assert serving.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "Traceback" not in out, err[-3000:]
    assert "flowmem serve stopped" in out
    with _client(server) as client:
        # Paused while nothing serves it (no Late runs pile up); `serve` re-activates it on start.
        assert client.read_deployment_by_name("flowmem-collect/collect-served").paused
