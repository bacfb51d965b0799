"""The writer of `WorkflowMemory` (flowmem/agents/writer.py) when writing a batch itself raises,
and when the store it builds on its own thread (`StoreSlot`) cannot be built.

`store_batch` retries, then spills, and is not meant to raise; if it does all the same (a bug,
a `MemoryError`), the writer thread counts the batch lost and goes on. The runs it took are no
longer pending: a later `flush()` must not wait for them until its bound.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

import flowmem.agents.memory
from flowmem import Settings, WorkflowMemory
from flowmem.agents.writer import StoreSlot, Writer
from flowmem.interchange import spill
from flowmem.jobs.factories import store_from
from flowmem.models import Trajectory
from flowmem.providers.static_files import ModelFileError
from flowmem.storage import Store

FLUSH_BOUND = 30.0
"""The `flush` timeout of the test, a bound (a flush here takes well under a second): on a writer
that still counts the lost runs as pending, every flush waits all of it and returns False."""


def _record(memory: WorkflowMemory, *ids: str) -> None:
    for i in ids:
        with memory.record(f"forward the mail about {i}", id=i) as run:
            run.step("mail.search", {"query": i}, observation="1 mail")
            run.finish(success=True)


def test_a_write_that_raises_counts_its_runs_lost_and_holds_no_later_flush(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store_batch = Writer.store_batch
    raised: list[str] = []

    def raises_for_the_first_runs(self: Writer, trajectories: list[Trajectory]) -> bool:
        if ids := [t.id for t in trajectories if t.id in ("r1", "r2")]:  # in one batch or two
            raised.extend(ids)
            raise MemoryError("no memory for the batch")
        return store_batch(self, trajectories)

    monkeypatch.setattr(Writer, "store_batch", raises_for_the_first_runs)
    caplog.set_level(logging.WARNING, logger="flowmem")
    memory = WorkflowMemory.open(settings.model_copy(update={"flush_interval": 60}))
    _record(memory, "r1", "r2")
    assert memory.flush(timeout=FLUSH_BOUND) is True  # the write raised; the runs are counted lost
    assert sorted(raised) == ["r1", "r2"]
    _record(memory, "r3")
    assert memory.flush(timeout=FLUSH_BOUND) is True  # stored, not waiting for the lost batch
    memory.close()
    assert {t.id for t in store_from(settings).list_trajectories(limit=None)} == {"r3"}
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert line == (
        f"flowmem: 2 runs not saved, meant for {settings.db}: "
        "writing them failed (MemoryError: no memory for the batch)"
    )


def test_a_store_that_cannot_be_built_spills_the_runs_says_why_and_raises_on_use(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer builds the store; when that fails, the runs are kept in the unsaved-runs
    file with the reason, `memory.store` raises the build's error, and the next memory that can
    build the store takes them back."""

    def no_store(settings: Settings) -> Store:
        raise RuntimeError("the embedder's endpoint is gone")

    monkeypatch.setattr(flowmem.agents.memory, "store_from", no_store)
    caplog.set_level(logging.WARNING, logger="flowmem")
    memory = WorkflowMemory.open(settings)
    _record(memory, "r1")
    with pytest.raises(RuntimeError, match="endpoint is gone"):
        memory.store  # noqa: B018  (the property is the call under test)
    memory.close()
    [line] = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert "1 run not stored" in line and "RuntimeError: the embedder's endpoint is gone" in line
    assert [t.id for t in spill.read(spill.spill_path(settings))] == ["r1"]

    monkeypatch.undo()
    with WorkflowMemory.open(settings) as again:
        assert again.flush(timeout=FLUSH_BOUND) is True
        assert [t.id for t in again.store.list_trajectories()] == ["r1"]
    assert not spill.spill_path(settings).exists()


def test_a_static_model_that_is_not_there_is_refused_when_the_memory_opens(tmp_path: Path) -> None:
    """Checked on the agent's thread with `stat`s (the store is built later, on the writer's)."""
    settings = Settings(db=str(tmp_path / "db"), embedder="static", embedder_path=str(tmp_path / "none"))
    with pytest.raises(ModelFileError, match="is not a directory"):
        WorkflowMemory.open(settings)
    assert not (tmp_path / "db").exists()


def test_a_store_slot_builds_once_for_threads_that_ask_together_and_keeps_a_failure(
    settings: Settings,
) -> None:
    built: list[Store] = []

    def build() -> Store:
        time.sleep(0.05)  # long enough for every thread to be asking meanwhile
        built.append(store_from(settings))
        return built[-1]

    slot = StoreSlot(build)
    got: list[Store] = []
    threads = [threading.Thread(target=lambda: got.append(slot.get())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len(got) == 8 and all(s is built[0] for s in got)

    calls: list[int] = []

    def fails() -> Store:
        calls.append(1)
        raise OSError(5, "no disk")

    failing = StoreSlot(fails)
    for _ in range(3):
        with pytest.raises(OSError, match="no disk"):
            failing.get()
    assert len(calls) == 1
