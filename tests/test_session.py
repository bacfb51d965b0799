"""tests/session.py's `built_once`: a seed built by the first process that asks, handed to the
others (pytest-xdist's workers) as a copy; a failed build fails them all, with its error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import ROOT
from tests.session import RUNS, built_once

ASK = """
import sys
from tests.session import built_once

def build(directory):
    raise AssertionError("built twice")

print(built_once(sys.argv[1], build))
"""


def test_a_seed_is_built_once_and_read_by_another_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RUNS, str(tmp_path))
    built: list[Path] = []

    def build(directory: Path) -> dict[str, object]:
        built.append(directory)
        (directory / "db").write_text("rows")
        return {"db": directory / "db", "rows": 3}

    first = built_once("seed", build)
    assert built == [tmp_path / "built" / "seed"] and first["rows"] == 3
    assert built_once("seed", build) == first and len(built) == 1  # this process asks again
    other = subprocess.run(
        [sys.executable, "-c", ASK, "seed"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert other.stdout.strip() == repr(first)


def test_a_failed_build_fails_the_processes_that_ask_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RUNS, str(tmp_path))

    def broken(directory: Path) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        built_once("seed", broken)
    other = subprocess.run([sys.executable, "-c", ASK, "seed"], cwd=ROOT, capture_output=True, text=True)
    assert other.returncode != 0
    assert "building seed failed in another process: OSError: disk full" in other.stdout + other.stderr
