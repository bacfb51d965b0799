"""Every CLI error a user can cause is one clear line with a hint, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowmem.cli import app
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings
from tests.test_cli import good

runner = CliRunner()


def run(tmp_path: Path, *args: str, **env: str) -> tuple[int, list[str]]:
    base = {"FLOWMEM_DB": str(tmp_path / "db"), "FLOWMEM_NAMESPACE": "default", "FLOWMEM_LLM_MODEL": ""}
    result = runner.invoke(app, list(args), env=base | env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result.exit_code, result.output.splitlines()


@pytest.fixture
def filled(tmp_path: Path) -> Path:
    data = tmp_path / "runs.jsonl"
    data.write_text("".join(good(i) + "\n" for i in range(1, 9)))
    assert run(tmp_path, "ingest", str(data))[0] == 0
    return tmp_path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("ingest", "missing.jsonl"), "error: no such file: missing.jsonl"),
        (("induce", "--from", "missing.jsonl"), "error: no such file: missing.jsonl"),
        (
            ("eval", "--train", "missing.jsonl", "--test", "missing.jsonl"),
            "error: no such file: missing.jsonl",
        ),
    ],
)
def test_a_missing_file(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    code, lines = run(tmp_path, *args)
    assert code == 2 and lines[0].startswith(expected) and len(lines) == 1


def test_a_bad_json_line_is_reported_with_its_place_and_the_rest_is_stored(tmp_path: Path) -> None:
    data = tmp_path / "runs.jsonl"
    data.write_text(good(1) + "\n{bad\n")
    code, lines = run(tmp_path, "ingest", str(data))
    assert code == 1
    assert (
        lines[0]
        == f"rejected {data}:2: malformed JSON: Expecting property name enclosed in double quotes at column 2"
    )
    assert lines[1].startswith("stored 1, rejected 1 (see ") and len(lines) == 2


def test_no_store_at_the_path_and_reading_creates_none(tmp_path: Path) -> None:
    for args in (
        ("search", "send the report"),
        ("workflows", "list"),
        ("trajectories", "count"),
        ("export", "skills", str(tmp_path / "s")),
    ):
        code, lines = run(tmp_path, *args)
        assert code == 2 and len(lines) == 1, (args, lines)
        hint = "create one with `flowmem ingest FILE.jsonl`, or set FLOWMEM_DB"
        assert lines[0] == f"error: no store at {tmp_path / 'db'}: {hint}"
    assert not (tmp_path / "db").exists()


def test_a_typo_in_the_store_path_gets_the_nearest_name(filled: Path) -> None:
    code, lines = run(filled, "workflows", "list", FLOWMEM_DB=str(filled / "dv"))
    assert code == 2 and lines[0].startswith(
        f"error: no store at {filled / 'dv'} (did you mean {filled / 'db'}?)"
    )


def test_an_empty_store(tmp_path: Path) -> None:
    assert store_from(Settings(db=str(tmp_path / "db"))).namespaces() == []  # a store, holding nothing
    code, lines = run(tmp_path, "search", "send the report")
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: the store at {tmp_path / 'db'} is empty: `flowmem ingest FILE.jsonl`")


def test_an_unknown_namespace(filled: Path) -> None:
    code, lines = run(filled, "workflows", "list", FLOWMEM_NAMESPACE="prod")
    expected = f"error: namespace 'prod' holds nothing in {filled / 'db'}: set FLOWMEM_NAMESPACE to one of"
    assert (code, lines) == (2, [f"{expected} default"])


def test_a_namespace_with_runs_but_no_workflows_yet(filled: Path) -> None:
    code, lines = run(filled, "search", "send the report")
    assert (code, lines) == (
        1,
        ["error: no workflows in namespace 'default' yet: run `flowmem induce` first"],
    )


def test_no_llm_configured(filled: Path) -> None:
    code, lines = run(filled, "induce", "--inducer", "llm")
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: no LLM configured: set FLOWMEM_LLM_MODEL")
    assert lines[0].endswith("(or --inducer rule, which needs no LLM)")


def test_an_invalid_setting(tmp_path: Path) -> None:
    code, lines = run(tmp_path, "workflows", "list", FLOWMEM_NAMESPACE="bad ns!")
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: FLOWMEM_NAMESPACE='bad ns!' is not valid: String should match pattern")


@pytest.mark.parametrize("args", [("run", "induce"), ("serve",)])
def test_an_unreachable_prefect_server(filled: Path, args: tuple[str, ...]) -> None:
    code, lines = run(filled, *args, PREFECT_API_URL="http://127.0.0.1:9/api")
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(
        "error: cannot reach the Prefect server at PREFECT_API_URL=http://127.0.0.1:9/api"
    )
    assert lines[0].endswith("or unset PREFECT_API_URL to run on a temporary local server")


def test_a_non_numeric_setting(tmp_path: Path) -> None:
    code, lines = run(tmp_path, "induce", FLOWMEM_MIN_CLUSTER_SIZE="abc")
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: FLOWMEM_MIN_CLUSTER_SIZE='abc' is not valid")


def run_debug(tmp_path: Path, *args: str, **env: str) -> tuple[int, str]:
    base = {"FLOWMEM_DB": str(tmp_path / "db"), "FLOWMEM_NAMESPACE": "default", "FLOWMEM_LLM_MODEL": ""}
    result = runner.invoke(app, list(args), env=base | env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


DEBUG_CASES = [
    # (args, env, the error line begins, what the traceback shows: the exception or the place)
    (
        ("workflows", "list"),
        {"FLOWMEM_NAMESPACE": "bad ns!"},
        "error: FLOWMEM_NAMESPACE='bad ns!' is not valid",
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for Settings",
    ),
    (
        ("induce",),
        {"FLOWMEM_MIN_CLUSTER_SIZE": "abc"},
        "error: FLOWMEM_MIN_CLUSTER_SIZE='abc' is not valid",
        "ValidationError",
    ),
    (("workflows", "list"), {}, "error: no store at ", "in open_existing"),
    (("ingest", "missing.jsonl"), {}, "error: no such file: missing.jsonl", "in ingest"),
    (("induce", "--inducer", "llm"), {}, "error: no LLM configured", "ValueError: no LLM configured"),
    (
        ("run", "induce"),
        {"PREFECT_API_URL": "http://127.0.0.1:9/api"},
        "error: cannot reach the Prefect server at PREFECT_API_URL=http://127.0.0.1:9/api",
        "httpx.ConnectError",
    ),
    (
        ("serve",),
        {"PREFECT_API_URL": "http://127.0.0.1:9/api"},
        "error: cannot reach the Prefect server",
        "httpx.ConnectError",
    ),
]


@pytest.mark.parametrize(("args", "env", "expected", "shown"), DEBUG_CASES)
def test_with_debug_the_same_error_comes_with_its_traceback(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], expected: str, shown: str
) -> None:
    code, plain = run_debug(tmp_path, *args, **env)
    assert code != 0 and len(plain.splitlines()) == 1 and plain.startswith(expected)

    code_debug, output = run_debug(tmp_path, "--debug", *args, **env)
    assert code_debug == code  # the same failure, told at length
    lines = output.splitlines()
    assert lines[-1] == plain.rstrip("\n")  # the one line comes last, as it did alone
    header = (
        "Stack (most recent call last):" if shown.startswith("in ") else "Traceback (most recent call last):"
    )
    assert lines[0] == header, output
    assert any(line.startswith('  File "') and "flowmem" in line for line in lines)
    assert shown in output, output


def test_flowmem_debug_in_the_environment_is_the_same_as_the_flag(tmp_path: Path) -> None:
    code, output = run_debug(tmp_path, "workflows", "list", FLOWMEM_DEBUG="1")
    assert code == 2 and output.startswith("Stack (most recent call last):")
    assert output.splitlines()[-1].startswith("error: no store at ")
    assert run_debug(tmp_path, "workflows", "list", FLOWMEM_DEBUG="0")[1].startswith("error: no store at ")
