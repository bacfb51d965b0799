"""Schema migrations: a store written by release 0.1.0 opens, migrates in place and keeps
every fact; a new store is stamped; a newer one is refused.

The fixture `tests/fixtures/store-0.1.0.tar.gz` was written by release 0.1.0's own code
(`tests/fixtures/make_release_store.py`); `store-0.1.0.json` holds what it contained.
"""

from __future__ import annotations

import json
import tarfile
import threading
from pathlib import Path
from typing import Any

import pytest

from flowmem.agents import WorkflowMemory
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings
from flowmem.storage import Store, StoreError
from flowmem.storage.migrations import META, SCHEMA_VERSION, STEPS, migrate, schema_version, table_names
from tests.factories import lance_connect

FIXTURES = Path(__file__).parent / "fixtures"
FACTS: dict[str, Any] = json.loads((FIXTURES / "store-0.1.0.json").read_text())


@pytest.fixture
def release_db(tmp_path: Path) -> str:
    """A fresh copy of the store release 0.1.0 wrote (never migrated)."""
    with tarfile.open(FIXTURES / "store-0.1.0.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    return str(tmp_path / "db")


def open_store(db: str, namespace: str = "default") -> Store:
    """A store on `db` built as the application builds it (opening it does no I/O yet)."""
    return store_from(Settings(db=db, namespace=namespace))


def _table_versions(db: str) -> dict[str, int]:
    conn = lance_connect(db)
    return {name: int(conn.open_table(name).version) for name in table_names(conn)}


def _stamp(db: str, version: int) -> None:
    """Record `version` as the store's schema version, whatever it was."""
    meta = lance_connect(db).open_table(META)
    meta.update(where="key = 'schema_version'", values={"value": str(version)})


def test_the_fixture_is_a_0_1_0_store(release_db: str) -> None:
    conn = lance_connect(release_db)
    assert schema_version(conn) is None
    assert table_names(conn) == FACTS["tables"]


@pytest.mark.parametrize("namespace", sorted(FACTS["namespaces"]))
def test_a_0_1_0_store_is_migrated_and_keeps_every_fact(release_db: str, namespace: str) -> None:
    facts = FACTS["namespaces"][namespace]
    store = open_store(release_db, namespace)
    trajectories = store.list_trajectories(limit=None)
    assert schema_version(store.db) == SCHEMA_VERSION
    assert table_names(store.db) == sorted([*FACTS["tables"], META])

    assert store.count_trajectories() == len(trajectories) == facts["trajectories"]
    assert sum(t.success is False for t in trajectories) == facts["failed"]
    assert sum(bool(t.workflows_used) for t in trajectories) == facts["with_workflows_used"]
    latest = store.list_workflows()
    assert {w.id: {"version": w.version, "status": w.status} for w in latest} == facts["workflows"]
    for wid, versions in facts["histories"].items():
        assert [w.version for w in store.history(wid)] == versions
    runs = [
        {"id": r.id, "kind": r.kind, "tag": r.tag, "rolled_back_run": r.rolled_back_run}
        for r in store.list_runs()
    ]
    assert runs == facts["runs"]
    assert sorted(t for v in store.table_versions() for t in v.tags) == facts["tags"]
    # An old run's tag still reads the versions it committed, rolled back or not.
    for run_id, versions in facts["at_tag"].items():
        assert {w.id: w.version for w in store.list_workflows(at=run_id)} == versions
    usage = {f"{i}@{v}": u.model_dump() for (i, v), u in sorted(store.usage().items())}
    assert usage == facts["usage"]
    transitions = [[t.workflow_id, t.version, t.old, t.new] for t in store.transitions()]
    assert transitions == facts["transitions"]


def test_search_serves_the_migrated_workflows(release_db: str) -> None:
    for namespace, facts in FACTS["namespaces"].items():
        with WorkflowMemory(Settings(db=release_db, namespace=namespace)) as memory:
            hits = memory.search(facts["search"]["task"])
        assert hits and {h.workflow.namespace for h in hits} == {namespace}
        assert facts["search"]["workflow"] in {h.workflow.id for h in hits}


def test_reopening_a_migrated_store_changes_nothing(release_db: str) -> None:
    assert open_store(release_db).count_trajectories() == FACTS["namespaces"]["default"]["trajectories"]
    before = _table_versions(release_db)
    for namespace in FACTS["namespaces"]:
        open_store(release_db, namespace).list_workflows()
    assert migrate(lance_connect(release_db), where=release_db) == SCHEMA_VERSION
    assert _table_versions(release_db) == before


def test_a_new_store_gets_the_current_version(tmp_path: Path) -> None:
    db = str(tmp_path / "new")
    store = open_store(db)
    assert store.count_trajectories() == 0
    assert schema_version(store.db) == SCHEMA_VERSION
    assert "trajectories" in table_names(store.db)


def test_a_newer_store_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    open_store(db).count_trajectories()
    _stamp(db, SCHEMA_VERSION + 1)
    store = open_store(db)
    message = (
        f"the store at {db} has schema version {SCHEMA_VERSION + 1}, newer than this flowmem "
        f"understands ({SCHEMA_VERSION}): upgrade flowmem"
    )
    for _ in range(2):  # a refused connection is not kept: every later use is refused too
        with pytest.raises(StoreError) as err:
            store.count_trajectories()
        assert str(err.value) == message and "\n" not in message
    assert schema_version(lance_connect(db)) == SCHEMA_VERSION + 1  # left as it was


def test_an_unreadable_version_is_refused(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    open_store(db).count_trajectories()
    lance_connect(db).open_table(META).update(where="key = 'schema_version'", values={"value": "x"})
    with pytest.raises(StoreError, match="unreadable schema version 'x'"):
        open_store(db).count_trajectories()


def test_concurrent_openers_migrate_once_and_agree(release_db: str, tmp_path: Path) -> None:
    new_db = str(tmp_path / "new")
    results: list[int] = []
    errors: list[BaseException] = []

    def migrate_once(db: str) -> None:
        try:
            results.append(migrate(lance_connect(db), where=db))
        except BaseException as err:  # surfaced by the assertion below
            errors.append(err)

    threads = [threading.Thread(target=migrate_once, args=(db,)) for db in [release_db, new_db] * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and results == [SCHEMA_VERSION] * 8
    for db in (release_db, new_db):
        rows = lance_connect(db).open_table(META).to_arrow().to_pylist()
        assert rows == [{"key": "schema_version", "value": str(SCHEMA_VERSION)}]


def test_a_slower_opener_never_lowers_the_version(tmp_path: Path) -> None:
    from flowmem.storage.migrations import _record

    db = str(tmp_path / "db")
    migrate(lance_connect(db), where=db)
    _stamp(db, SCHEMA_VERSION + 2)
    _record(lance_connect(db).open_table(META), SCHEMA_VERSION + 1, db)
    assert schema_version(lance_connect(db)) == SCHEMA_VERSION + 2


def test_every_step_says_which_versions_it_migrates() -> None:
    assert len(STEPS) == SCHEMA_VERSION
    for n, step in enumerate(STEPS):
        assert (step.__doc__ or "").startswith(f"v{n} -> v{n + 1}: "), step.__name__


# -- one test per step, on a store at the step's input version ------------------------------


def at_version(release_db: str, version: int) -> Any:
    """A connection to the 0.1.0 fixture brought to `version` by the steps before it: the
    input of step `version` (the fixture itself for step 0, which has no meta table)."""
    conn = lance_connect(release_db)
    for step in STEPS[:version]:
        step(conn)
    if version:
        conn.create_table(META, data=[{"key": "schema_version", "value": str(version)}])
    return conn


def test_step_0_to_1_keeps_the_0_1_0_layout(release_db: str) -> None:
    conn = at_version(release_db, 0)
    before = _table_versions(release_db)
    schemas = {name: conn.open_table(name).schema for name in table_names(conn)}
    STEPS[0](conn)
    assert _table_versions(release_db) == before
    assert {name: conn.open_table(name).schema for name in table_names(conn)} == schemas


def test_step_1_to_2_gives_every_workflow_version_its_kind(release_db: str) -> None:
    conn = at_version(release_db, 1)
    names = [n for n in table_names(conn) if n.startswith("workflows__")]
    rows = {n: conn.open_table(n).count_rows() for n in names}
    STEPS[1](conn)
    STEPS[1](conn)  # a concurrent opener or a resumed migration runs it again: no change
    for name in names:
        table = conn.open_table(name)
        assert table.count_rows() == rows[name]
        assert set(table.to_arrow().column("kind").to_pylist()) == {"task"}
    # The migrated store reads, and writes new versions with a kind.
    store = open_store(release_db)
    [first, *_] = store.list_workflows()
    assert first.kind == "task"
    v2 = first.model_copy(update={"version": first.version + 1, "parent_version": first.version})
    store.put_workflow(v2.model_copy(update={"kind": "subroutine", "pitfalls": ["new"]}))
    assert store.get_workflow(first.id).kind == "subroutine"


def test_step_2_to_3_gives_every_workflow_version_key_shares_read_as_whole(release_db: str) -> None:
    conn = at_version(release_db, 2)
    names = [n for n in table_names(conn) if n.startswith("workflows__")]
    rows = {n: conn.open_table(n).count_rows() for n in names}
    STEPS[2](conn)
    STEPS[2](conn)  # idempotent
    for name in names:
        table = conn.open_table(name)
        assert table.count_rows() == rows[name]
        assert set(table.to_arrow().column("key_shares").to_pylist()) == {None}
    # Search reads a version without shares as whole (the cosine alone), as before.
    store = open_store(release_db)
    served, vectors, owners, shares = store.workflow_index()
    assert served and len(shares) == len(owners) == len(vectors) and set(shares) == {1.0}
