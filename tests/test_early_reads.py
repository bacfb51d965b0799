"""Reads of a local store through Lance before the LanceDB connection is open
(`flowmem.storage.early_reads`): the same rows as through the connection, a first search that
does not wait for it, writes that do, and no early read where connecting first could differ."""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flowmem.agents import WorkflowMemory
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings
from flowmem.storage import Store, base, migrations, rows
from flowmem.storage.base import StoreBase
from flowmem.storage.early_reads import EarlyTable, early_table
from flowmem.storage.errors import StoreError
from flowmem.storage.evidence import newest_successes
from tests.factories import copy_store, forward, make_workflow, seed_truth


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A store with runs, usage, status changes, candidates and a rollback (`seed_truth`)."""
    settings = Settings(db=str(tmp_path_factory.mktemp("early") / "db"))
    store = seed_truth(settings)
    # Another namespace's runs (in the same table) and workflows: the reads filter them out.
    other = [forward(200 + i).model_copy(update={"namespace": "other", "id": f"other-{i}"}) for i in range(5)]
    store_trajectories(store, other, settings.scrub)
    store.put_workflow(make_workflow("elsewhere", namespace="other"))
    return settings


def _unconnected(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Store:
    """A fresh store whose LanceDB connection fails if anything opens it."""

    def refused(self: StoreBase) -> Any:
        raise AssertionError("the LanceDB connection was opened")

    store = store_from(settings)
    monkeypatch.setattr(store, "_connect", refused.__get__(store))
    return store


def test_the_reads_of_a_search_before_the_connection_are_those_after_it(
    seeded: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    early, connected = _unconnected(seeded, monkeypatch), store_from(seeded)
    _ = connected.db
    ns = seeded.namespace
    assert isinstance(early._workflows(ns), EarlyTable)
    assert early.served_version(namespace=ns) == connected.served_version(namespace=ns)
    assert early.runs_version() == connected.runs_version()
    a, b = early.served_rows(namespace=ns), connected.served_rows(namespace=ns)
    assert a.ids == b.ids and a.statuses == b.statuses and a.stats == b.stats
    assert np.array_equal(a.versions, b.versions) and np.array_equal(a.keys, b.keys)
    assert np.array_equal(a.owners, b.owners) and np.array_equal(a.shares, b.shares)
    assert np.array_equal(a.by_example, b.by_example)
    every = list(range(len(a.ids)))
    assert a.workflows(every) == b.workflows(every)
    assert {"retired", "demoted", "promoted", "rolled"} & set(a.ids)  # the seed's changes are in them
    e, f = newest_successes(early, ns, 100), newest_successes(connected, ns, 100)
    assert e.tasks == f.tasks and e.actions == f.actions
    assert np.array_equal(e.vectors, f.vectors) and np.array_equal(e.seen_vectors, f.seen_vectors)
    assert early._db is None  # nothing asked for the connection


def test_a_first_search_does_not_wait_for_the_connection(
    seeded: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's memory searches while its writer is still opening the connection (held here
    until the search is done): served the same as once it is open."""
    settings = seeded.model_copy(update={"db": str(tmp_path / "db")})
    copy_store(seeded, settings)
    task = forward(3).task
    with WorkflowMemory(settings) as memory:
        want = [(h.workflow.id, h.workflow.version, h.score) for h in memory.search(task)]
    release, opening = threading.Event(), threading.Event()
    connect = StoreBase._connect

    def held(self: StoreBase) -> Any:
        opening.set()
        assert release.wait(60)
        return connect(self)

    monkeypatch.setattr(StoreBase, "_connect", held)
    memory = WorkflowMemory(settings)
    try:
        assert opening.wait(60)  # the writer is opening it, and held there
        searched: list[list[tuple[str, int, float]]] = []
        search = threading.Thread(
            target=lambda: searched.append(
                [(h.workflow.id, h.workflow.version, h.score) for h in memory.search(task)]
            )
        )
        search.start()
        search.join(30)
        assert searched, "the first search waited for the connection"
        assert memory.store._db is None
        found = searched[0]
    finally:
        release.set()
        memory.close()
    assert found == want and found


def test_a_write_through_an_early_handle_goes_through_the_connection(
    seeded: Settings, tmp_path: Path
) -> None:
    store = copy_store(seeded, seeded.model_copy(update={"db": str(tmp_path / "db")}))
    handle = store._trajectories()
    assert isinstance(handle, EarlyTable) and store._db is None
    before = handle.version
    rows = store._trajectories().search().limit(1).to_arrow()
    handle.add(rows)  # not a read: LanceDB's table, the connection opened for it
    assert store._db is not None and handle.version == before + 1
    assert not isinstance(store._trajectories(), EarlyTable)  # connected: LanceDB's own handle
    assert copy.copy(handle).version == handle.version  # a copy probes no LanceDB attribute
    assert handle.search().to_arrow().num_rows == store._trajectories().count_rows()


def test_no_early_read_where_connecting_first_could_differ(
    seeded: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Object storage, a table not there, vectors of another embedder, a store of another
    schema version (the connection migrates or refuses it): the connection decides."""
    ok = lambda root: True  # noqa: E731
    real, connected = (lambda: None), (lambda: False)
    name, key = "workflows__default", rows.EMBEDDER_KEY
    store = store_from(seeded)
    schema = rows.workflow_schema(store.embedder.dim, store.embedder.name)
    expected = (schema.metadata or {}).get(key)
    assert expected is not None
    assert early_table(seeded.db, name, key, expected, ok, real, connected) is not None
    assert early_table("s3://bucket/db", name, key, expected, ok, real, connected) is None
    assert early_table(seeded.db, "workflows__elsewhere", key, expected, ok, real, connected) is None
    assert early_table(seeded.db, name, key, b"hashing-v2-64", ok, real, connected) is None
    assert early_table(seeded.db, name, key, expected, lambda root: False, real, connected) is None
    assert isinstance(store._early(name, schema), EarlyTable)
    # Another embedder configured: its tables are not read early (the connection raises).
    other = store_from(seeded.model_copy(update={"embedding_dim": 64}))
    narrow = rows.workflow_schema(other.embedder.dim, other.embedder.name)
    assert other._early(name, narrow) is None
    with pytest.raises(StoreError, match="holds vectors of embedder"):
        other._workflows(seeded.namespace)
    # A store whose meta table records another schema version than this flowmem's.
    monkeypatch.setattr(base, "SCHEMA_VERSION", migrations.SCHEMA_VERSION + 1)
    assert store_from(seeded)._early(name, schema) is None
