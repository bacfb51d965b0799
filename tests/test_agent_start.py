"""An agent starts without loading the store's SDK (issue 41, item 1): importing
`flowmem.agents`, opening a memory and recording import none of LanceDB, Arrow, numpy, pandas,
Prefect, OpenAI, scikit-learn, HDBSCAN or FastAPI on the agent's thread; the writer builds and
opens the store on its own, and a process that ends at once, normally or by Ctrl-C, still
stores its runs.

Each agent runs in a fresh process. Its writer is held before it builds the store (the test
wraps `StoreSlot.get`, the writer's first call) until the agent has recorded, so what the
agent's thread loaded is read while nothing else can have loaded anything: the check does not
depend on how fast the machine is. `bench/agent_start.py` measures the time it saves.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from flowmem.jobs.factories import store_from
from flowmem.settings import Settings
from tests.processes import READY_LIMIT

HEAVY = (
    "lancedb",
    "lance",
    "pyarrow",
    "numpy",
    "pandas",
    "prefect",
    "openai",
    "sklearn",
    "hdbscan",
    "fastapi",
)
"""What an agent's start must not import: the store's SDK and the rest of the heavy stack."""

AGENT = textwrap.dedent(
    """
    import atexit, json, sys, threading
    held = threading.Event()  # the writer waits on it before it builds the store

    import flowmem.agents
    from flowmem.agents import WorkflowMemory
    from flowmem.agents.writer import StoreSlot

    get = StoreSlot.get
    def gated(slot):
        if threading.current_thread().name == "flowmem-writer":
            held.wait()
        return get(slot)
    StoreSlot.get = gated

    memory = WorkflowMemory.open(sys.argv[1])
    with memory.record("forward the invoice about the Q3 report to ana", id="first") as run:
        run.step("mail.search", {"query": "invoice Q3"}, observation="1 mail")
        run.finish(success=True)
    loaded = sorted({m.split(".")[0] for m in sys.modules} & set(json.loads(sys.argv[2])))
    print(json.dumps({"loaded": loaded, "opening": memory.opening()}), flush=True)
    atexit.register(held.set)  # at exit (before flowmem's handler): the store is built now
    if sys.argv[3] == "ctrl-c":
        raise KeyboardInterrupt
    """
)
"""Import, open, record one run; report what is loaded; end (`exit` or `ctrl-c`) while the
writer still has to open the store."""


FLUSH_BOUND = 120.0
"""The agents' `FLOWMEM_FLUSH_TIMEOUT`: a bound, not a budget. Storing at exit fsyncs; on a
machine writing back gigabytes (a fresh virtualenv just installed) it took this test 16–22 s
instead of ~3, and past the default 5 s the run is spilled (kept, and said on stderr), which
is not what these tests are about."""


def _agent(db: Path, end: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", AGENT, str(db), json.dumps(HEAVY), end]
    env = {**os.environ, "FLOWMEM_FLUSH_TIMEOUT": str(FLUSH_BOUND)}
    return subprocess.run(command, capture_output=True, text=True, timeout=READY_LIMIT, env=env)


def test_recording_loads_no_heavy_module_and_a_run_recorded_before_a_normal_exit_is_stored(
    tmp_path: Path,
) -> None:
    db = tmp_path / "db"
    done = _agent(db, "exit")
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout.splitlines()[0])
    assert said == {"loaded": [], "opening": True}
    assert done.stderr == ""  # nothing spilled, nothing lost: no line to say so
    [run] = store_from(Settings(db=str(db))).list_trajectories()
    assert run.id == "first" and [s.action for s in run.steps] == ["mail.search"] and run.success


def test_ctrl_c_while_the_store_opens_stores_the_run_and_ends_by_sigint(tmp_path: Path) -> None:
    """The store built and opened at exit imports C extensions, after which Python would end with
    status 1: the process ends by SIGINT as Ctrl-C ends any other (`shutdown._end_as_interrupted`)."""
    db = tmp_path / "db"
    done = _agent(db, "ctrl-c")
    assert done.returncode == -signal.SIGINT, done.stderr
    assert done.stderr.splitlines()[-1] == "KeyboardInterrupt"
    assert json.loads(done.stdout.splitlines()[0])["opening"] is True
    assert [t.id for t in store_from(Settings(db=str(db))).list_trajectories()] == ["first"]


def test_a_process_that_never_built_a_store_imports_none_of_it_at_exit() -> None:
    """The exit hook lets go of LanceDB's handles only where a store was built: a process that
    imported the hooks and recorded nothing loads neither the store's modules nor numpy on
    its way out (its own exit handler, registered first, runs after flowmem's)."""
    script = textwrap.dedent(
        """
        import atexit, sys
        store = ("numpy", "flowmem.storage.base")
        atexit.register(lambda: print(sorted(m for m in store if m in sys.modules)))
        import flowmem.agents
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=READY_LIMIT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
