"""The write path that stays flat: group commit in the API's service, and `flowmem maintain`."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowmem.cli import app
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import Stored
from flowmem.jobs.maintain import maintain, said
from flowmem.models import InductionRun, Trajectory
from flowmem.server.committer import GroupCommitter
from flowmem.server.payloads import Recorded
from flowmem.server.service import Service
from flowmem.settings import Settings
from flowmem.storage.maintenance import TableMaintenance, TableState
from tests.factories import make_workflow
from tests.processes import READY_LIMIT
from tests.s3_server import S3Server, prefix, s3  # noqa: F401  (the S3 server's fixtures)


def record(i: int) -> dict[str, Any]:
    return {"id": f"w-{i}", "task": f"Forward the latest email about topic {i} to zed", "steps": []}


def traj(i: int) -> Trajectory:
    return Trajectory(id=f"t{i}", task=f"task {i}")


def in_threads(n: int, work: Any) -> None:
    threads = [threading.Thread(target=work, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_concurrent_writes_are_grouped_and_stored_exactly_once(settings: Settings) -> None:
    svc = Service(settings)
    results: list[Recorded] = []
    lock = threading.Lock()

    def client(k: int) -> None:
        # 8 clients x 40 single-record writes; ids 0-299, and ids 280-299 are sent by two clients.
        for j in range(40):
            i = k * 40 + j if k * 40 + j < 300 else 280 + (k * 40 + j) % 20
            result = svc.record([record(i)])
            with lock:
                results.append(result)

    in_threads(8, client)
    assert len(results) == 320
    assert sum(r.stored for r in results) == 300  # each id stored once, by exactly one request
    assert sum(r.duplicates for r in results) == 20
    assert all(r.stored + r.duplicates == 1 for r in results)
    assert svc.store.count_trajectories() == 300
    assert len({t.id for t in svc.store.list_trajectories(limit=None)}) == 300
    assert svc.committer.requests == 320 and svc.committer.commits < 320  # grouped
    again = svc.record([record(5), record(1000)])  # one old, one new: told apart
    assert (again.stored, again.duplicates) == (1, 1)


def gated(fail_on: str | None = None) -> tuple[GroupCommitter, threading.Event, list[list[str]]]:
    """A committer whose first write waits for a gate, so that what arrives meanwhile is
    grouped into the next batch; a batch holding `fail_on` raises."""
    gate, batches = threading.Event(), []
    seen: set[tuple[str, str]] = set()

    def write(batch: list[Trajectory]) -> Stored:
        batches.append([t.id for t in batch])
        if len(batches) == 1:
            gate.wait(READY_LIMIT)
        if fail_on in batches[-1]:
            raise OSError("disk full")
        new = {(t.namespace, t.id) for t in batch} - seen
        seen.update(new)
        return Stored(frozenset(new))

    return GroupCommitter(write, linger=0), gate, batches


def test_what_arrives_during_a_commit_is_one_commit_and_each_caller_gets_its_own_count() -> None:
    committer, gate, batches = gated()
    counts: dict[int, int] = {}
    first = threading.Thread(target=lambda: counts.__setitem__(0, committer.submit([traj(0)])))
    first.start()
    while not batches:
        threading.Event().wait(0.001)
    waiting = [
        threading.Thread(target=lambda k=k: counts.__setitem__(k, committer.submit([traj(k), traj(0)])))
        for k in range(1, 6)
    ]
    for t in waiting:
        t.start()
    while len(committer._queue) < 5:  # every one queued behind the first commit
        threading.Event().wait(0.001)
    gate.set()
    for t in [first, *waiting]:
        t.join()
    assert len(batches) == 2 and sorted(batches[1]) == sorted([f"t{k}" for k in range(1, 6)] + ["t0"] * 5)
    assert counts == {0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1}  # t0 was already stored: no one counts it
    assert (committer.commits, committer.requests) == (2, 6)


def test_an_error_reaches_exactly_the_requests_of_its_batch() -> None:
    committer, gate, batches = gated(fail_on="t2")
    outcome: dict[int, Any] = {}

    def submit(k: int) -> None:
        try:
            outcome[k] = committer.submit([traj(k)])
        except OSError as err:
            outcome[k] = err

    first = threading.Thread(target=submit, args=(1,))
    first.start()
    while not batches:
        threading.Event().wait(0.001)
    others = [threading.Thread(target=submit, args=(k,)) for k in (2, 3)]
    for t in others:
        t.start()
    while len(committer._queue) < 2:
        threading.Event().wait(0.001)
    gate.set()
    for t in [first, *others]:
        t.join()
    assert outcome[1] == 1
    assert isinstance(outcome[2], OSError) and isinstance(outcome[3], OSError)  # batch [t2, t3]
    assert committer.submit([traj(4)]) == 1  # the thread lives on
    assert committer.submit([traj(3)]) == 1  # t3 was never stored


def test_the_committer_compacts_every_so_many_commits_beside_them() -> None:
    compacted = threading.Event()
    committer = GroupCommitter(
        lambda batch: Stored(frozenset((t.namespace, t.id) for t in batch)), compact=compacted.set
    )
    committer.compact_every = 3
    assert [committer.submit([traj(i)]) for i in range(2)] == [1, 1]
    assert not compacted.is_set()
    committer.submit([traj(2)])
    assert compacted.wait(READY_LIMIT) and committer.commits == 3


def test_maintain_bounds_versions_and_files_and_keeps_every_run_restorable(settings: Settings) -> None:
    store = store_from(settings)
    for k in range(4):  # untagged versions: nothing needs the first three
        if k == 3:
            time.sleep(0.6)  # past the margin kept before the oldest version a run needs
        store.put_workflow(make_workflow(f"manual{k}"))
    run1 = store.commit_run(InductionRun(id="run-1"), [make_workflow(version=1)])
    run2 = store.commit_run(InductionRun(id="run-2"), [make_workflow(version=2, steps=3)])
    svc = Service(settings, store=store)
    svc.committer.compact_every = 10**9  # no compaction by the committer: the worst case
    for i in range(250):  # one commit per write
        svc.record([record(i)])
    before = {t.table: t for t in (store.table_state(n) for n in store.maintained_tables())}
    assert before["trajectories"].versions > 100

    report = maintain(store, keep=timedelta(0))

    after = {t.before.table: t.after for t in report.tables}
    assert store.count_trajectories() == 250
    assert (after["trajectories"].versions, after["trajectories"].fragments) == (1, 1)
    assert after["trajectories"].files == 1
    workflows = next(t for t in report.tables if t.before.table == "workflows__default")
    versions = [v.version for v in store.table_versions()]
    assert workflows.kept_from == run1.base_version == min(versions)  # older ones pruned
    assert workflows.after.versions < workflows.before.versions
    assert report.tags == {"default/run-1": 5, "default/run-2": 6}
    assert [w.version for w in store.list_workflows(at="run-1") if w.id == "forward_latest"] == [1]
    store.rollback(run2.id)
    assert store.get_workflow("forward_latest").version == 1
    store.rollback(run1.id)
    assert sorted(w.id for w in store.list_workflows()) == [f"manual{k}" for k in range(4)]


def test_flowmem_maintain_prints_what_it_did(settings: Settings, tmp_path: Path) -> None:
    """In words and figures, before -> after: table versions pruned, data files compacted and
    removed, rows kept, the run tags read."""
    Service(settings).record([record(i) for i in range(3)])
    store_from(settings).commit_run(InductionRun(id="run-1"), [make_workflow(version=1)])
    env = {"FLOWMEM_DB": settings.db, "FLOWMEM_NAMESPACE": "default"}
    result = CliRunner().invoke(app, ["maintain", "--keep", "0"], env=env)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == (
        "Compacted every table's data files and pruned every table version older than the latest "
        "(--keep 0), except those that run tags and rollbacks need."
    )
    assert (
        "trajectories: 2 table versions -> 1 (1 pruned); 1 data file -> 1 (unchanged) in the latest "
        "version; 1 data file -> 1 (unchanged) on disk; 3 rows (unchanged)." in lines
    )
    (workflows,) = [line for line in lines if line.startswith("workflows__default: ")]
    assert "every one from v1 on kept, for the run tags and rollbacks" in workflows
    assert workflows.endswith("1 row (unchanged).")
    assert lines[-1] == "1 run tag checked out, each readable: default/run-1 (1 row)."
    assert "None" not in result.output
    result = CliRunner().invoke(app, ["maintain", "--json"], env=env)
    summary = json.loads(result.output)
    assert summary["tables"]["trajectories"]["versions"] == [1, 1] and summary["tags_checked"] == 1
    assert summary["tables"]["trajectories"]["rows"] == [3, 3]
    assert "Compacted every table's data files and pruned table versions older than 300 s (--keep)" in (
        CliRunner().invoke(app, ["maintain"], env=env).output
    )


def test_a_figure_maintain_cannot_know_is_said_to_be_unknown() -> None:
    """On object storage no data file is counted (the bucket is not listed): the line says so,
    never `files None -> None`."""
    before = TableState(table="trajectories", versions=12, fragments=12, files=None, rows=12)
    after = TableState(table="trajectories", versions=1, fragments=1, files=None, rows=12)
    line = said(TableMaintenance(before=before, after=after, kept_from=None))
    assert line == (
        "trajectories: 12 table versions -> 1 (11 pruned); 12 data files -> 1 (11 compacted away) "
        "in the latest version; data files on disk: not counted (object storage is not listed); "
        "12 rows (unchanged)."
    )


@pytest.mark.parametrize("keep", [timedelta(hours=1)])
def test_a_long_keep_prunes_nothing_recent(settings: Settings, keep: timedelta) -> None:
    store = store_from(settings)
    for i in range(5):
        store.insert_trajectories([traj(i)])
    result = maintain(store, keep=keep)
    table = next(t for t in result.tables if t.before.table == "trajectories")
    assert table.after.fragments == 1 and table.after.versions >= table.before.versions


def test_flowmem_maintain_on_object_storage_says_what_it_cannot_count(request: pytest.FixtureRequest) -> None:
    """The issue's case: on a bucket `flowmem maintain` printed `files None -> None`
    (tests/s3_server.py's S3 server and prefix)."""
    server: S3Server = request.getfixturevalue("s3")
    where: str = request.getfixturevalue("prefix")
    settings = server.settings(where)
    store = store_from(settings)
    for i in range(3):
        store.insert_trajectories([traj(i)])  # one commit each: three fragments
    result = CliRunner().invoke(app, ["maintain", "--keep", "0"], env=server.env(where))
    assert result.exit_code == 0, result.output
    assert "None" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("trajectories: ")]
    assert "3 data files -> 1 (2 compacted away) in the latest version" in line
    assert "data files on disk: not counted (object storage is not listed)" in line
    assert line.endswith("3 rows (unchanged).")
