"""An agent never hangs on its memory (issue 25, item 3).

Whatever the store and the disk do, `record`, `step`, `finish`, `flush` and `close` return
within `flush_timeout` (twice it for `close`); runs that cannot be written anywhere are
reported once, in one line, with their count and where they were meant to go; runs spilled
to the unsaved-runs file are taken back by the next memory that can write.

The failures are injected (a store that raises EROFS or never answers, an fsync that raises
ENOSPC, a spill path under a regular file), so these tests run anywhere; the last ones make
the disk itself read-only or full (a read-only bind mount, a 64 KiB tmpfs) in a private mount
namespace, and are skipped where `unshare` may not mount. A call that would hang runs on a
thread that the test joins with a generous limit: the limit only detects a hang.
"""

from __future__ import annotations

import errno
import logging
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem import Settings, WorkflowMemory
from flowmem.interchange import spill
from flowmem.jobs.factories import store_from
from flowmem.models import Step, Trajectory

HANG = 60.0
"""Seconds after which a call that has not returned is taken to hang (only a detector)."""


def _returns(call: Callable[[], Any]) -> Any:
    """Run `call` on a thread; fail if it has not returned within HANG seconds."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(call()), daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), f"{call} did not return within {HANG:g} s"
    return result[0] if result else None


def _record(memory: WorkflowMemory, *ids: str) -> None:
    for i in ids:
        with memory.record(f"forward the mail about {i}", id=i) as run:
            run.step("mail.search", {"query": i}, observation="1 mail")
            run.finish(success=True)


def _lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """What flowmem said at WARNING or above: what a user sees without configuring logging."""
    return [r for r in caplog.records if r.name.startswith("flowmem") and r.levelno >= logging.WARNING]


def _refusing_store(*args: Any, **kwargs: Any) -> int:
    raise OSError(errno.EROFS, "Read-only file system")


def _spilled_ids(settings: Settings) -> set[str]:
    return {t.id for t in spill.read(spill.spill_path(settings))}


@pytest.fixture
def refusing_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write to the store fails as on a read-only file system."""
    monkeypatch.setattr("flowmem.agents.writer.store_trajectories", _refusing_store)


@pytest.fixture
def stuck_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Every write to the store blocks (a disk or object store that does not answer) until
    the test ends; then it fails, so nothing reaches the store."""
    release = threading.Event()
    held: set[threading.Thread] = set()

    def stuck(*args: Any, **kwargs: Any) -> int:
        held.add(threading.current_thread())
        release.wait()
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr("flowmem.agents.writer.store_trajectories", stuck)
    yield release
    release.set()
    # The threads it held retry once released: let them end before the next test patches the
    # same function (a memory opens at once now, so that test would start within their retry).
    for thread in held:
        thread.join(HANG)


def _full_disk(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> Settings:
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    return settings


def _spill_under_a_file(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> Settings:
    blocker = Path(settings.db).parent / "not-a-directory"
    blocker.write_text("")
    return settings.model_copy(update={"quarantine": str(blocker / "db.quarantine.jsonl")})


@pytest.mark.parametrize(
    ("spill_failure", "reason"),
    [(_full_disk, "No space left on device"), (_spill_under_a_file, "Not a directory")],
    ids=["full-disk", "spill-not-writable"],
)
def test_runs_that_can_be_written_nowhere_are_reported_once_and_close_returns(
    settings: Settings,
    refusing_store: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    spill_failure: Callable[[pytest.MonkeyPatch, Settings], Settings],
    reason: str,
) -> None:
    settings = spill_failure(monkeypatch, settings.model_copy(update={"flush_batch": 2}))
    caplog.set_level(logging.WARNING, logger="flowmem")
    memory = WorkflowMemory.open(settings)
    _record(memory, "r1", "r2", "r3")
    assert _returns(memory.flush) is True  # the writer is done with them: nothing left to wait for
    _record(memory, "r4", "r5")
    _returns(memory.close)
    [line] = _lines(caplog)
    assert line.levelno == logging.ERROR
    text = line.getMessage()
    assert text.startswith(f"flowmem: 5 runs not saved, meant for {settings.db}: ")
    assert "Read-only file system" in text and reason in text
    assert str(spill.spill_path(settings)) in text and "\n" not in text


def test_runs_the_store_refused_are_spilled_then_taken_back_by_the_next_memory(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="flowmem")
    with monkeypatch.context() as patch:
        patch.setattr("flowmem.agents.writer.store_trajectories", _refusing_store)
        memory = WorkflowMemory.open(settings)
        _record(memory, "r1", "r2", "r3")
        _returns(memory.close)
    [line] = _lines(caplog)
    text = line.getMessage()
    assert text.startswith(f"flowmem: 3 runs not stored in {settings.db}: the store refused them")
    assert f"kept in {spill.spill_path(settings)}" in text
    assert _spilled_ids(settings) == {"r1", "r2", "r3"}

    WorkflowMemory.open(settings).close()  # the store writes again: the next memory takes them back
    store = store_from(settings)
    assert sorted(t.id for t in store.list_trajectories()) == ["r1", "r2", "r3"]
    assert [t.actions for t in store.get_trajectories(["r1"])] == [["mail.search"]]
    assert list(Path(settings.db).parent.glob("*.unsaved.jsonl*")) == []
    WorkflowMemory.open(settings).close()
    assert store_from(settings).count_trajectories() == 3


def test_a_spool_that_cannot_be_written_spills_and_the_next_memory_takes_back_into_it(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    from flowmem.interchange import pending_files

    spooled = settings.model_copy(update={"record_to": "spool"})
    spooled.spool_path.parent.mkdir(parents=True, exist_ok=True)
    spooled.spool_path.write_text("")  # a file where the spool directory should be
    caplog.set_level(logging.WARNING, logger="flowmem")
    memory = WorkflowMemory.open(spooled)
    _record(memory, "r1", "r2")
    _returns(memory.close)
    [line] = _lines(caplog)
    assert line.getMessage().startswith(f"flowmem: 2 runs not stored in {spooled.spool_path}: ")
    spooled.spool_path.unlink()
    spooled.spool_path.mkdir()
    WorkflowMemory.open(spooled).close()
    [file] = pending_files(spooled.spool_path)
    assert sorted(t.id for t in spill.read(file)) == ["r1", "r2"]
    assert not spill.spill_path(settings).exists()


@pytest.mark.parametrize("from_signal", [False, True], ids=["close", "close-from-sigterm"])
def test_a_store_that_never_answers_holds_neither_flush_nor_close(
    settings: Settings, stuck_store: threading.Event, caplog: pytest.LogCaptureFixture, from_signal: bool
) -> None:
    settings = settings.model_copy(update={"flush_timeout": 0.3})
    caplog.set_level(logging.WARNING, logger="flowmem")
    memory = WorkflowMemory.open(settings)
    _record(memory, "r1", "r2")
    assert _returns(memory.flush) is False  # bounded by flush_timeout, not forever
    _record(memory, "r3")
    _returns(lambda: memory.close(from_signal=from_signal))
    assert _spilled_ids(settings) == {"r1", "r2", "r3"}  # kept for the next memory
    [line] = _lines(caplog)
    assert line.getMessage().startswith(
        f"flowmem: 3 runs not stored in {settings.db}: the store did not answer within 0.3 s"
    )


def test_a_batch_stored_after_a_retry_is_one_line_at_close(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from flowmem.agents import writer
    from flowmem.jobs import ingest

    failures = [RuntimeError("lance error: Commit conflict for version 7\n(the details)")]

    def conflict_once(*args: Any, **kwargs: Any) -> ingest.Stored:
        if failures:
            raise failures.pop()
        return store_trajectories(*args, **kwargs)

    store_trajectories = ingest.store_trajectories
    monkeypatch.setattr(writer, "store_trajectories", conflict_once)
    caplog.set_level(logging.WARNING, logger="flowmem")
    memory = WorkflowMemory.open(settings)
    _record(memory, "r1", "r2")
    _returns(memory.close)
    assert store_from(settings).count_trajectories() == 2
    assert [r.getMessage() for r in _lines(caplog)] == [
        "flowmem: storing took more than one attempt 1 time "
        "(first failure: RuntimeError: lance error: Commit conflict for version 7)"
    ]


def test_finish_returns_when_the_durable_journal_cannot_be_written(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from flowmem.interchange.journal import Journal

    def no_space(self: Journal, trajectory: Trajectory) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Journal, "append", no_space)
    caplog.set_level(logging.WARNING, logger="flowmem")
    memory = WorkflowMemory.open(settings.model_copy(update={"durable": True}))
    _record(memory, "r1", "r2")  # finish raised OSError here
    _returns(memory.close)
    assert store_from(settings).count_trajectories() == 2
    [line] = _lines(caplog)
    assert line.getMessage() == (
        f"flowmem: 2 finished runs not journaled in {settings.journal_path} "
        "([Errno 28] No space left on device): durable only once stored"
    )


def test_a_store_deleted_under_a_running_agent(settings: Settings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="flowmem")
    memory = WorkflowMemory.open(settings)
    _record(memory, "before")
    assert memory.flush()
    shutil.rmtree(settings.db)
    _record(memory, "after1", "after2")
    _returns(memory.close)
    [line] = _lines(caplog)
    assert line.getMessage().startswith(f"flowmem: 2 runs not stored in {settings.db}")
    assert _spilled_ids(settings) == {"after1", "after2"}
    WorkflowMemory.open(settings).close()  # a new store where the old one was, and the runs in it
    assert sorted(t.id for t in store_from(settings).list_trajectories()) == ["after1", "after2"]


def test_a_copy_a_dead_taker_left_is_taken_back_and_a_live_ones_is_left(settings: Settings) -> None:
    path = spill.spill_path(settings)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    run = Trajectory(id="left", task="a task", steps=[Step(action="a")], success=True)
    live = Trajectory(id="taking", task="a task", steps=[Step(action="a")], success=True)
    spill.append(path.with_name(f"{path.name}.{gone.stdout.strip()}-1.taking"), [run])
    live_copy = path.with_name(f"{path.name}.{os.getppid()}-1.taking")  # pytest's parent: alive
    spill.append(live_copy, [live])
    WorkflowMemory.open(settings).close()
    assert [t.id for t in store_from(settings).list_trajectories()] == ["left"]
    assert live_copy.exists()


def test_what_is_appended_while_the_file_is_taken_back_lands_in_a_new_file(tmp_path: Path) -> None:
    path = tmp_path / "db.unsaved.jsonl"
    runs = [Trajectory(id=f"r{i}", task="a task", steps=[Step(action="a")]) for i in range(3)]
    spill.append(path, runs[:2])
    [copy] = spill.claim(path)
    spill.append(path, runs[2:])
    assert [t.id for t in spill.read(copy)] == ["r0", "r1"]
    assert [t.id for t in spill.read(path)] == ["r2"]
    claimed = spill.claim(path)  # its own copy again (never stored), and the new file
    assert copy in claimed and len(claimed) == 2 and not path.exists()


# -- the disk itself read-only or full: a private mount namespace ---------------------------

AGENT = textwrap.dedent(
    """
    import sys
    from flowmem import Settings, WorkflowMemory

    memory = WorkflowMemory.open(Settings(db=sys.argv[1]))
    for i in range(3):
        with memory.record(f"forward the mail about {i}", id=f"r{i}") as run:
            run.step("mail.search", {"query": str(i)}, observation="1 mail")
            run.finish(success=True)
    """
)  # no close(): the exit closes it, as in most agent scripts


def _unshare() -> list[str]:
    as_root = [] if os.geteuid() == 0 else ["--map-root-user"]
    return ["unshare", *as_root, "--mount", "--propagation", "private"]


@pytest.fixture(scope="module")
def mounts(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Skip unless this process may mount in a private mount namespace (root, or user
    namespaces allowed)."""
    probe = tmp_path_factory.mktemp("probe")
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed")
    done = subprocess.run(
        [*_unshare(), "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {probe}"],
        capture_output=True,
        timeout=60,
    )
    if done.returncode != 0:
        pytest.skip(f"may not mount here: {done.stderr.decode().strip()}")


def _agent_under(mount: str, db: Path) -> list[str]:
    """Run the agent script after `mount` (shell) in a private mount namespace; its stderr."""
    command = [
        *_unshare(),
        "sh",
        "-c",
        f'set -e; {mount}; exec "$@"',
        "sh",
        sys.executable,
        "-c",
        AGENT,
        str(db),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


def _existing_store(settings: Settings) -> None:
    memory = WorkflowMemory.open(settings)
    _record(memory, "earlier")
    memory.close()


def test_an_agent_on_a_read_only_store_spills_and_the_next_process_takes_back(
    settings: Settings, mounts: None
) -> None:
    _existing_store(settings)
    db = settings.db
    [line] = _agent_under(f"mount --bind {db} {db}; mount -o remount,ro,bind {db}", Path(db))
    assert line.startswith(f"flowmem: 3 runs not stored in {db}: the store refused them")
    assert "Read-only file system" in line
    WorkflowMemory.open(settings).close()
    assert sorted(t.id for t in store_from(settings).list_trajectories()) == ["earlier", "r0", "r1", "r2"]


def test_an_agent_on_a_read_only_store_and_spill_exits_with_one_line(
    settings: Settings, mounts: None
) -> None:
    _existing_store(settings)
    area = Path(settings.db).parent
    [line] = _agent_under(f"mount --bind {area} {area}; mount -o remount,ro,bind {area}", Path(settings.db))
    assert line.startswith(f"flowmem: 3 runs not saved, meant for {settings.db}: the store refused them")
    assert (
        f"the spill file {spill.spill_path(settings)} is not writable ([Errno 30] Read-only file system)"
        in line
    )


def test_an_agent_on_a_full_disk_exits_with_one_line(tmp_path: Path, mounts: None) -> None:
    area, db = tmp_path / "small", tmp_path / "small" / "db"
    area.mkdir()
    create = f"from flowmem import WorkflowMemory; WorkflowMemory.open({str(db)!r}).close()"
    fill = (
        f"mount -t tmpfs -o size=1m tmpfs {area}; {sys.executable} -c {shlex.quote(create)}; "
        f"dd if=/dev/zero of={area}/fill bs=4k 2>/dev/null || true"
    )
    [line] = _agent_under(fill, db)
    assert line.startswith(f"flowmem: 3 runs not saved, meant for {db}: the store refused them")
    assert "No space left on device" in line
