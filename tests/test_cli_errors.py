"""Every CLI error a user can cause is one clear line with a hint, never a traceback."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import time
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from flowmem.agents import WorkflowMemory
from flowmem.cli import app
from flowmem.cli.errors import explain
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import ingest_files
from flowmem.settings import Settings
from tests.bounds import idle_bound
from tests.factories import good
from tests.llm_stub import LLMStub

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


# -- every user mistake of issue 25 (item 4): one line on stderr, a non-zero exit, no traceback --


def flowmem(cwd: Path, *args: str, **env: str) -> tuple[int, str, list[str]]:
    """Run the real `flowmem` command in a process of its own: (exit code, stdout, stderr lines)."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("FLOWMEM_")}
    base = {"FLOWMEM_DB": str(cwd / "db"), "LANCEDB_LOG": "error"}
    done = subprocess.run(
        [sys.executable, "-m", "flowmem.cli", *args],
        cwd=cwd,
        env=clean | base | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr.splitlines()


def assert_one_line(code: int, stderr: list[str], *names: str) -> str:
    """The contract: non-zero, exactly one non-empty stderr line, no traceback, names given."""
    assert code != 0, stderr
    assert [line for line in stderr if line.strip()] == stderr and len(stderr) == 1, stderr
    line = stderr[0]
    assert "Traceback" not in line
    for name in names:
        assert name in line, (name, line)
    return line


def fill(db: Path, *, first: int = 1, n: int = 8) -> None:
    """A store holding `n` good runs (ingested in this process, which is faster)."""
    data = db.parent / f"runs{first}.jsonl"
    data.write_text("".join(good(i) + "\n" for i in range(first, first + n)))
    settings = Settings(db=str(db))
    report = ingest_files([data], store_from(settings), settings)
    assert report.stored == n


def _corrupt_deflate(path: Path) -> None:
    """A gzip file whose compressed data is damaged (zlib fails inside the stream)."""
    blob = bytearray(gzip.compress("".join(good(i) + "\n" for i in range(1, 9)).encode()))
    blob[30] ^= 0x55
    path.write_bytes(bytes(blob))


MISTAKES: list[
    tuple[str, tuple[str, ...], dict[str, str], Callable[[Path], object] | None, tuple[str, ...]]
] = [
    # (case, args, env, setup in the working directory, what the line must name)
    (
        "scrub-as-comma-list",
        ("workflows", "list"),
        {"FLOWMEM_SCRUB": "secrets,cards,emails"},
        None,
        ("FLOWMEM_SCRUB='secrets,cards,emails'", "JSON list", """'["secrets", "cards", "emails"]'"""),
    ),
    (
        "import-paths-not-json",
        ("workflows", "list"),
        {"FLOWMEM_IMPORT_PATHS": "foo"},
        None,
        ("FLOWMEM_IMPORT_PATHS='foo'", "JSON list"),
    ),
    (
        "scrub-unknown-kind",
        ("workflows", "list"),
        {"FLOWMEM_SCRUB": '["bogus"]'},
        None,
        ("FLOWMEM_SCRUB=", "'bogus'", "'secrets', 'cards', 'emails' or 'phones'"),
    ),
    (
        "db-is-a-file",
        ("ingest", "runs.jsonl"),
        {"FLOWMEM_DB": "runs.jsonl"},
        lambda cwd: (cwd / "runs.jsonl").write_text(good(1) + "\n"),
        ("FLOWMEM_DB='runs.jsonl'", "is a file", "local directory path", "s3://"),
    ),
    (
        "db-sqlite-uri",
        ("induce",),
        {"FLOWMEM_DB": "sqlite:///memory.db"},
        None,
        ("FLOWMEM_DB='sqlite:///memory.db'", "sqlite://", "local directory path", "s3://"),
    ),
    (
        "gz-not-gzipped",
        ("ingest", "runs.jsonl.gz"),
        {},
        lambda cwd: (cwd / "runs.jsonl.gz").write_text(good(1) + "\n"),
        ("runs.jsonl.gz", "not a gzip file", "JSONL, plain or gzipped"),
    ),
    (
        "gz-corrupt-data",
        ("ingest", "runs.jsonl.gz"),
        {},
        lambda cwd: _corrupt_deflate(cwd / "runs.jsonl.gz"),
        ("runs.jsonl.gz", "not a valid gzip file", "JSONL, plain or gzipped"),
    ),
    (
        "unknown-status",
        ("workflows", "list", "--status", "bogus"),
        {},
        lambda cwd: fill(cwd / "db"),
        ("'bogus'", "candidate, active, deprecated, retired"),
    ),
]


@pytest.mark.parametrize(
    ("args", "env", "setup", "names"), [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES]
)
def test_a_user_mistake_is_one_line(
    tmp_path: Path,
    args: tuple[str, ...],
    env: dict[str, str],
    setup: Callable[[Path], object] | None,
    names: tuple[str, ...],
) -> None:
    if setup is not None:
        setup(tmp_path)
    code, _, stderr = flowmem(tmp_path, *args, **env)
    line = assert_one_line(code, stderr, *names)
    assert "FLOWMEM_SCRUB_0" not in line and "malformed JSON" not in line


@pytest.mark.parametrize("command", ["dashboard", "api"])
def test_a_port_in_use_is_one_line_before_uvicorn_starts(tmp_path: Path, command: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, stdout, stderr = flowmem(tmp_path, command, "--port", str(port), FLOWMEM_API_HOST="127.0.0.1")
    assert_one_line(code, stderr, f"cannot listen on 127.0.0.1:{port}", "Address already in use", "--port")
    assert stdout == ""  # nor the dashboard's address, nor uvicorn's startup lines


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[Path]:
    """A store with runs and no workflows, in a directory this process cannot write: made
    read-only by a bind mount as root (chmod does not stop root), by chmod otherwise."""
    folder = tmp_path / "ro"
    folder.mkdir()
    fill(folder / "db")
    if os.geteuid() == 0:
        mounted = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
        if mounted.returncode != 0:
            pytest.skip(f"cannot bind-mount here to make a read-only store: {mounted.stderr!r}")
        ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True)
        undo = [["umount", str(folder)]]
        if ro.returncode != 0:
            subprocess.run(undo[0], check=True)
            pytest.skip(f"cannot remount read-only here: {ro.stderr!r}")
    else:
        paths = [folder, *folder.rglob("*")]
        for p in paths:
            p.chmod(p.stat().st_mode & ~0o222)
        undo = [["chmod", "-R", "u+w", str(folder)]]
    try:
        try:
            (folder / "probe").touch()
        except OSError:
            yield folder / "db"
        else:
            pytest.skip("this process can still write the read-only store")
    finally:
        for command in undo:
            subprocess.run(command, check=True)


@pytest.mark.parametrize("args", [("ingest", "more.jsonl"), ("induce",)], ids=["ingest", "induce"])
def test_a_read_only_store_is_one_line(tmp_path: Path, read_only_store: Path, args: tuple[str, ...]) -> None:
    (tmp_path / "more.jsonl").write_text("".join(good(i) + "\n" for i in range(20, 24)))
    code, _, stderr = flowmem(tmp_path, *args, FLOWMEM_DB=str(read_only_store))
    line = assert_one_line(
        code, stderr, f"the store at {read_only_store}: ", "a location this process may write"
    )
    assert "Read-only file system" in line or "Permission denied" in line


# -- every setting, by construction: a badly typed FLOWMEM_<FIELD> is one line naming it ---------

FREE_FORM = {
    *("embedding_model", "llm_model", "llm_api_key", "api_token", "api_host"),
    *("s3_region", "s3_access_key_id", "s3_secret_access_key", "s3_session_token"),
}
"""Settings any string is a value of (names, secrets, a host): no badly typed value exists."""


def bad_strings(tmp_path: Path) -> dict[str, str]:
    """Bad values of the string settings that are checked."""
    (tmp_path / "a-file").write_text("x")
    return {
        "db": str(tmp_path / "a-file"),
        "namespace": "bad ns!",
        "quarantine": str(tmp_path),
        "spool": str(tmp_path / "a-file"),
        "ann_cache": str(tmp_path / "a-file"),
        "llm_base_url": "localhost:8000",
        "dask_address": "127.0.0.1:8786",
        "s3_endpoint": "127.0.0.1:9000",
        "storage_options": "aws_region=eu-west-1",
        "embedder_path": str(tmp_path / "a-file"),
    }


def bad_value(name: str, annotation: Any, strings: dict[str, str]) -> str:
    """A value of the wrong type for a setting, from its annotation (or `strings`)."""
    if name in strings:
        return strings[name]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]  # optional: its one type
    if annotation is bool:
        return "maybe"
    if annotation in (int, float):
        return "many"
    if typing.get_origin(annotation) is typing.Literal:
        return "bogus"
    if typing.get_origin(annotation) is list:
        return "a,b"
    raise AssertionError(
        f"FLOWMEM_{name.upper()} ({annotation}) has no bad value here: add one to bad_strings or FREE_FORM"
    )


@pytest.mark.parametrize("field", sorted(set(Settings.model_fields) - FREE_FORM))
def test_every_setting_with_a_bad_value_is_one_line_naming_its_variable(tmp_path: Path, field: str) -> None:
    name = f"FLOWMEM_{field.upper()}"
    value = bad_value(field, Settings.model_fields[field].annotation, bad_strings(tmp_path))
    env = {"FLOWMEM_DB": str(tmp_path / "db"), name: value}
    result = CliRunner().invoke(app, ["trajectories", "count"], env=env)
    assert isinstance(result.exception, SystemExit), result.exception  # not an exception shown
    stderr = result.stderr.splitlines()
    assert_one_line(result.exit_code, stderr, f"error: {name}={value!r}")
    assert f"{name}_" not in stderr[0] and result.stdout == ""


@pytest.mark.parametrize("field", sorted(FREE_FORM))
def test_a_free_form_setting_takes_any_string(field: str) -> None:
    annotation = Settings.model_fields[field].annotation
    assert {str, SecretStr} & {annotation, *typing.get_args(annotation)}
    value: dict[str, Any] = {field: "any thing: 1, [2]"}
    assert Settings(**value) is not None


# -- the same mistakes through the library ---------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "why"),
    [
        ("sqlite:///memory.db", "sqlite:// is not a scheme"),
        ("memory://", "an in-memory database"),
        ("a-file", "it is a file, not a directory"),
        ("a-file/db", "a-file is a file, not a directory"),
    ],
)
@pytest.mark.parametrize("how", ["constructor", "open"])
def test_workflow_memory_says_what_a_store_location_may_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, location: str, why: str, how: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ValueError) as raised:  # a StoreLocationError is one
        WorkflowMemory(location) if how == "constructor" else WorkflowMemory.open(location)
    assert type(raised.value).__name__ == "StoreLocationError"
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{location!r} cannot be a store location: {why}")
    assert message.endswith(
        "use a local directory path, or a URI of file://, s3://, s3+ddb://, gs://, az:// or abfss://"
    )
    assert raised.value.__cause__ is None and raised.value.__context__ is None


def test_a_store_location_error_inside_a_command_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The top level, past the check before a command: the library's error is one line too."""
    monkeypatch.setattr("flowmem.cli.errors.path_problems", lambda settings: None)
    (tmp_path / "a-file").write_text("x")
    code, lines = run(tmp_path, "induce", FLOWMEM_DB=str(tmp_path / "a-file"))
    assert code == 1 and lines == [
        f"error: FLOWMEM_DB: {str(tmp_path / 'a-file')!r} cannot be a store location: it is a file, "
        "not a directory; use a local directory path, or a URI of file://, s3://, s3+ddb://, gs://, "
        "az:// or abfss://"
    ]


def test_a_bug_keeps_its_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what a user can cause becomes one line: an error of the code still shows where."""

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr("flowmem.cli.ingest.ingest_files", broken)
    (tmp_path / "runs.jsonl").write_text(good(1) + "\n")
    result = runner.invoke(
        app, ["ingest", str(tmp_path / "runs.jsonl")], env={"FLOWMEM_DB": str(tmp_path / "db")}
    )
    assert isinstance(result.exception, KeyError)
    for error in (BrokenPipeError(32, "Broken pipe"), RuntimeError("lance error: something else")):
        assert explain(error) is None


# -- issue 39: an LLM that cannot serve, and inputs that hold nothing: one line each ----------------

LIMIT = 10.0
"""Seconds a command may take to say so (the process's start included)."""


def command(cwd: Path, *args: str, limit: float | None = LIMIT, **env: str) -> tuple[int, str, list[str]]:
    """The real `flowmem` in a process of its own (no FLOWMEM_*, OPENAI_*, AWS_* or proxy variable
    but `env`), within `limit` seconds: (exit code, stdout, stderr lines)."""
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith(("FLOWMEM_", "OPENAI_", "AWS_")) and not k.lower().endswith("_proxy")
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "flowmem.cli", *args],
        cwd=cwd,
        env=clean | {"FLOWMEM_DB": str(cwd / "db"), "LANCEDB_LOG": "error"} | env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.monotonic() - started
    assert limit is None or seconds < idle_bound(limit), (args, seconds, os.getloadavg())
    return done.returncode, done.stdout, done.stderr.splitlines()


def test_an_llm_without_a_key_is_one_line_before_any_call(tmp_path: Path) -> None:
    fill(tmp_path / "db")
    code, _, stderr = command(tmp_path, "induce", "--inducer", "llm", FLOWMEM_LLM_MODEL="gpt-4o-mini")
    line = assert_one_line(code, stderr, "no API key", "https://api.openai.com/v1", "FLOWMEM_LLM_API_KEY")
    assert code == 2 and "OPENAI_API_KEY" in line and "FLOWMEM_LLM_BASE_URL" in line


def test_an_llm_endpoint_that_does_not_answer_is_one_line_naming_it(tmp_path: Path) -> None:
    fill(tmp_path / "db")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: it refuses connections
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        code, _, stderr = command(
            tmp_path, "induce", "--inducer", "llm", FLOWMEM_LLM_MODEL="m", FLOWMEM_LLM_BASE_URL=url
        )
    assert_one_line(code, stderr, f"the LLM endpoint {url} does not answer", "FLOWMEM_LLM_BASE_URL")
    assert code == 2


def test_an_llm_endpoint_that_answers_nothing_is_one_line_within_the_check_timeout(tmp_path: Path) -> None:
    """A server that takes the connection and never answers: the check gives up in its own
    timeout (FLOWMEM_LLM_CHECK_TIMEOUT, 3 s), not the calls' `llm_timeout` and retries."""
    fill(tmp_path / "db")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts (the kernel does), never reads nor answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        code, _, stderr = command(
            tmp_path, "induce", "--inducer", "llm", FLOWMEM_LLM_MODEL="m", FLOWMEM_LLM_BASE_URL=url
        )
    assert_one_line(code, stderr, f"the LLM endpoint {url} does not answer (no answer within 3 s")


def test_a_model_the_llm_endpoint_refuses_is_one_line_before_any_call(tmp_path: Path) -> None:
    fill(tmp_path / "db")
    with LLMStub(models=["served-model"]) as stub:
        code, _, stderr = command(
            tmp_path,
            "induce",
            "--inducer",
            "llm",
            FLOWMEM_LLM_MODEL="typo-model",
            FLOWMEM_LLM_BASE_URL=stub.url,
        )
        assert stub.requests == [] and stub.described == ["typo-model"]  # no completion asked for
    line = assert_one_line(code, stderr, stub.url, "'typo-model'", "FLOWMEM_LLM_MODEL", "served-model")
    assert code == 2 and "does not serve" in line


def test_a_model_the_llm_endpoint_serves_passes_the_check(tmp_path: Path) -> None:
    fill(tmp_path / "db")
    with LLMStub(models=["served-model"]) as stub:
        code, stdout, stderr = command(
            tmp_path,
            "induce",
            "--inducer",
            "llm",
            "--json",
            limit=None,  # no error: it induces
            FLOWMEM_LLM_MODEL="served-model",
            FLOWMEM_LLM_BASE_URL=stub.url,
        )
        assert code == 0, stderr
        assert stub.described == ["served-model"] and stub.requests  # checked once, then called
    assert json.loads(stdout)["llm_calls"] == len(stub.requests)


@pytest.mark.parametrize(
    ("content", "said"),
    [(b"", "runs.jsonl is empty"), (b"\n  \n\n", "runs.jsonl holds only blank lines")],
    ids=["empty", "blank-lines"],
)
def test_a_file_that_holds_nothing_is_one_line_and_opens_no_store(
    tmp_path: Path, content: bytes, said: str
) -> None:
    (tmp_path / "runs.jsonl").write_bytes(content)
    code, stdout, stderr = command(tmp_path, "ingest", "runs.jsonl")
    assert_one_line(code, stderr, f"error: {said}: no run to ingest, nothing stored")
    assert code == 1 and stdout == "" and not (tmp_path / "db").exists()


def test_an_empty_gzip_file_beside_a_good_one_is_a_warning_and_fails_the_exit(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl.gz").write_bytes(gzip.compress(b""))
    (tmp_path / "runs.jsonl").write_text(good(1) + "\n")
    code, stdout, stderr = command(tmp_path, "ingest", "empty.jsonl.gz", "runs.jsonl")
    assert (code, stderr) == (1, ["warning: empty.jsonl.gz is empty: no run in it"])
    assert stdout.startswith("stored 1, rejected 0")


def test_a_file_whose_every_line_is_rejected_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").write_text('{bad\nnot json\n{"id": 3}\n')
    code, stdout, stderr = command(tmp_path, "ingest", "runs.jsonl")
    line = assert_one_line(code, stderr, "no line of runs.jsonl could be stored: all 3 were rejected")
    assert "(first, runs.jsonl:1: malformed JSON" in line and str(tmp_path / "db.quarantine.jsonl") in line
    assert code == 1 and stdout == ""
    assert len((tmp_path / "db.quarantine.jsonl").read_text().splitlines()) == 3


def test_a_directory_given_as_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    code, _, stderr = command(tmp_path, "ingest", "runs")
    assert_one_line(
        code, stderr, "error: runs: a directory, not a file: give the JSONL files in it", "runs/*.jsonl"
    )
    assert code == 2


def test_flowmem_run_checks_the_llm_before_any_flow_runs(tmp_path: Path) -> None:
    # `flowmem run induce` (and cycle) check as `flowmem induce` does: no Prefect server started.
    code, _, stderr = command(tmp_path, "run", "induce", "--inducer", "llm", FLOWMEM_LLM_MODEL="gpt-4o-mini")
    line = assert_one_line(code, stderr, "no API key", "FLOWMEM_LLM_API_KEY")
    assert code == 2 and "Prefect" not in line
