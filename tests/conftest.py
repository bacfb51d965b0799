"""Shared fixtures: every test gets its own store directory; nothing touches the network.

`make test` runs the tests in pytest-xdist's processes (`--dist loadgroup`): the tests of one
`xdist_group` run one after another on one worker, and every other test wherever a worker is
free. A session fixture here is built at most once per worker, when a test first asks for it;
the modules that share an expensive one name one group (their `pytestmark`), so it is built
once. A fixture that starts a server or a command one module checks lives in that module."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.jobs.factories import store_from
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import WORKBENCH, DemoTraces, Seeded, seed_charts, seed_dashboard, seed_demo_traces
from tests.prefect_servers import HarnessServer, stop, upgrade_command
from tests.processes import READY_LIMIT

os.environ.setdefault("LANCEDB_LOG", "error")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings on a fresh store in a temporary directory."""
    return Settings(db=str(tmp_path / "db"), flush_interval=0.05)


@pytest.fixture
def store(settings: Settings) -> Store:
    """A fresh, empty store."""
    return store_from(settings)


# The dashboard's seeded stores (a build takes seconds: induction runs, the demo's loop); a
# module opens its own copy (`Seeded.copied`, `copy_store`), which its tests may change, with its
# own settings (the seeds read none but the namespace and scrubbing). The modules that use them
# are of the xdist_group "dashboard".


def _new_db(factory: pytest.TempPathFactory, name: str) -> Settings:
    return Settings(db=str(factory.mktemp(name) / "db"))


@pytest.fixture(scope="session")
def dashboard_seed(tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    """tests/factories.py's `seed_dashboard`: a WorkBench slice induced twice, served, learned."""
    return seed_dashboard(_new_db(tmp_path_factory, "dashboard-seed"))


@pytest.fixture(scope="session")
def demo_traces_seed(tmp_path_factory: pytest.TempPathFactory) -> DemoTraces:
    """tests/factories.py's `seed_demo_traces`: the demo's loop, three rounds of 40 tasks."""
    return seed_demo_traces(_new_db(tmp_path_factory, "demo-traces-seed"))


@pytest.fixture(scope="session")
def charts_seed(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """tests/factories.py's `seed_charts` (the demo office's runs induced, served): its settings."""
    settings = _new_db(tmp_path_factory, "charts-seed")
    seed_charts(settings)
    return settings


@pytest.fixture(scope="session")
def workbench_ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """`flowmem ingest` of the whole WorkBench file into an empty store (its users, in
    tests/test_cli.py and tests/test_retrieval.py, are of the xdist_group "workbench"): the
    store's directory, the exit code and the output. A test copies the store to change it."""
    from typer.testing import CliRunner

    from flowmem.cli import app

    db = tmp_path_factory.mktemp("workbench-ingested") / "db"
    env = {"FLOWMEM_DB": str(db), "FLOWMEM_NAMESPACE": "default"}
    result = CliRunner().invoke(app, ["ingest", str(WORKBENCH)], env=env)
    return db, result.exit_code, result.output


@pytest.fixture(scope="module")
def chromium_browser() -> Iterator[Any]:
    """Headless chromium (tests/browser.py), launched once for a module of the dashboard's
    browser tests; each test opens a browser context of its own (its own cookies and storage,
    as a fresh browser has). Closed after the module: Playwright's loop stays in the thread
    while it is open, and every later asyncio.run would fail."""
    from playwright.sync_api import sync_playwright

    from tests.browser import chromium

    with chromium(sync_playwright) as browser:
        yield browser


@pytest.fixture(scope="session")
def prefect_database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Prefect database with every migration applied (`prefect server database upgrade`), made
    once for a worker: the tests' Prefect servers start on a copy of it (`seed_database`), as
    on a machine that ran one before, instead of each migrating a new database (~3.5 s of CPU
    each). The temporary-server demo and the bench start on a new one, as a first run does."""
    database = tmp_path_factory.mktemp("prefect-database") / "prefect.db"
    upgrade = upgrade_command(database)
    done = subprocess.run(upgrade.argv, env=upgrade.env, capture_output=True, text=True, timeout=READY_LIMIT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return database


@pytest.fixture(scope="session")
def harness_server(
    tmp_path_factory: pytest.TempPathFactory, prefect_database: Path
) -> Iterator[HarnessServer]:
    """The server `prefect_test_harness` starts, started here on a copy of `prefect_database`
    (tests/prefect_servers.py); `prefect_harness` uses it."""
    server = HarnessServer(tmp_path_factory.mktemp("prefect-home"), prefect_database)
    server.start()
    yield server
    if server.process is not None:
        stop(server.process)


@pytest.fixture(scope="session")
def prefect_harness(harness_server: HarnessServer) -> Iterator[None]:
    """One temporary Prefect server for every flow test of a worker (`harness_server`)."""
    os.environ["PREFECT_HOME"] = str(harness_server.home)
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import temporary_settings
    from prefect.testing import utilities

    from flowmem.flows.engine import NO_HEARTBEAT

    # Its own server, started only when ours exited, may take long too: no budget but the bound.
    harness = utilities.prefect_test_harness(server_startup_timeout=int(READY_LIMIT))
    with pytest.MonkeyPatch.context() as patch:
        if harness_server.healthy():
            # The harness's server for its port is this one, already running: the harness
            # uses it (and stops it on exit) instead of starting another.
            server = SubprocessASGIServer(port=harness_server.port)
            server.server_process, server.running = harness_server.process, True
            patch.setattr(utilities, "_find_available_port", lambda: harness_server.port)
        harness.__enter__()
    # No flow run heartbeats, as the demo's engine (~half the wall time of a short flow's run).
    with contextlib.ExitStack() as stack:
        stack.callback(harness.__exit__, None, None, None)  # stops its server too
        stack.enter_context(temporary_settings(updates=NO_HEARTBEAT))
        yield
