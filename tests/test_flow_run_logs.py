"""What `flowmem run` shows on stderr: `quiet_logs` (no Dask INFO lines; with --json no Prefect
INFO lines either), `-v` for both. The real command on a Dask cluster, stderr empty with
--json, is tests/test_dask_cluster.py's."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from flowmem.cli import app
from flowmem.cli.flows import quiet_logs

VARIABLES = (
    "DASK_LOGGING__DISTRIBUTED",
    "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL",
    "PREFECT_LOGGING_HANDLERS_CONSOLE_FLOW_RUNS_LEVEL",
)


@pytest.fixture
def unset(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("as_json", "expected"),
    [
        (True, {"DASK_LOGGING__DISTRIBUTED": "warning"} | dict.fromkeys(VARIABLES[1:], "WARNING")),
        (False, {"DASK_LOGGING__DISTRIBUTED": "warning"}),  # Prefect's flow and task run states stay
    ],
)
def test_without_v_dask_says_only_warnings_and_with_json_prefect_too(
    unset: pytest.MonkeyPatch, as_json: bool, expected: dict[str, str]
) -> None:
    quiet_logs(as_json)
    assert {name: os.environ[name] for name in VARIABLES if name in os.environ} == expected


def test_a_level_already_set_wins(unset: pytest.MonkeyPatch) -> None:
    unset.setenv("DASK_LOGGING__DISTRIBUTED", "debug")
    unset.setenv("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "INFO")
    quiet_logs(as_json=True)
    assert os.environ["DASK_LOGGING__DISTRIBUTED"] == "debug"
    assert os.environ["PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL"] == "INFO"


def test_run_offers_v_for_the_logs() -> None:
    shown = CliRunner().invoke(app, ["run", "--help"], terminal_width=200).output
    assert "-v" in shown and "--verbose" in shown
