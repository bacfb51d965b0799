"""Durable hooks (FLOWMEM_DURABLE): a run whose `finish` returned survives kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from flowmem import Settings, WorkflowMemory
from flowmem.interchange.journal import Journal
from flowmem.jobs.factories import store_from
from flowmem.models import Step, Trajectory
from tests.processes import READY_LIMIT

BURST = textwrap.dedent(
    """
    import sys
    from flowmem import Settings, WorkflowMemory

    db, interval, batch = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    memory = WorkflowMemory.open(Settings(db=db, durable=True, flush_interval=interval, flush_batch=batch))
    i = 0
    while True:
        with memory.record(f"task {i}", id=f"r{i}") as run:
            run.step("mail.search", {"query": f"q{i}", "token": "sk-abcdefghijklmnopqrstuvwx"})
            run.finish(success=i % 2 == 0)
            print(run.id, flush=True)  # finish has returned: the run must never be lost
        i += 1
    """
)


def _stored(db: Path) -> int:
    """Rows the child's writer has committed (read without creating anything: the child does)."""
    import lancedb

    try:
        return int(lancedb.connect(str(db)).open_table("trajectories").count_rows())
    except (FileNotFoundError, ValueError):  # no table yet
        return 0


def _journaled(db: Path) -> int:
    """Runs the child's journal still holds (the writer drops those it has stored: a segment
    listed may be gone by the time it is read, and then holds none)."""
    journal = Settings(db=str(db), durable=True).journal_path
    held = 0
    for segment in journal.glob("*.jsonl"):
        try:
            held += segment.read_text().count("\n")
        except FileNotFoundError:  # dropped once stored, between the listing and the read
            pass
    return held


def _burst_then_kill(db: Path, interval: float, batch: int) -> set[str]:
    """Ids the child printed (after their `finish` returned) before it was killed with -9: at
    least 300, and with a writer storing meanwhile, once it has stored some and dropped them
    from its journal (however long a loaded machine makes its first commit take: a commit and
    the journal's trim are two steps, and a kill may fall between them)."""
    command = [sys.executable, "-c", BURST, str(db), str(interval), str(batch)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        printed: list[str] = []
        deadline = time.monotonic() + READY_LIMIT
        while time.monotonic() < deadline:
            printed.append(child.stdout.readline().strip())
            stored = interval < 60 and len(printed) % 100 == 0 and _stored(db) > 0
            if len(printed) >= 300 and (interval >= 60 or (stored and _journaled(db) < len(printed))):
                break
        child.send_signal(signal.SIGKILL)
        rest = child.stdout.read()  # read on through the same buffered stream
        child.wait(timeout=READY_LIMIT)
    assert child.returncode == -signal.SIGKILL
    return {i for i in printed + rest.split() if i}


@pytest.mark.parametrize(
    ("interval", "batch"),
    [(60.0, 1_000_000), (0.05, 50)],
    ids=["nothing-stored-yet", "writer-storing-meanwhile"],
)
def test_kill_9_during_a_burst_loses_no_finished_run(tmp_path: Path, interval: float, batch: int) -> None:
    db = tmp_path / "db"
    finished = _burst_then_kill(db, interval, batch)
    assert len(finished) >= 300
    settings = Settings(db=str(db), durable=True)
    before = store_from(settings).count_trajectories() if db.exists() else 0
    if interval == 60:
        assert before == 0  # only the journal holds them
    else:
        assert 0 < before  # the writer had stored some and let the journal drop them
        leftover = sum(p.read_text().count("\n") for p in settings.journal_path.glob("*.jsonl"))
        assert leftover < len(finished)
    WorkflowMemory.open(settings).close()  # opening replays the killed process's journal
    store = store_from(settings)
    stored = {t.id for t in store.list_trajectories(limit=100_000)}
    assert finished <= stored and len(stored) <= len(finished) + 1  # one may finish unprinted
    [run] = store.get_trajectories(["r0"], namespace="default")
    assert run.success is True and "sk-abcdefghijklmnopqrstuvwx" not in run.model_dump_json()  # scrubbed
    assert [p.name for p in settings.journal_path.iterdir()] == []  # replayed and removed
    WorkflowMemory.open(settings).close()  # replaying again stores nothing twice
    assert store_from(settings).count_trajectories() == len(stored)


def _trajectory(i: int) -> Trajectory:
    return Trajectory(id=f"t{i}", task=f"task {i}", steps=[Step(action="a.b")], success=True)


def test_the_journal_lets_go_of_stored_runs_and_rotates(tmp_path: Path) -> None:
    journal = Journal(tmp_path, segment_bytes=600).open()
    for i in range(6):
        journal.append(_trajectory(i))
    full = sorted(tmp_path.glob("*.jsonl"), key=lambda p: int(p.name.split(".")[1]))
    assert len(full) >= 2 and journal.pending == 6  # rotated at 600 bytes
    first = {t.id for t in map(Trajectory.model_validate_json, full[0].read_text().splitlines())}
    journal.done([("default", i) for i in first])
    assert not full[0].exists() and all(p.exists() for p in full[1:])
    journal.append(_trajectory(6))  # after a batch, a new segment
    assert len(list(tmp_path.glob("*.jsonl"))) == len(full)
    journal.done([("default", f"t{i}") for i in range(7)])
    assert journal.pending == 0 and list(tmp_path.glob("*.jsonl")) == []
    journal.close()
    assert list(tmp_path.iterdir()) == []


def test_only_a_dead_owners_journal_is_replayed_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    alive = Journal(tmp_path).open()
    alive.append(_trajectory(1))
    reader = Journal(tmp_path).open()
    assert reader.orphans() == []  # its owner still holds its lock
    alive.append(_trajectory(2))
    alive.append(_trajectory(1).model_copy(update={"success": False}))  # a later state of t1
    [segment] = tmp_path.glob(f"{alive.owner}.*.jsonl")
    with segment.open("a") as fh:
        fh.write('{"id": "t3", "task": "torn')  # killed mid-write: never acknowledged
    assert alive._fd is not None

    os.close(alive._fd)  # as the kernel does when the process dies
    alive._fd = None
    [(lock, runs)] = reader.orphans()
    assert {(t.id, t.success) for t in runs} == {("t1", False), ("t2", True)}
    reader.forget(lock)
    reader.close()
    assert list(tmp_path.iterdir()) == []


def test_an_exception_after_finish_is_journaled_as_the_failure_it_became(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "db"), durable=True, flush_interval=60, flush_batch=1_000_000)
    memory = WorkflowMemory.open(settings)
    journal = memory._journal
    assert journal is not None
    with pytest.raises(RuntimeError), memory.record("task x", id="x") as run:
        run.step("a.b")
        run.finish(success=True)
        raise RuntimeError("after finish")
    [segment] = settings.journal_path.glob("*.jsonl")
    lines = [Trajectory.model_validate_json(line) for line in segment.read_text().splitlines()]
    assert [t.success for t in lines] == [True, False]  # journaled at finish, then as it ended
    memory.close()
    [stored] = store_from(settings).get_trajectories(["x"], namespace="default")
    assert stored.success is False and list(settings.journal_path.iterdir()) == []


def test_each_append_is_fsynced_once_written_and_a_new_segments_directory_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No test can see a missing fsync by reading the files back (the page cache holds them):
    # so watch the calls. Each is recorded with the file's identity and its size at that
    # moment, which shows the fsync came after the line was written.
    synced: list[tuple[int, int, int]] = []
    fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino, st.st_size))
        fsync(fd)

    def synced_as_it_is(path: Path) -> bool:
        st = path.stat()
        return (st.st_dev, st.st_ino, st.st_size) in synced

    def synced_directory(path: Path) -> bool:
        st = path.stat()
        return any((dev, ino) == (st.st_dev, st.st_ino) for dev, ino, _ in synced)

    directory = tmp_path / "journal"
    journal = Journal(directory).open()
    monkeypatch.setattr(os, "fsync", recording_fsync)

    journal.append(_trajectory(1))  # a new segment: the run, and the segment's directory entry
    [segment] = directory.glob("*.jsonl")
    assert synced_as_it_is(segment) and synced_directory(directory)

    synced.clear()
    journal.append(_trajectory(2))  # the same segment, one line longer
    assert synced_as_it_is(segment)

    journal.done([("default", "t1"), ("default", "t2")])  # stored: the segment goes
    assert not segment.exists()
    synced.clear()
    journal.append(_trajectory(3))  # a new segment again
    [segment] = directory.glob("*.jsonl")
    assert synced_as_it_is(segment) and synced_directory(directory)
    journal.close()
