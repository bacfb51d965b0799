"""The writer of `WorkflowMemory` (flowmem/agents/writer.py) when writing a batch itself raises.

`store_batch` retries, then spills, and is not meant to raise; if it does all the same (a bug,
a `MemoryError`), the writer thread counts the batch lost and goes on. The runs it took are no
longer pending: a later `flush()` must not wait for them until its bound.
"""

from __future__ import annotations

import logging

import pytest

from flowmem import Settings, WorkflowMemory
from flowmem.agents.writer import Writer
from flowmem.jobs.factories import store_from
from flowmem.models import Trajectory

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
