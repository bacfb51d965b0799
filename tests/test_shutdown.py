"""A supervisor's stop (SIGTERM) loses no finished run: the hooks store what they still hold."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from flowmem.jobs.factories import store_from
from flowmem.settings import Settings
from tests.processes import READY_LIMIT

BURST = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from flowmem import Settings, WorkflowMemory

    if sys.argv[2] == "own-handler":  # the application's own handler, set before flowmem's
        def stop(signum, frame):  # it ends the process at once: flowmem must have stored by then
            Path(sys.argv[1] + ".stopped").write_text("yes")
            os._exit(0)
        signal.signal(signal.SIGTERM, stop)
    # Nothing is written before the signal: every finished run is still in the writer's hands.
    memory = WorkflowMemory.open(Settings(db=sys.argv[1], flush_interval=60, flush_batch=1_000_000))
    i = 0
    while True:
        with memory.record(f"task {i}", id=f"r{i}") as run:
            run.step("mail.search", {"query": f"q{i}"}, observation="[]")
            run.finish(success=i % 2 == 0)
        i += 1
        print(i, flush=True)
    """
)


def _burst_then_sigterm(db: Path, mode: str) -> tuple[int, int]:
    """(runs the child had finished when it was stopped, its exit status)."""
    command = [sys.executable, "-c", BURST, str(db), mode]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        finished = 0
        deadline = time.monotonic() + READY_LIMIT
        while finished < 300 and time.monotonic() < deadline:
            finished = int(child.stdout.readline() or finished)
        child.send_signal(signal.SIGTERM)
        # A stop that hangs is killed after READY_LIMIT: the test then fails (-SIGKILL) instead of
        # hanging the whole suite on the read below.
        watchdog = threading.Timer(READY_LIMIT, child.kill)
        watchdog.start()
        try:
            # Read on through the same buffered stream: `communicate` would skip what it holds.
            rest = child.stdout.read()
        finally:
            watchdog.cancel()
        child.wait(timeout=READY_LIMIT)
    counts = [int(x) for x in rest.split()]
    return (counts[-1] if counts else finished), child.returncode


def test_sigterm_during_a_burst_stores_every_finished_run(tmp_path: Path) -> None:
    db = tmp_path / "db"
    finished, status = _burst_then_sigterm(db, "default")
    assert status == -signal.SIGTERM  # still ended by the signal, as without flowmem
    stored = store_from(Settings(db=str(db))).count_trajectories()
    # A run may finish between the last line printed and the signal: stored by the hook too.
    assert finished >= 300 and finished <= stored <= finished + 1


def test_an_applications_own_sigterm_handler_still_runs_after_the_flush(tmp_path: Path) -> None:
    db = tmp_path / "db"
    finished, status = _burst_then_sigterm(db, "own-handler")
    assert status == 0 and Path(str(db) + ".stopped").read_text() == "yes"
    stored = store_from(Settings(db=str(db))).count_trajectories()
    assert finished <= stored <= finished + 1


INTERRUPTED = textwrap.dedent(
    """
    import sys
    from flowmem import Settings, WorkflowMemory
    from flowmem.agents import shutdown

    memory = WorkflowMemory.open(Settings(db=sys.argv[1], flush_interval=60, flush_batch=1_000_000))
    for i in range(5):
        with memory.record(f"task {i}", id=f"r{i}") as run:
            run.step("mail.search", {"query": f"q{i}"}, observation="[]")
            run.finish(success=True)
    # As when SIGTERM lands while the main thread hands a run over: it holds the writer's,
    # the memory's and the run's locks when the handler runs, in that same thread.
    with memory._writer._cond, memory._lock, run._lock:
        shutdown._close_all(from_signal=True)
    print("closed", flush=True)
    """
)


def test_a_sigterm_handler_that_interrupts_a_hand_over_stores_everything_and_returns(tmp_path: Path) -> None:
    db = tmp_path / "db"
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED, str(db)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["closed"]
    assert store_from(Settings(db=str(db))).count_trajectories() == 5
