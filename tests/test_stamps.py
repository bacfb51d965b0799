"""The served tables' versions told by a `stat` of their version directories on a local store
(`flowmem.storage.stamps`): LanceDB is asked only when one of them changed, or changed too
recently to be trusted, so that another process's commit is never missed."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from flowmem.agents import served_index
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings
from flowmem.storage import stamps
from flowmem.storage.stamps import local_directory, parse_mounts
from tests.factories import induced, revise


def _age(settings: Settings, seconds: float) -> None:
    """Set the served tables' version directories' modification time `seconds` back (as if
    the store had last changed then)."""
    then = time.time_ns() - int(seconds * 1e9)
    for table in ("workflows", "usage", "lifecycle"):
        os.utime(Path(settings.db) / f"{table}__{settings.namespace}.lance" / "_versions", ns=(then, then))


def test_a_settled_store_is_asked_by_stat_and_another_process_commit_is_still_served(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    induced(settings)
    mine, other = store_from(settings), store_from(settings)  # `other`: as another process's
    index = served_index.ServedIndex(mine, settings.namespace, check_every=0.0)
    asked: list[str] = []
    tables = mine._workflows

    def counted(namespace: str) -> Any:
        asked.append(namespace)
        return tables(namespace)

    monkeypatch.setattr(mine, "_workflows", counted)
    task = "Cancel my next meeting with zed"
    [hit] = index.search(task, k=1)
    wid = hit.workflow.id
    assert hit.workflow.version == 1 and index.reloads == 1
    index.search(task, k=1)
    assert len(asked) == 3  # the load's read and version, then the version again: just changed
    _age(settings, 10)
    index.search(task, k=1)
    assert len(asked) == 4  # settled, not seen before: read once, with its stamp
    for _ in range(3):
        assert index.search(task, k=1)[0].workflow.version == 1
    assert len(asked) == 4 and index.reloads == 1  # the same stamp: LanceDB is not asked
    revise(other, wid, 2, "look before you cancel")
    _age(settings, 5)  # a commit first seen once settled: another stamp than the one kept
    [hit] = index.search(task, k=1)
    assert hit.workflow.version == 2 and index.reloads == 2
    revise(other, wid, 3, "look twice")
    asked.clear()
    [hit] = index.search(task, k=1)  # just committed: not trusted, LanceDB asked
    assert hit.workflow.version == 3 and index.reloads == 3 and asked


def _counting(real: Any, name: str, asked: list[str]) -> Any:
    def counted(namespace: str) -> Any:
        asked.append(name)
        return real(namespace)

    return counted


def test_each_table_is_asked_apart(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table whose stamp is as kept is not asked: after another process's outcome, only the
    usage table's version is read through LanceDB."""
    from flowmem.models import UsageStats

    induced(settings)
    mine, other = store_from(settings), store_from(settings)
    asked: list[str] = []
    for name in ("_workflows", "_usage_table", "_lifecycle_table"):
        real = getattr(mine, name)
        monkeypatch.setattr(mine, name, _counting(real, name, asked))
    _age(settings, 10)
    first = mine.served_version()
    asked.clear()
    assert mine.served_version() == first and asked == []
    some = other.list_workflows()[0]
    other.add_usage({(some.id, some.version): UsageStats(served=1, successes=1)})
    now = mine.served_version()
    assert asked == ["_usage_table"] and now[1] > first[1] and (now[0], now[2]) == (first[0], first[2])


def test_only_a_local_file_system_is_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = Path(os.path.realpath(tmp_path))
    assert local_directory(str(tmp_path / "db")) == here / "db"
    assert local_directory(f"file://{tmp_path}/db") == here / "db"
    assert local_directory("s3://bucket/db") is None
    mounts = parse_mounts(
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "40 27 0:50 / /mnt/shared\\040store rw,relatime shared:5 - nfs4 server:/export rw\n"
        "41 27 0:51 / /mnt/fuse rw - fuse.sshfs host: rw\n"
    )
    assert mounts[0] == ("/mnt/shared store", "nfs4")  # the longest first, a space unescaped
    monkeypatch.setattr(stamps, "_mounts", lambda: mounts)
    assert local_directory("/mnt/shared store/db") is None
    assert local_directory("/mnt/fuse/db") is None
    assert local_directory("/srv/db") == Path("/srv/db")
    monkeypatch.setattr(stamps, "_mounts", lambda: ())  # no /proc: not Linux
    assert local_directory(str(tmp_path / "db")) is None


def test_a_missing_or_fresh_table_directory_gives_no_stamp(tmp_path: Path) -> None:
    table = tmp_path / "t.lance" / "_versions"
    found = stamps.TableStamps(tmp_path)
    assert found.stamp(("t",)) is None  # not there
    table.mkdir(parents=True)
    assert found.stamp(("t",)) is None  # just made
    then = time.time_ns() - 3_000_000_000
    os.utime(table, ns=(then, then))
    [(inode, mtime, _)] = found.stamp(("t",)) or []
    assert inode == table.stat().st_ino and mtime == then
    assert stamps.TableStamps(None).stamp(("t",)) is None  # not a local store
