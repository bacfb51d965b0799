"""Shared fixtures: every test gets its own store directory; nothing touches the network."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.jobs.factories import store_from
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import WORKBENCH, DemoTraces, Seeded, seed_charts, seed_dashboard, seed_demo_traces
from tests.prefect_servers import HarnessServer, seed_database, stop, upgrade_command
from tests.processes import BACKGROUND_NICENESS, READY_LIMIT, Command, SessionRun, background
from tests.scheduling import order_and_group, start_ahead, stop_after_last_use
from tests.session import built_once, close_session, open_session, runs_of, start_runs

os.environ.setdefault("LANCEDB_LOG", "error")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings on a fresh store in a temporary directory."""
    return Settings(db=str(tmp_path / "db"), flush_interval=0.05)


@pytest.fixture
def store(settings: Settings) -> Store:
    """A fresh, empty store."""
    return store_from(settings)


# The dashboard's seeded stores, each built once for the session, by the first of its processes
# that needs it (a build takes seconds: induction runs, the demo's loop; tests/session.py's
# `built_once`); a module opens its own copy (`Seeded.copied`, `copy_store`), which its tests may
# change, with its own settings (the seeds read none but the namespace and scrubbing).


@pytest.fixture(scope="session")
def dashboard_seed() -> Seeded:
    """tests/factories.py's `seed_dashboard`: a WorkBench slice induced twice, served, learned."""
    return built_once("dashboard-seed", lambda path: seed_dashboard(Settings(db=str(path / "db"))))


@pytest.fixture(scope="session")
def demo_traces_seed() -> DemoTraces:
    """tests/factories.py's `seed_demo_traces`: the demo's loop, three rounds of 40 tasks."""
    return built_once(
        "demo-traces-seed", lambda directory: seed_demo_traces(Settings(db=str(directory / "db")))
    )


def _charts(directory: Path) -> Settings:
    settings = Settings(db=str(directory / "db"))
    seed_charts(settings)
    return settings


@pytest.fixture(scope="session")
def charts_seed() -> Settings:
    """tests/factories.py's `seed_charts` (the demo office's runs induced, served): its settings."""
    return built_once("charts-seed", _charts)


def _ingest_workbench(directory: Path) -> tuple[Path, int, str]:
    from typer.testing import CliRunner

    from flowmem.cli import app

    db = directory / "db"
    env = {"FLOWMEM_DB": str(db), "FLOWMEM_NAMESPACE": "default"}
    result = CliRunner().invoke(app, ["ingest", str(WORKBENCH)], env=env)
    return db, result.exit_code, result.output


@pytest.fixture(scope="session")
def workbench_ingested() -> tuple[Path, int, str]:
    """`flowmem ingest` of the whole WorkBench file into an empty store, run once (in a process
    of the session; tests/test_cli.py checks what it printed, tests/test_retrieval.py induces
    from it): the store's directory, the exit code and the output. A test copies the store to
    change it."""
    return built_once("workbench-ingested", _ingest_workbench)


AHEAD = {
    "concurrency_writers": 70,
    "concurrency_inducers": 70,
    "prefect_demo": 50,
    "examples_launched": 60,
    "harness_server": 80,
    "coexist_server": 150,
    "serve_schedule": 14,
}
"""Session fixtures that start slow work in processes of their own (a server coming up, command
runs whose results a module checks), each set up this many tests before the first test that
uses it (counted among the tests of its `GROUPS` group when pytest-xdist distributes them: a
group's tests run one after another on one worker): the work runs while those tests do. The
command runs are `background` processes; the servers are not (the tests talk to them)."""


@pytest.fixture(scope="session")
def harness_server(
    tmp_path_factory: pytest.TempPathFactory, prefect_database: Path
) -> Iterator[HarnessServer]:
    server = HarnessServer(tmp_path_factory.mktemp("prefect-home"), prefect_database)
    server.start()
    yield server
    if server.process is not None:
        stop(server.process)


@pytest.fixture(scope="session")
def prefect_demo(tmp_path_factory: pytest.TempPathFactory, harness_server: HarnessServer) -> Iterator[Any]:
    """`make demo`'s command with the Prefect engine, for tests/test_demo.py, on the harness's
    server (started once for every flow test; see HarnessServer), once that answers."""
    from tests.test_demo import start_prefect_demo

    if not harness_server.healthy():
        pytest.fail("the harness's Prefect server exited before it answered")
    run = start_prefect_demo(tmp_path_factory.mktemp("prefect-demo"), harness_server.api_url)
    background(run.process.pid)
    yield run
    stop(run.process)


@pytest.fixture(scope="session")
def examples_launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The example runs of tests/test_examples.py."""
    from tests.test_examples import launch_examples

    with launch_examples(tmp_path_factory) as runs:
        yield runs


def _reap(processes: list[subprocess.Popen[str]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.kill()
        p.communicate()


def _spawned(
    factory: pytest.TempPathFactory, name: str, niceness: int
) -> Iterator[tuple[Path, list[subprocess.Popen[str]]]]:
    """tests/test_concurrency.py's `spawn_<name>` processes in a directory of their own,
    started at `niceness`, ready and waiting; reaped at the end."""
    import tests.test_concurrency as concurrency

    cwd = factory.mktemp(name)
    processes: list[subprocess.Popen[str]] = getattr(concurrency, f"spawn_{name}")(cwd)
    for p in processes:
        background(p.pid, niceness)
    yield cwd, processes
    _reap(processes)


@pytest.fixture(scope="session")
def concurrency_writers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, list[subprocess.Popen[str]]]]:
    """The writer processes of tests/test_concurrency.py, ready and waiting; their directory."""
    yield from _spawned(tmp_path_factory, "writers", BACKGROUND_NICENESS)


@pytest.fixture(scope="session")
def concurrency_inducers(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, list[subprocess.Popen[str]]]]:
    """The induction processes of tests/test_concurrency.py, ready and waiting; their directory."""
    # The writers, needed first, go first.
    yield from _spawned(tmp_path_factory, "inducers", BACKGROUND_NICENESS + 2)


STOP_AFTER_LAST_USE = ("harness_server", "coexist_server", "chromium_browser")
"""Session fixtures whose server is stopped right after the last test that uses it, itself or
through another fixture (`prefect_harness` and `prefect_demo` use `harness_server`; see
`stop_after_last_use`), not at the end of the session: an idle Prefect server keeps using CPU
(its services poll: measured ~1.4 s a minute for `prefect server start`, ~1 s for the
harness's), and the modules after their last users are most of the session."""


@pytest.fixture(autouse=True)
def _start_ahead(request: pytest.FixtureRequest) -> Iterator[None]:
    """Sets up each fixture of AHEAD its number of tests before the first test that uses it;
    after its test, stops what `stop_after_last_use` registered for that test."""
    yield from start_ahead(request, AHEAD, STOP_AFTER_LAST_USE)


@pytest.fixture(scope="session")
def chromium_browser(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Headless chromium (tests/browser.py), launched once for the dashboard's browser tests
    (a launch, with Playwright's driver, takes a second or two); each test opens a browser
    context of its own (its own cookies and storage, as a fresh browser has). Closed after the
    last test that uses it (STOP_AFTER_LAST_USE): Playwright's loop leaves the thread with it."""
    from playwright.sync_api import sync_playwright

    from tests.browser import chromium

    launched = contextlib.ExitStack()
    browser = launched.enter_context(chromium(sync_playwright))
    stop_after_last_use(request, "chromium_browser", launched.close)
    yield browser
    launched.close()


@pytest.fixture(scope="session")
def prefect_harness(request: pytest.FixtureRequest, harness_server: HarnessServer) -> Iterator[None]:
    """One temporary Prefect server for every flow test (started ahead, see HarnessServer)."""
    os.environ["PREFECT_HOME"] = str(harness_server.home)
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import temporary_settings
    from prefect.testing import utilities

    from flowmem.flows.engine import NO_HEARTBEAT

    # No flow run heartbeats, as the demo's engine (~half the wall time of a short flow's run).
    quiet = temporary_settings(updates=NO_HEARTBEAT)
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
    quiet.__enter__()
    exited = False

    def exit_harness() -> None:  # stops its server too
        nonlocal exited
        if not exited:
            exited = True
            quiet.__exit__(None, None, None)
            harness.__exit__(None, None, None)

    stop_after_last_use(request, "harness_server", exit_harness)
    try:
        yield
    finally:
        exit_harness()


LAST = ("tests/test_bench.py",)
"""Modules run after every other: their tests wait for work started with the session (the
bench run takes ~40 s), which is done by then instead of waited for early on."""


GROUPS = {
    "coexist_server": "prefect-coexist",
    "chromium_browser": "browser",
    "concurrency_writers": "concurrency",
    "concurrency_inducers": "concurrency",
    "examples_launched": "examples",
}
"""Session fixtures that start a server, a browser or processes the tests talk to, and the
`xdist_group` of every test that uses one (itself or through another fixture): `make test`
distributes tests with `--dist loadgroup`, which runs a group's tests one after another on one
worker, so each of these starts once, ahead of its tests (AHEAD) and stops after its last
(STOP_AFTER_LAST_USE), as in one process. The harness's Prefect server is in none: its users
are many, spread over the workers, each of which starts one when its first user runs (and
stops it at its end)."""


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order_and_group(items, LAST, GROUPS)


# The command runs the session starts as it begins, once for all its processes.


def _docs_eval(work: Path) -> dict[str, Command]:
    if not WORKBENCH.exists():
        return {}
    argv = [sys.executable, "bench/eval_sets.py", str(WORKBENCH.parent), "--json"]
    return {"eval": Command(argv, cwd=Path(__file__).resolve().parents[1])}


def _demo_json(work: Path) -> dict[str, Command]:
    from tests.test_demo import demo_json_command

    return {"demo": demo_json_command(work)}


def _temporary_server_demo(work: Path) -> dict[str, Command]:
    from tests.test_demo import temporary_server_demo_command

    return {"demo": temporary_server_demo_command(work)}


def _determinism_children(work: Path) -> dict[str, Command]:
    from tests.test_determinism import TAU2, variant_commands

    return variant_commands() if WORKBENCH.exists() and TAU2.exists() else {}


def _bench_run(work: Path) -> dict[str, Command]:
    from tests.test_bench import bench_command

    return {"bench": bench_command(work)}


def _prefect_database(work: Path) -> dict[str, Command]:
    return {"upgrade": upgrade_command(work / "prefect.db")}


SESSION_RUNS: dict[str, tuple[Callable[[Path], dict[str, Command]], int]] = {
    "prefect_database": (_prefect_database, 0),
    "docs_eval": (_docs_eval, BACKGROUND_NICENESS),
    "demo_json": (_demo_json, BACKGROUND_NICENESS + 5),
    "temporary_server_demo": (_temporary_server_demo, BACKGROUND_NICENESS),
    "determinism_children": (_determinism_children, BACKGROUND_NICENESS + 5),
    "bench_run": (_bench_run, BACKGROUND_NICENESS + 5),
}
"""Fixtures that are command runs a module checks (`flowmem demo --json`, `flowmem bench`, the
shared sets' evaluation...): each starts as the session's tests are collected, when a selected
test uses it, in processes of its own at a niceness (a `SessionRun` each, named by its
function), and runs on the CPU the tests leave idle; the test waits for it at full priority.
Started once for every process of the session: the first pytest-xdist worker to claim it
starts it, any worker reads it; the pytest process that ran the session stops what is left."""


def pytest_configure(config: pytest.Config) -> None:
    open_session(config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the SESSION_RUNS the selected tests use, each unless another process has."""
    start_runs(session, SESSION_RUNS)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session's own process stops the SESSION_RUNS still running, and removes their files."""
    close_session(config)


@pytest.fixture(scope="session")
def prefect_database() -> Path:
    """A Prefect database with every migration applied (`prefect server database upgrade`), made
    once for the session: the tests' Prefect servers start on a copy of it (`seed_database`),
    as on a machine that ran one before, instead of each migrating a new database (~3.5 s of
    CPU each). The temporary-server demo and the bench start on a new one, as a first run does."""
    run = runs_of("prefect_database")["upgrade"]
    done = run.result()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return run.work / "prefect.db"


@pytest.fixture(scope="session")
def docs_eval() -> SessionRun | None:
    """`bench/eval_sets.py --json` for tests/test_docs_check.py, when the shared data is there."""
    return runs_of("docs_eval").get("eval")


@pytest.fixture(scope="session")
def demo_json() -> SessionRun:
    """tests/test_demo.py's acceptance run, `flowmem demo --json` (~25 s of CPU)."""
    return runs_of("demo_json")["demo"]


@pytest.fixture(scope="session")
def temporary_server_demo() -> SessionRun:
    """tests/test_demo.py's `make demo` on Prefect's temporary server of its own (it waits for
    that server as long as it takes: no bound a niced start could miss)."""
    return runs_of("temporary_server_demo")["demo"]


@pytest.fixture(scope="session")
def determinism_children() -> dict[str, SessionRun] | None:
    """tests/test_determinism.py's runs, one per CPU-kernel variant, inducing and evaluating the
    shared sets (when they are there)."""
    return runs_of("determinism_children") or None


@pytest.fixture(scope="session")
def bench_run() -> SessionRun:
    """`flowmem bench` at tiny sizes, for tests/test_bench.py."""
    return runs_of("bench_run")["bench"]


@pytest.fixture(scope="session")
def coexist_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, prefect_database: Path
) -> Iterator[tuple[subprocess.Popen[bytes], dict[str, str]]]:
    """The real Prefect server of tests/test_prefect_coexist.py (it takes ~10 s to come up;
    started ahead, see AHEAD; stopped after its last test, see STOP_AFTER_LAST_USE)."""
    from tests.test_prefect_coexist import start_server

    home = tmp_path_factory.mktemp("prefect-coexist")
    seed_database(prefect_database, home / "prefect")  # the server's PREFECT_HOME
    process, env = start_server(home)
    stop_after_last_use(request, "coexist_server", lambda: stop(process))
    yield process, env
    stop(process)


@pytest.fixture(scope="session")
def serve_schedule(
    tmp_path_factory: pytest.TempPathFactory, prefect_harness: None, prefect_database: Path
) -> Iterator[Any]:
    """tests/test_flows.py's `flowmem serve` that stops at Ctrl-C once its schedule fired, started
    a few tests ahead (see AHEAD), in the environment the flow tests have (`prefect_harness`).
    Not niced: it starts a local Prefect server, which has a bound on its start."""
    from tests.test_flows import ServeUntilCollected

    work = tmp_path_factory.mktemp("serve-schedule")
    seed_database(prefect_database, work / "prefect")  # its PREFECT_HOME: serve's own server's
    serving = ServeUntilCollected(work)
    yield serving
    serving.stop()
