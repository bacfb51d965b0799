"""What the CLI shows a person: help without Python types or cut summaries (every command
walked at 80 columns), one flag for the reason of a status change, choices listed, ids whole
at 80 columns, progress on a terminal only."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer.main
from rich.console import Console
from typer.testing import CliRunner

from flowmem.cli import app, common
from flowmem.cli.flows import DEPLOYED, FLOWS
from flowmem.cli.lifecycle import STATUSES
from flowmem.demo import simulate
from flowmem.interchange import write_jsonl
from flowmem.jobs.factories import INDUCERS, store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import InductionRun, Trajectory
from flowmem.settings import Settings
from tests.factories import make_workflow

runner = CliRunner()

PYTHON_TYPES = re.compile(
    r"<(?:str|int|float|bool|path|file|uuid|datetime|int range|float range|\w+\[[^>]*\])>"  # typer's types
    r"|\{[a-z_]+\}"  # typer's required argument, `{files}`
    r"|\b(?:list|tuple|dict|Optional|Union)\[|\bNoneType\b|\bPosixPath\b"
)
"""What Python, not a person, would write in help."""


def commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command and group under `group` (typer's click commands), with the words that
    invoke it."""
    found: list[tuple[tuple[str, ...], Any]] = [(path, group)]
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found += commands(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


def help_of(*words: str) -> str:
    result = runner.invoke(
        app, [*words, "--help"], prog_name="flowmem", env={"COLUMNS": "80"}, terminal_width=80
    )
    assert result.exit_code == 0, (words, result.output)
    return result.output


def first_sentence(command: Any) -> str:
    return " ".join(command.get_short_help_str(limit=10_000).split())


def listed(help_text: str) -> dict[str, str]:
    """A group's help: each command of its Commands section with its summary, lines joined."""
    rows: dict[str, str] = {}
    name = ""
    for line in help_text.split("Commands:\n")[1].splitlines():
        if re.match(r"^  \S", line):
            name, _, text = line.strip().partition(" ")
            rows[name] = text.strip()
        elif line.strip():
            rows[name] += " " + line.strip()
    return rows


def test_every_help_names_values_as_people_do_and_no_summary_is_cut() -> None:
    root = typer.main.get_command(app)
    walked = commands(root)
    assert len(walked) >= 30  # every command and group of the app, not a sample
    for words, command in walked:
        text = help_of(*words)
        assert not PYTHON_TYPES.search(text), (words, PYTHON_TYPES.search(text))
        if hasattr(command, "commands"):
            rows = listed(text)
            for name, sub in command.commands.items():
                summary = first_sentence(sub)
                assert rows[name] == summary, (words, name)
                assert not rows[name].endswith("...") and not rows[name].endswith("…"), (words, name)


def test_help_shows_arguments_as_people_type_them() -> None:
    assert "Usage: flowmem ingest [OPTIONS] FILE...\n" in help_of("ingest")
    assert "Usage: flowmem workflows diff [OPTIONS] WORKFLOW_ID OLD NEW\n" in help_of("workflows", "diff")
    assert "--from FILE " in help_of("induce") and "--interval SECONDS " in help_of("serve")


@pytest.mark.parametrize(
    ("words", "option", "values"),
    [
        (("workflows", "list"), "--status", STATUSES),
        (("induce",), "--inducer", tuple(INDUCERS)),
        (("eval",), "--inducer", tuple(INDUCERS)),
        (("run",), "--inducer", tuple(INDUCERS)),
        (("demo",), "--engine", ("prefect", "direct")),
        (("serve",), "--only", DEPLOYED),
    ],
)
def test_an_option_with_choices_lists_every_one(
    words: tuple[str, ...], option: str, values: tuple[str, ...]
) -> None:
    assert f"{option} [{'|'.join(values)}]" in help_of(*words)


def test_the_lists_of_choices_are_the_ones_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from flowmem.flows import serve
    from flowmem.flows.serve import DEPLOYMENTS

    served: list[object] = []
    monkeypatch.setattr(serve, "serve", lambda **kw: served.append(kw))  # never a real server here

    assert STATUSES == ("candidate", "active", "deprecated", "retired")
    assert DEPLOYED == tuple(d.name for d in DEPLOYMENTS)
    assert all(f in help_of("run") for f in FLOWS)
    result = runner.invoke(app, ["serve", "--only", "bogus"])
    assert result.exit_code == 2 and "unknown deployment 'bogus': use collect, induce, learn" in result.output
    assert served == []


def store_with_two_runs(tmp_path: Path) -> dict[str, str]:
    db = tmp_path / "db"
    store = store_from(Settings(db=str(db)))
    store.commit_run(InductionRun(id="r1"), [make_workflow(version=1)])
    store.commit_run(InductionRun(id="r2"), [make_workflow(version=2, steps=3)])
    return {"FLOWMEM_DB": str(db), "FLOWMEM_NAMESPACE": "default"}


def test_every_status_change_takes_its_reason_as_why(tmp_path: Path) -> None:
    for verb in ("promote", "deprecate", "retire", "rollback"):
        text = help_of("workflows", verb)
        assert "--why TEXT" in text and "--note" not in text, verb
    env = store_with_two_runs(tmp_path)
    done = runner.invoke(app, ["workflows", "rollback", "r2", "--why", "drifted", "--json"], env=env)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["note"] == "drifted"
    runs = json.loads(runner.invoke(app, ["workflows", "runs", "--json"], env=env).stdout)
    assert runs[-1]["note"] == "drifted" and runs[-1]["rolled_back_run"] == "r2"


def test_note_is_a_deprecated_name_of_why(tmp_path: Path) -> None:
    env = store_with_two_runs(tmp_path)
    both = runner.invoke(app, ["workflows", "rollback", "r2", "--why", "a", "--note", "b"], env=env)
    assert both.exit_code == 2 and "--note is the old name of --why" in both.output
    old = runner.invoke(app, ["workflows", "rollback", "r2", "--note", "drifted", "--json"], env=env)
    assert old.exit_code == 0 and "--note is deprecated: use --why" in old.stderr
    assert json.loads(old.stdout)["note"] == "drifted"


LONG_IDS = [f"workbench/customer_relationship_manager/gpt-4_domain/{i:04d}" for i in range(3)]
"""WorkBench's ids: 57 characters, more than a third of an 80-column terminal."""


def test_trajectories_list_shows_whole_ids_at_80_columns(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "db"))
    runs = [
        Trajectory.model_validate(
            {
                "id": i,
                "agent": "crm_agent",
                "task": "Delete the latest email about the roadmap " * 3,
                "steps": [],
            }
        )
        for i in LONG_IDS
    ] + [
        Trajectory.model_validate({"id": "short-1", "agent": "email_agent", "task": "Email Sam", "steps": []})
    ]
    store_trajectories(store_from(settings), runs, settings.scrub)
    # In this process (rich reads COLUMNS when it draws; the output is no terminal, as a pipe's).
    env = {"FLOWMEM_DB": settings.db, "COLUMNS": "80", "FLOWMEM_NAMESPACE": "default"}

    def shown_by(*args: str) -> str:
        result = runner.invoke(app, ["trajectories", "list", *args], env=env)
        assert result.exit_code == 0, result.output
        return result.stdout

    shown = shown_by()
    lines = shown.splitlines()
    assert all(len(line) <= 80 for line in lines)
    for i in [*LONG_IDS, "short-1"]:
        assert any(line.strip() == i for line in lines), i  # alone on its line, whole: it can be copied
    assert "crm_agent · ? · 0 steps" in shown and "Delete the latest email about the roadmap" in shown
    table = shown_by("--agent", "email_agent")
    assert re.search(r"│ short-1 +│ email_agent +│ Email Sam", table)  # the columns fit: a table


class Terminal:
    """stderr as a terminal: what a person at one sees of the progress display."""

    def __init__(self) -> None:
        self.file = io.StringIO()
        self.console = Console(file=self.file, force_terminal=True, width=80)

    def seen(self) -> str:
        """What was drawn since the last `clear`, without the terminal's control sequences."""
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.file.getvalue())

    def clear(self) -> None:
        self.file.seek(0)
        self.file.truncate(0)


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Terminal:
    shown = Terminal()
    monkeypatch.setattr(common, "err", shown.console)
    return shown


def demo_runs(path: Path, n: int, seed: int) -> Path:
    write_jsonl(path, simulate(n, seed=seed))
    return path


def test_induce_shows_its_progress_on_a_terminal_only(tmp_path: Path, terminal: Terminal) -> None:
    env = {"FLOWMEM_DB": str(tmp_path / "db"), "FLOWMEM_NAMESPACE": "default"}
    runs = demo_runs(tmp_path / "runs.jsonl", 60, 0)
    assert runner.invoke(app, ["ingest", str(runs)], env=env).exit_code == 0
    terminal.clear()
    done = runner.invoke(app, ["induce"], env=env)
    assert done.exit_code == 0, done.output
    clusters = re.search(r"of (\d+) clusters induced", done.stdout)
    assert clusters is not None
    n = clusters.group(1)
    assert "induce planning: which clusters changed" in terminal.seen()
    assert "induce inducing clusters" in terminal.seen() and f"{n}/{n}" in terminal.seen()
    terminal.clear()
    as_json = runner.invoke(app, ["induce", "--all", "--json"], env=env)
    assert as_json.exit_code == 0 and json.loads(as_json.stdout)["clusters_changed"] > 0
    assert terminal.seen() == ""  # --json: no progress, even on a terminal


def test_eval_shows_its_phases_on_a_terminal_only(tmp_path: Path, terminal: Terminal) -> None:
    train, test = demo_runs(tmp_path / "train.jsonl", 60, 0), demo_runs(tmp_path / "test.jsonl", 10, 1)
    args: list[Any] = ["eval", "--train", str(train), "--test", str(test)]
    done = runner.invoke(app, args, env={"FLOWMEM_DB": str(tmp_path / "db")})
    assert done.exit_code == 0, done.output
    shown = terminal.seen()
    n, m = (len(f.read_text().splitlines()) for f in (train, test))  # sub-runs included
    for phase in (
        f"storing {n} training runs",
        f"inducing from {n} runs",
        f"retrieving for {m} test tasks",
        "scoring",
    ):
        assert f"eval {phase}" in shown, phase
    terminal.clear()
    assert runner.invoke(app, [*args, "--json"], env={"FLOWMEM_DB": str(tmp_path / "db")}).exit_code == 0
    assert terminal.seen() == ""
