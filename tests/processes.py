"""Helpers for tests that start processes: a bound on waiting for one, and a command started
in a process of its own whose result a test waits for (the session and module fixtures that
start slow work)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

READY_LIMIT = 900.0
"""Seconds a test waits at most for a server or process that should become ready: a bound for
one that never will, not a speed budget (a start takes ~10 s on 2 idle cores, a minute or
more on loaded ones)."""


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


@dataclass(frozen=True)
class Command:
    """A command to run: its arguments, environment and working directory."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: Path | None = None


class CommandRun:
    """A command a fixture started in a process of its own (and process group), for the tests
    that check what it did: its output goes to the files `stdout` and `stderr` of `work`, where
    it runs unless it names a directory of its own; `result` waits for it, `stop` ends it and
    whatever it started."""

    def __init__(self, command: Command, work: Path) -> None:
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        with (work / "stdout").open("w") as out, (work / "stderr").open("w") as err:
            self.process = subprocess.Popen(
                command.argv,
                env=command.env,
                cwd=command.cwd or work,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def result(self, timeout: float = READY_LIMIT) -> subprocess.CompletedProcess[str]:
        """Wait for it to end; what it printed."""
        code = self.process.wait(timeout=timeout)
        stdout, stderr = ((self.work / name).read_text() for name in ("stdout", "stderr"))
        return subprocess.CompletedProcess(self.process.args, code, stdout, stderr)

    def stop(self) -> None:
        """Kill what is left of its process group (it, or what it started and left running)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
