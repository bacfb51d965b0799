"""The complexity gate of `make lint`: xenon on radon's cyclomatic complexity, with the limits
and paths of the style rule (the Makefile's `COMPLEXITY_GATE`, `COMPLEXITY_PATHS`). It holds on
the tree, and fails on a copy with a function planted over it, one that ruff's C90 (branches
only) lets through."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
XENON, RUFF = BIN / "xenon", BIN / "ruff"
BOUND = 600.0
"""Seconds a command may take at most: a bound for one that hangs, not a speed budget."""

pytestmark = pytest.mark.skipif(not XENON.exists(), reason="xenon is not installed (make setup)")

PLANTED = "\n\n" + textwrap.dedent(
    '''
    def planted_ready(step: object) -> bool:
        """One condition of 22 clauses: a single branch to mccabe, 22 to radon."""
        return bool(
            getattr(step, "a", 0) and getattr(step, "b", 0) and getattr(step, "c", 0)
            and getattr(step, "d", 0) and getattr(step, "e", 0) and getattr(step, "f", 0)
            and getattr(step, "g", 0) and getattr(step, "h", 0) and getattr(step, "i", 0)
            and getattr(step, "j", 0) and getattr(step, "k", 0)
            or getattr(step, "l", 0) and getattr(step, "m", 0) and getattr(step, "n", 0)
            and getattr(step, "o", 0) and getattr(step, "p", 0) and getattr(step, "q", 0)
            and getattr(step, "r", 0) and getattr(step, "s", 0) and getattr(step, "t", 0)
            and getattr(step, "u", 0) and getattr(step, "v", 0)
        )
    '''
)
"""A function over the gate (rank D) that ruff's C90 at its configured maximum passes."""


GATE = ["--max-absolute", "C", "--max-modules", "C", "--max-average", "A"]
"""The style rule's limits: every function and module rank C or better, the average rank A."""
PATHS = ["flowmem", "bench", "examples"]
"""What the gate reads."""


def _gate(tree: Path) -> subprocess.CompletedProcess[str]:
    args = [str(XENON), *GATE, *PATHS]
    return subprocess.run(args, cwd=tree, capture_output=True, text=True, timeout=BOUND)


def test_the_tree_passes_the_gate() -> None:
    done = _gate(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_gate_fails_on_a_planted_function_that_ruff_c90_lets_through(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    for name in PATHS:
        shutil.copytree(ROOT / name, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    target = tree / "flowmem" / "induction" / "abstract" / "segments.py"
    assert _gate(tree).returncode == 0  # the copy passes as the tree does
    target.write_text(target.read_text() + PLANTED)

    done = _gate(tree)
    assert done.returncode != 0
    assert "flowmem/induction/abstract/segments.py" in done.stderr and "planted_ready" in done.stderr

    if RUFF.exists():  # what the gate adds: ruff's mccabe, as configured, sees one branch
        ruff = [str(RUFF), "check", "--select", "C90", "--no-cache", str(target.relative_to(tree))]
        checked = subprocess.run(ruff, cwd=tree, capture_output=True, text=True, timeout=BOUND)
        assert checked.returncode == 0, checked.stdout
