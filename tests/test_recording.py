from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from flowmem.agents import WorkflowMemory, current_run
from flowmem.agents.recording import Run
from flowmem.jobs.factories import store_from
from flowmem.models import Trajectory, WorkflowRef
from flowmem.settings import Settings
from tests.processes import READY_LIMIT


def test_10000_steps_from_4_threads_in_40_trajectories_all_stored_in_order(settings: Settings) -> None:
    memory = WorkflowMemory.open(settings)
    barrier = threading.Barrier(4)

    def agent(worker: int) -> None:
        barrier.wait()
        for j in range(10):
            with memory.record(
                f"worker {worker} task {j}", agent=f"agent{worker}", id=f"w{worker}-{j}"
            ) as run:
                for n in range(250):
                    run.step("tool.call", args={"n": n}, observation=f"result {n}")
                run.finish(success=n % 2 == 1)

    threads = [threading.Thread(target=agent, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    memory.close()

    store = store_from(settings)
    assert store.count_trajectories() == 40
    total = 0
    for t in store.list_trajectories(limit=None):
        assert [s.args["n"] for s in t.steps] == list(range(250))
        assert [s.observation for s in t.steps][-1] == "result 249"
        assert t.success is True and t.agent == f"agent{t.id[1]}"
        total += len(t.steps)
    assert total == 10_000


@pytest.mark.parametrize("built", ["at the hand-over", "later"])
def test_a_step_that_races_the_hand_over_is_either_stored_or_refused(built: str) -> None:
    """`Run.step` takes no lock: steps from 3 threads while another hands the run over; every
    step that returned is in the trajectory built from it, every one refused is not."""
    stored: list[Trajectory] = []

    def submit(run: Run) -> None:
        if built == "at the hand-over":
            stored.append(run.to_trajectory())

    run = Run(submit, id="race", task="race the hand-over", agent="a", namespace="default")
    accepted: list[list[int]] = [[], [], []]
    refused = [0, 0, 0]

    def agent(worker: int) -> None:
        for n in range(1_000_000):
            try:
                run.step("tool.call", args={"w": worker, "n": n})
            except RuntimeError:
                refused[worker] += 1
                return
            accepted[worker].append(n)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often, so a step falls between hand-over's parts
    try:
        threads = [threading.Thread(target=agent, args=(w,)) for w in range(3)]
        for thread in threads:
            thread.start()
        while run.n_steps < 3_000:
            time.sleep(0.001)
        run.finish(success=True)
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    if built == "later":
        stored.append(run.to_trajectory())
    got = sorted((s.args["w"], s.args["n"]) for s in stored[0].steps)
    assert got == sorted((w, n) for w in range(3) for n in accepted[w])
    assert refused == [1, 1, 1] and len(got) >= 3_000


@pytest.mark.parametrize("built", ["at the hand-over", "later"])
def test_the_hand_over_between_a_steps_append_and_its_check(built: str) -> None:
    """The interleaving the race above may hit, made certain: the run is handed over right
    after a step's append. Built at the hand-over, the trajectory holds the step, which
    returns; built later, the step is refused and the trajectory does not hold it."""
    stored: list[Trajectory] = []

    def submit(run: Run) -> None:
        if built == "at the hand-over":
            stored.append(run.to_trajectory())

    run = Run(submit, id="between", task="hand over mid-step", agent="a", namespace="default")
    run.step("first")

    class HandOverOnAppend(list[Any]):
        def append(self, item: Any) -> None:
            super().append(item)
            run.finish(success=True)

    run._steps = HandOverOnAppend(run._steps)
    if built == "at the hand-over":
        assert run.step("second") == []
    else:
        with pytest.raises(RuntimeError, match="already stored"):
            run.step("second")
        stored.append(run.to_trajectory())
    assert stored[0].actions == (["first", "second"] if built == "at the hand-over" else ["first"])


def test_exception_is_stored_as_failure_then_reraised(settings: Settings) -> None:
    with WorkflowMemory.open(settings) as memory:
        with pytest.raises(KeyError):
            with memory.record("look up the customer", id="boom") as run:
                run.step("crm.find_customer", args={"name": "Ada"}, error="not found")
                raise KeyError("Ada")
    t = store_from(settings).get_trajectory("boom")
    assert t.success is False and t.feedback == "KeyError: 'Ada'" and t.meta["error"] == "KeyError: 'Ada'"
    assert t.steps[0].error == "not found"


def test_nested_runs_are_subtasks_and_served_workflows_are_attached(settings: Settings) -> None:
    with WorkflowMemory.open(settings) as memory:
        with memory.record("onboard Acme", agent="orchestrator", id="plan") as plan:
            plan.use(WorkflowRef(id="onboard", version=2))
            plan.step("delegate", args={"agent": "crm_agent", "subtask": "mark Acme won"})
            with memory.record("mark Acme won", agent="crm_agent", id="sub") as sub:
                assert current_run() is sub
                sub.step("crm.update_status", args={"customer": "Acme", "status": "won"})
                sub.finish(success=True)
            assert current_run() is plan
            plan.finish(success=True)
        assert current_run() is None
    store = store_from(settings)
    assert store.get_trajectory("sub").parent_id == "plan"
    assert store.get_trajectory("plan").workflows_used == [WorkflowRef(id="onboard", version=2)]


def test_decorators_record_sync_and_async_runs_and_tool_calls(settings: Settings) -> None:
    memory = WorkflowMemory.open(settings)

    @memory.tool(name="math.add")
    def add(a: int, b: int) -> int:
        return a + b

    @memory.tool
    def explode(x: str) -> None:
        raise ValueError(f"bad {x}")

    @memory.recorded(agent="calc")
    def solve(task: str) -> int:
        total = add(2, b=3)
        try:
            explode("y")
        except ValueError:
            pass
        return total

    @memory.recorded
    async def solve_async(task: str) -> str:
        add(1, 1)
        run = current_run()
        assert run is not None
        run.finish(success=False, feedback="wrong answer")
        return "2"

    assert solve("add two and three") == 5
    assert asyncio.run(solve_async("add one and one")) == "2"
    assert add(1, 2) == 3  # outside a run: not recorded, still works
    memory.close()

    by_task = {t.task: t for t in store_from(settings).list_trajectories(limit=None)}
    calc = by_task["add two and three"]
    assert (calc.agent, calc.success, calc.final_answer) == ("calc", True, "5")
    assert [(s.action, s.args, s.observation, s.error) for s in calc.steps] == [
        ("math.add", {"a": 2, "b": 3}, "5", None),
        ("explode", {"x": "y"}, None, "ValueError: bad y"),
    ]
    assert calc.steps[0].duration_ms is not None
    assert by_task["add one and one"].success is False
    assert by_task["add one and one"].feedback == "wrong answer"


def test_odd_arguments_are_stored_as_text(settings: Settings) -> None:
    with WorkflowMemory.open(settings) as memory:
        with memory.record("odd", id="odd") as run:
            run.step(
                "x", args={"path": Path("/tmp/a"), "obj": object(), "n": 1.5}, observation={"rows": [1, 2]}
            )
            run.finish(success=True)
    step = store_from(settings).get_trajectory("odd").steps[0]
    assert step.args["path"] == "/tmp/a" and step.args["n"] == 1.5 and step.args["obj"].startswith("<object")
    assert step.observation == '{"rows": [1, 2]}'


def test_record_without_with_block_is_stored_on_finish(settings: Settings) -> None:
    memory = WorkflowMemory.open(settings)
    run = memory.record("plain call style", id="plain")
    run.step("a")
    run.finish(success=True)
    with pytest.raises(RuntimeError, match="already stored"):
        run.step("b")
    assert memory.flush(timeout=READY_LIMIT)
    assert store_from(settings).get_trajectory("plain").actions == ["a"]
    memory.close()
    with pytest.raises(RuntimeError, match="closed"):
        with memory.record("late"):
            pass


def test_a_normal_interpreter_exit_loses_nothing(settings: Settings, tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        from flowmem import Settings, WorkflowMemory
        memory = WorkflowMemory.open(Settings(db={settings.db!r}, flush_interval=30))
        for i in range(300):
            with memory.record(f"task {{i}}", id=f"t{{i}}") as run:
                run.step("a", args={{"i": i}})
                run.finish(success=True)
        # no close(): the atexit hook must flush
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=READY_LIMIT)
    assert store_from(settings).count_trajectories() == 300


def test_recording_through_the_spool_then_collecting(settings: Settings) -> None:
    from flowmem.jobs.collect import collect

    spooled = settings.model_copy(update={"record_to": "spool"})
    with WorkflowMemory.open(spooled) as memory:
        for i in range(5):
            with memory.record(f"task {i}", id=f"s{i}") as run:
                run.step("a", args={"i": i})
                run.finish(success=True)
    files = list(settings.spool_path.glob("*.jsonl"))
    assert files and not list(settings.spool_path.glob("*.tmp"))
    store = store_from(settings)
    assert store.count_trajectories() == 0  # nothing reached the store directly
    report = collect(store, settings)
    assert (report.files, report.stored) == (len(files), 5) and store.count_trajectories() == 5
    assert not list(settings.spool_path.glob("*.jsonl")) and len(
        list((settings.spool_path / "done").iterdir())
    ) == len(files)
