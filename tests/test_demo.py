"""The demo: a simulated agent learns from its own runs; with memory beats without."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowmem.cli import app
from flowmem.demo.follower import bind
from flowmem.demo.listings import ContactHit, MailHit, render
from flowmem.jobs.factories import store_from
from flowmem.models import Workflow, WorkflowStep
from flowmem.settings import Settings
from tests.factories import docs_check_module as _module
from tests.prefect_servers import HarnessServer, stop
from tests.processes import READY_LIMIT, Command, CommandRun

HARNESS = pytest.mark.xdist_group("prefect")
"""The tests of the harness's Prefect server (tests/conftest.py), started once, on its worker;
the module's other tests (the direct engine's demo, the demo on a temporary server of its
own) use none of that worker's servers, and run on whichever worker is free."""


def test_bind_fills_placeholders_from_the_task_and_from_results() -> None:
    w = Workflow(
        id="w",
        name="w",
        steps=[
            WorkflowStep(action="mail.search", args={"query": "{query}"}),
            WorkflowStep(action="mail.forward", args={"email_id": "{email_id_2}", "to": "{to}"}),
            WorkflowStep(action="calendar.create_event", args={"start": "{start}", "kind": "demo"}),
        ],
        parameters={
            "query": "task",
            "email_id_2": "result of mail.search",
            "to": "result of contacts.lookup",
        },
    )
    slots = {"subject": "Q2 budget", "name": "Olga", "date": "2026-03-05", "time": "14:00", "kind": "x"}
    results = {
        "mail.search": render(
            [
                MailHit(id=f"em-{i}", sender="kai@corp.test", subject="Q2 budget", date=f"2026-03-0{i} 09:00")
                for i in (1, 2)
            ]
        ),
        "contacts.lookup": render([ContactHit(name="Olga", email="olga@corp.test", company="Corp")]),
    }
    assert bind(w, 0, slots, results) == {"query": "Q2 budget"}
    assert bind(w, 1, slots, results) == {"email_id": "em-2", "to": "olga@corp.test"}
    # The task's own value beats an example's constant.
    assert bind(w, 2, slots, results) == {"start": "2026-03-05 14:00", "kind": "x"}


class Background:
    """A command started now in a process of its own, its output kept in files."""

    def __init__(self, command: list[str], env: dict[str, str], tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        with (tmp_path / "stdout").open("w") as out, (tmp_path / "stderr").open("w") as err:
            self.process = subprocess.Popen(command, env=env, stdout=out, stderr=err, text=True)

    def result(self, timeout: float) -> subprocess.CompletedProcess[str]:
        """Wait for it to end; what it printed."""
        code = self.process.wait(timeout=timeout)
        stdout, stderr = ((self.tmp_path / name).read_text() for name in ("stdout", "stderr"))
        return subprocess.CompletedProcess(self.process.args, code, stdout, stderr)


def _docs_check() -> Any:

    return _module()


def demo_json_command(work: Path) -> Command:
    """The acceptance run, `flowmem demo --json` with its defaults (the cycle in the demo's
    process)."""
    options = ["--json", "--engine", "direct", "--workdir", str(work / "demo")]
    return Command([sys.executable, "-m", "flowmem.cli", "demo", *options])


@pytest.fixture(scope="module")
def demo_json(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CommandRun]:
    """`demo_json_command` in a process of its own (~25 s of CPU)."""
    run = CommandRun(demo_json_command(work := tmp_path_factory.mktemp("demo-json")), work)
    yield run
    run.stop()


@pytest.mark.slow
def test_demo_json_shows_the_agent_learning(demo_json: CommandRun) -> None:
    """The acceptance run: `flowmem demo --json` with its defaults (the cycle in-process)."""
    result = demo_json.result()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(result.stdout)
    rounds = report["rounds"]
    assert [r["round"] for r in rounds] == list(range(1, 9))
    first, last = rounds[0], rounds[-1]
    assert first["with_memory"] == first["without_memory"]  # nothing learned yet: the same agent
    assert last["with_memory"]["success_rate"] >= last["without_memory"]["success_rate"] + 0.2
    # Tool calls per task over the last three rounds: one round's figure moves by ±0.3 with
    # which versions happen to be on trial (seeds 0-3 measured), three rounds' mean does not.
    late = rounds[-3:]
    assert sum(r["with_memory"]["mean_steps"] for r in late) < sum(
        r["without_memory"]["mean_steps"] for r in late
    )
    assert last["followed"] > 0.5 and last["workflows"] > 10
    assert Path(report["plot"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # README's and docs/demo.md's demo tables and sentences say what this very command gives.
    check = _docs_check()
    sources = {"demo": check.demo_figures(report)}
    root = Path(__file__).resolve().parents[1]
    assert check.run_checks(check._demo_checks(), sources, root) == []
    assert check.run_prose(check._demo_prose(), sources, root) == []
    store = store_from(Settings(db=report["db"]))
    runs = list(store.iter_trajectories())
    assert len(runs) > 8 * 40  # the memory arm's runs, sub-runs included, recorded through the hooks
    served = [t for t in runs if t.workflows_used]
    assert served and all(t.source == "flowmem-sim" for t in served)
    # Outcomes flowed back: some versions were promoted, and the transition log shows it.
    assert any(w.status == "active" for w in store.list_workflows())
    # `flowmem search` on this store: a task from no known domain gets nothing (the default
    # relevance floor), one of the office's gets its workflow.
    env = {"FLOWMEM_DB": report["db"]}
    for task in ("what is the weather in Paris tomorrow", "translate 'good morning' into Spanish"):
        found = CliRunner().invoke(app, ["search", task, "--json"], env=env)
        assert found.exit_code == 0 and json.loads(found.stdout) == [], (task, found.output)
    found = CliRunner().invoke(app, ["search", "Cancel my next meeting with Dana", "--json"], env=env)
    assert "calendar.cancel_event" in [s["action"] for s in json.loads(found.stdout)[0]["steps"]]


def test_demo_prints_a_table_and_saves_the_plot(tmp_path: Path) -> None:
    args = ["demo", "--rounds", "2", "--tasks", "4", "--engine", "direct", "--workdir", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "flowmem demo" in result.stdout and "learning curve" in result.stdout
    assert (tmp_path / "learning_curve.png").exists()
    bad = CliRunner().invoke(app, ["demo", "--engine", "nope", "--workdir", str(tmp_path)])
    assert bad.exit_code == 2 and "unknown engine" in bad.output


def start_prefect_demo(tmp_path: Path, api_url: str) -> Background:
    """`make demo`'s command with the Prefect engine, on the Prefect server at `api_url`,
    started now."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "PREFECT_LOGGING"))}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    env["PREFECT_API_URL"] = api_url
    options = ["--rounds", "2", "--tasks", "12", "--workdir", str(tmp_path / "demo")]
    return Background([sys.executable, "-m", "flowmem.cli", "demo", *options], env, tmp_path)


@pytest.fixture(scope="module")
def prefect_demo(
    tmp_path_factory: pytest.TempPathFactory, harness_server: HarnessServer
) -> Iterator[Background]:
    """`start_prefect_demo` on the harness's server (tests/conftest.py), once that answers."""
    if not harness_server.healthy():
        pytest.fail("the harness's Prefect server exited before it answered")
    run = start_prefect_demo(tmp_path_factory.mktemp("prefect-demo"), harness_server.api_url)
    yield run
    stop(run.process)


@pytest.mark.slow
@HARNESS
def test_demo_runs_the_cycle_flow_between_rounds_and_prints_no_info_or_warning_lines(
    prefect_demo: Background,
) -> None:
    """`make demo`'s command with the Prefect engine, in a process of its own as `make demo`
    runs it (Prefect is imported inside the command), against the tests' one Prefect server
    (PREFECT_API_URL, as with `prefect server start`) rather than a temporary server of its
    own, whose start has no bound a loaded machine cannot exceed: the cycle flow runs between
    rounds, and the output has no run states, no server notices and no warning. Two rounds are
    the fewest with a cycle flow between them."""
    done = prefect_demo.result(timeout=READY_LIMIT)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "round 2:" in done.stderr and "learning curve" in done.stdout
    assert "workflows list" in done.stdout and "search" in done.stdout  # what to look at next
    noisy = [line for line in output.splitlines() if "INFO" in line or "warning" in line.lower()]
    assert not noisy, "\n".join(noisy)
    store = store_from(Settings(db=str(prefect_demo.tmp_path / "demo" / "db")))
    [run] = store.list_runs()  # one cycle, between the two rounds
    assert run.counts["versions_created"] > 0 and store.list_workflows()
    assert any(t.workflows_used for t in store.iter_trajectories() if "-r2-" in t.id)


def test_a_temporary_server_that_does_not_start_says_why_and_prints_nothing_itself(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """What the demo's temporary Prefect server prints goes to a file of its own (its shutdown
    logs a cancelled connection reset as an error), shown in the error when it fails to start."""
    from flowmem.flows.engine import TemporaryServer

    class Failing(TemporaryServer):
        def command(self) -> list[str]:
            return [sys.executable, "-c", "import sys; print('unable to open database file'); sys.exit(1)"]

    server = Failing()
    with pytest.raises(RuntimeError, match=r"server exited \(1\):\nunable to open database file$"):
        server.ready()
    server.stop()
    assert capfd.readouterr() == ("", "")


def temporary_server_demo_command(work: Path) -> Command:
    """`make demo` with no Prefect server configured."""
    tmp_path = work
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "PREFECT_LOGGING"))}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect"), "DO_NOT_TRACK": "1"}
    env |= {"PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = str(int(READY_LIMIT))
    options = ["--rounds", "3", "--tasks", "4", "--workdir", str(tmp_path / "demo")]
    return Command([sys.executable, "-m", "flowmem.cli", "demo", *options], env)


@pytest.fixture(scope="module")
def temporary_server_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CommandRun]:
    """`temporary_server_demo_command` in a process of its own."""
    run = CommandRun(temporary_server_demo_command(work := tmp_path_factory.mktemp("demo")), work)
    yield run
    run.stop()


@pytest.mark.slow
def test_the_prefect_demo_runs_its_cycles_on_a_temporary_server_of_its_own(
    temporary_server_demo: CommandRun,
) -> None:
    """`make demo` with no Prefect server configured: the demo starts Prefect's temporary
    server (on PREFECT_HOME's database) as it begins, runs each cycle there as one flow run
    with its task runs, and leaves no server behind."""
    import sqlite3

    tmp_path = temporary_server_demo.work  # temporary_server_demo_command's
    done = temporary_server_demo.result()
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "learning curve" in done.stdout, output[-3000:]
    assert not [line for line in output.splitlines() if "INFO" in line or "error" in line.lower()]
    with sqlite3.connect(tmp_path / "prefect" / "prefect.db") as db:
        flows = db.execute("SELECT f.name, r.state_type FROM flow_run r JOIN flow f ON f.id = r.flow_id")
        assert flows.fetchall() == [("flowmem-cycle", "COMPLETED")] * 2  # one flow run per cycle
        tasks = db.execute("SELECT name, state_type FROM task_run").fetchall()
    assert {name.rsplit("-", 1)[0] for name, _ in tasks} >= {
        "collect_files",
        "plan_run",
        "commit",
        "fold_outcomes",
    }
    assert {state for _, state in tasks} == {"COMPLETED"}
    assert not _processes_with(f"PREFECT_HOME={tmp_path / 'prefect'}")  # the server stopped with it


def _processes_with(variable: str) -> list[int]:
    """The processes whose environment holds `variable` (NAME=value)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if variable.encode() in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found
