"""Helpers for tests that start processes: a bound on waiting for one, and the priority of work
started ahead of the test that checks it (tests/conftest.py's session fixtures)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
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
    slowing them down. It still gets a whole core while a test waits for it. Not on a
    pytest-xdist worker: the other workers' tests then take the CPU a niced process would wait
    for while its own test waits on it (the processes run in parallel anyway)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
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


@dataclass(frozen=True)
class Command:
    """A command to run: its arguments, environment and working directory."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    cwd: Path | None = None


_SHELL = (
    'd=$1; shift; ("$@" >"$d/stdout" 2>"$d/stderr"; echo $? >"$d/part" && mv "$d/part" "$d/status") &'
    ' echo $! >"$d/pid"'
)
"""Starts the command in the background with its output in files of the run's directory (the
first argument) and its exit status written last (`status`, renamed into place whole), then
returns: the run belongs to no pytest process (whichever started it may end first), and any
process of the session can wait for it by its files."""


class SessionRun:
    """A command the session starts once, as it begins, for the tests that check what it did
    (tests/conftest.py's `SESSION_RUNS`): a run's output and exit status are files of its
    `directory`, so any process of the session reads them — each pytest-xdist worker, or the
    one pytest process. The command runs in `work` unless it names a directory of its own."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    @property
    def work(self) -> Path:
        """The directory of what the runs of its fixture write (beside their own directories)."""
        return self.directory.parent / "work"

    @classmethod
    def start(cls, directory: Path, command: Command, niceness: int) -> None:
        """Start `command` now in a process group of its own (its id in `group`), at `niceness`
        (see `background`)."""
        run = cls(directory)
        for made in (directory, run.work):
            made.mkdir(parents=True, exist_ok=True)
        # `nice` execs the shell (the same process), which starts the command at that niceness.
        argv = ["nice", "-n", str(niceness), "/bin/sh", "-c", _SHELL, "sh", str(directory), *command.argv]
        with subprocess.Popen(
            argv, env=command.env, cwd=command.cwd or run.work, start_new_session=True
        ) as shell:
            (directory / "group").write_text(str(shell.pid))
        if shell.returncode != 0:
            raise RuntimeError(f"{directory.name}: the shell that starts it exited with {shell.returncode}")

    def result(self, timeout: float = READY_LIMIT) -> subprocess.CompletedProcess[str]:
        """Wait for it to end (at full priority from now on); what it printed."""
        foreground_tree(int((self.directory / "pid").read_text()))
        status = self.directory / "status"
        deadline = time.monotonic() + timeout
        while not status.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.directory.name} did not end within {timeout:.0f} s")
            time.sleep(0.05)
        stdout, stderr = ((self.directory / name).read_text() for name in ("stdout", "stderr"))
        return subprocess.CompletedProcess([], int(status.read_text()), stdout, stderr)


def _running_in_group(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (zombies aside: an orphan's exit status is
    for the container's first process to collect, which may never do it)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_group(pid: int) -> None:
    """Stop every process of process group `pid` (a `SessionRun`'s) that still runs: SIGTERM to
    the group, SIGKILL to what is left after 5 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _running_in_group(pid):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, sig)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and _running_in_group(pid):
            time.sleep(0.05)
