"""Helpers for tests that start processes: a bound on waiting for one, and the priority of work
started ahead of the test that checks it (tests/conftest.py's session fixtures)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

READY_LIMIT = 900.0
"""Seconds a test waits at most for a server or process that should become ready: a bound for
one that never will, not a speed budget (a start takes ~10 s on 2 idle cores, a minute or
more on loaded ones)."""


BACKGROUND_NICENESS = 10
"""The niceness of work started ahead of the test that checks it (see `background`)."""


def background(pid: int, niceness: int = BACKGROUND_NICENESS) -> None:
    """Lower the priority of a process started for later (and of what it starts from now on):
    it then takes the CPU pytest and the running test's own processes leave idle, instead of
    slowing them down. It still gets a whole core while a test waits for it."""
    with contextlib.suppress(ProcessLookupError):
        os.setpriority(os.PRIO_PROCESS, pid, niceness)


def foreground(pid: int) -> None:
    """Undo `background` for a process (each of its threads) that a test now works with, where
    the system allows it (raising a priority may need CAP_SYS_NICE; else it stays as it is)."""
    with contextlib.suppress(FileNotFoundError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.setpriority(os.PRIO_PROCESS, int(tid), 0)


def foreground_tree(pid: int) -> None:
    """`foreground` for a process and every process it has started: a test that now waits for
    work started in the background gives it back its share of the CPU (beside busy processes
    of normal priority, a niced one gets a few percent of a core and would take many times as
    long)."""
    with contextlib.suppress(FileNotFoundError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(FileNotFoundError):
                for child in Path(f"/proc/{pid}/task/{tid}/children").read_text().split():
                    foreground_tree(int(child))
    foreground(pid)


LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
"""import-linter's command, beside this interpreter (`make setup` installs it)."""


def copy_package(root: Path, into: Path) -> Path:
    """A copy of `root`'s flowmem package and pyproject.toml under `into`, to plant imports in."""
    tree = into / "tree"
    shutil.copytree(root / "flowmem", tree / "flowmem", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(root / "pyproject.toml", tree / "pyproject.toml")
    return tree


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's contracts checked on a copy (`copy_package`): the copy comes first on
    the path, so the contracts are checked against it, not against the installed package."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": str(Path(sys.executable).parent)},
        capture_output=True,
        text=True,
        timeout=READY_LIMIT,
    )
