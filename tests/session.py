"""What the test session shares between its processes (pytest-xdist's workers, or the one pytest
process): a directory of its own, named by an environment variable the workers inherit, that
holds the command runs started once for the session (tests/conftest.py's `SESSION_RUNS`) and the
seeds built once for every process (`built_once`). tests/conftest.py's hooks call these."""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import pytest

from tests.processes import READY_LIMIT, Command, SessionRun, stop_group

T = TypeVar("T")

RUNS = "FLOWMEM_TEST_SESSION_RUNS"
"""The environment variable naming the session's directory, set by the pytest process that runs
the session (pytest-xdist's workers inherit it)."""

Builders = Mapping[str, tuple[Callable[[Path], dict[str, Command]], int]]
"""Session run name -> (its commands, given their work directory; their niceness)."""


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def open_session(config: pytest.Config) -> None:
    """The session's own process makes the session's directory."""
    if not is_worker(config):
        os.environ[RUNS] = tempfile.mkdtemp(prefix="flowmem-session-runs-")


def _root() -> Path:
    return Path(os.environ[RUNS])


def start_runs(session: pytest.Session, runs: Builders) -> None:
    """Start the runs the selected tests use, each unless another process has: the first to
    make its directory starts it, detached (a `SessionRun` per command)."""
    if session.config.option.collectonly:
        return
    used = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    for name, (commands, niceness) in runs.items():
        if name not in used:
            continue
        try:
            (_root() / name).mkdir()
        except FileExistsError:
            continue  # claimed by another worker
        parts = commands(_root() / name / "work")
        for part, command in parts.items():
            SessionRun.start(_root() / name / part, command, niceness)
        (_root() / name / "started").write_text("\n".join(parts))


def _wait_for(path: Path, failed: Callable[[], str | None], late: str) -> None:
    """Wait until another process makes `path`; fail the test with what `failed` says once it says
    something, or with `late` after READY_LIMIT."""
    deadline = time.monotonic() + READY_LIMIT
    while not path.exists():
        if (why := failed()) is not None:
            pytest.fail(why)
        if time.monotonic() > deadline:
            pytest.fail(late)
        time.sleep(0.05)


def runs_of(name: str) -> dict[str, SessionRun]:
    """The runs started for `name`, by this process or another (waiting until they are)."""
    directory = _root() / name
    started = directory / "started"
    not_started = f"{name} (SESSION_RUNS) was not started for this session"
    _wait_for(started, lambda: None if directory.exists() else not_started, not_started)
    return {part: SessionRun(directory / part) for part in started.read_text().split("\n") if part}


def built_once(name: str, build: Callable[[Path], T]) -> T:
    """`build(directory)`, run once for the whole session by the first process that asks, in a
    directory of the session's; every other process waits for it and gets a copy of its result
    (pickled). A build that fails fails every process that asks, with the first one's error."""
    directory, result, failure = (_root() / "built" / f"{name}{end}" for end in ("", ".pickle", ".failed"))
    directory.parent.mkdir(exist_ok=True)
    try:
        directory.mkdir()
    except FileExistsError:  # another process builds it

        def failed() -> str | None:
            if not failure.exists():
                return None
            return f"building {name} failed in another process: {failure.read_text()}"

        _wait_for(result, failed, f"{name} was not built in {READY_LIMIT:.0f} s")
        loaded: T = pickle.loads(result.read_bytes())
        return loaded
    try:
        value = build(directory)
    except BaseException as error:
        failure.write_text(f"{type(error).__name__}: {error}")
        raise
    partial = result.with_suffix(".partial")
    partial.write_bytes(pickle.dumps(value))
    partial.rename(result)  # whole or not there
    return value


def close_session(config: pytest.Config) -> None:
    """The session's own process stops the runs still going, with whatever they started (each
    run's process group), and removes the session's directory."""
    if is_worker(config) or RUNS not in os.environ:
        return
    root = Path(os.environ.pop(RUNS))
    for group in root.glob("*/*/group"):
        stop_group(int(group.read_text()))
    shutil.rmtree(root, ignore_errors=True)
