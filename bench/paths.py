"""Where the benchmarks find the checkout, the shared data sets and each other's scripts."""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["BENCH", "REPO", "SHARED_DATA", "script"]

BENCH = Path(__file__).resolve().parent
"""This folder: the benchmarks, a module each, and results/ (the recorded runs)."""

REPO = BENCH.parent
"""The checkout the benchmarks are part of (README.md, docs/, bench/results/), however flowmem is
installed: the suite ships with the source, never in the wheel."""

SHARED_DATA = REPO.parent / "shared" / "data"
"""The shared data sets, in ../shared/data beside the checkout."""


def script(name: str) -> list[str]:
    """The command that runs the benchmark `bench/<name>.py` in a process of its own, from any
    directory (as `python bench/<name>.py`: each script finds the checkout itself)."""
    return [sys.executable, str(BENCH / f"{name}.py")]
