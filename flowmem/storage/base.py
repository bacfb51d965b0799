"""The store's plumbing: the LanceDB connection (migrated on open), tables and version checks.

`flowmem.storage` is the only package that imports lancedb and pyarrow. The errors are in
`flowmem.storage.errors`, filters, reads and write retries in `flowmem.storage.lance_ops`.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from flowmem.models import Workflow
from flowmem.retrieval.embed import Embedder
from flowmem.settings import Settings
from flowmem.storage import rows

if TYPE_CHECKING:
    from lancedb.table import Table
from flowmem.storage.early_reads import EarlyTable, SchemaCheck, early_table
from flowmem.storage.errors import (
    NotFoundError,
    ObjectStoreError,
    StoreAccessError,
    StoreError,
    VersionConflictError,
)
from flowmem.storage.lance_ops import quote, retry_conflicts, select
from flowmem.storage.location import check_location, os_error_line
from flowmem.storage.migrations import SCHEMA_VERSION, migrate, read_version
from flowmem.storage.object_store import access_problem, check_endpoint, storage_options
from flowmem.storage.stamps import Stamp, TableStamps

__all__ = ["TRAJECTORIES", "Key", "KnownKeys", "StoreBase", "Vector", "release_all"]

Vector = npt.NDArray[np.float32]

TRAJECTORIES = "trajectories"
_METADATA_CACHE = 64 * 1024 * 1024
_INDEX_CACHE = 128 * 1024 * 1024
RUNS = "runs"


Key = tuple[str, str]
"""(namespace, id) of a trajectory."""


@dataclass
class KnownKeys:
    """The keys of every stored trajectory as of one version of the trajectories table, as
    a store's own writes left them (`flowmem.storage.appends`)."""

    version: int = -1
    """The table version they are those of (-1: none; read them before the next write)."""
    keys: set[Key] = field(default_factory=set)
    """The keys themselves."""
    fragments: set[int] = field(default_factory=set)
    """The ids of the table's fragments whose keys `keys` holds (Lance never reuses one)."""
    neutral: set[int] = field(default_factory=set)
    """Later versions that moved no key: compactions this store made."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Held for a whole write: a store's threads write one at a time."""
    refreshes: int = 0
    """How often every key was read from the table (what tests and benchmarks look at)."""
    catch_ups: int = 0
    """How often the keys of the fragments other writers added were read."""
    keys_read: int = 0
    """Keys read from the table, in all."""
    checks: int = 0
    """Appends that another commit preceded, checked for keys stored before them."""

    def explains(self, start: int, end: int) -> bool:
        """Whether every version after `start` up to `end` moved no key (`start` >= 0)."""
        if start < 0 or end < start:
            return False
        if all(v in self.neutral for v in range(start + 1, end + 1)):
            self.neutral = {v for v in self.neutral if v > end}
            return True
        return False


_CONNECTED: weakref.WeakSet[StoreBase] = weakref.WeakSet()
"""Stores holding a LanceDB connection (`release_all`)."""


def release_all() -> None:
    """Drop every store's LanceDB connection and tables now, while the interpreter is whole.

    Left to be collected during interpreter finalization, LanceDB's handles can end the
    process with "Fatal Python error: PyGILState_Release" (lance-format/lance#4152): a normal
    exit after recording runs did so in 4 of 20 tries. The hooks' exit handler calls this
    after their last flush; a store used afterwards connects again."""
    for store in list(_CONNECTED):
        store._tables.clear()
        store._db = None
        store._appender = None
    gc.collect()


class StoreBase:
    """Connection and tables; the verbs are in `Store` and its mixins."""

    def __init__(self, settings: Settings, *, embedder: Embedder) -> None:
        check_location(settings.db)
        self.settings = settings
        self.storage_options = storage_options(settings)
        """What every connection and Lance dataset of this store opens with (endpoint, region,
        credentials of an object store; None for a local path)."""
        self.embedder = embedder
        """The embedder whose vectors the tables hold (`flowmem.jobs.factories.store_from`
        builds the one the settings select)."""
        self._db: Any = None
        self._connecting = threading.Lock()
        """Held while the connection opens: a memory's writer opens it in the background
        (`WorkflowMemory`), and another thread that needs it meanwhile waits for that one."""
        self._tables: dict[str, Table] = {}
        self._schema_check = SchemaCheck()
        """Whether the store records this flowmem's schema version, for reads before the
        connection is open (`early_reads`)."""
        self._early_tables: dict[str, EarlyTable | None] = {}
        """Per table, its handle for those reads (None: the table waits for the connection)."""
        self._early_lock = threading.Lock()
        self._appender: Any = None
        self._usage_commits = 0
        """Usage commits this object made (`VersionStateMixin.put_usage` compacts every so many)."""
        self._usage_written: dict[str, dict[int, dict[tuple[str, int], Any]]] = {}
        """Per namespace, the figures of this store's last usage commits by the table version
        each made (`VersionStateMixin.usage_since`)."""
        self._known = KnownKeys()
        """The stored trajectories' keys as of a table version (`flowmem.storage.appends`)."""
        self._stamps: TableStamps | None = None
        """Where the served tables' versions can be told by a `stat` (made on the first look)."""
        self._stamped: dict[str, tuple[tuple[Stamp, int] | None, ...]] = {}
        """Per namespace: the served tables' stamp and the versions read with it."""
        self.writes = 0
        """Commits this object made that change what is served (versions, status, usage, a
        rollback): an in-process served index rebuilds at once after one, without waiting
        for its next look at the store's table versions."""

    # -- plumbing -----------------------------------------------------------------------

    @property
    def db(self) -> Any:
        """The LanceDB connection, opened on first use (opening a Store only looks at its path;
        importing it loads neither LanceDB nor Arrow). Opened once, by the first thread that
        asks; the others wait for it."""
        if self._db is None:
            with self._connecting:
                if self._db is None:
                    self._db = self._connect()
                    _CONNECTED.add(self)
        return self._db

    def _connect(self) -> Any:
        from flowmem.storage.lance_import import load_lancedb

        lancedb = load_lancedb()

        # A zero interval: every read sees what other processes committed before it. Bounded
        # caches: LanceDB's defaults let them grow by ~100 KB per commit, to gigabytes.
        session = lancedb.Session(
            metadata_cache_size_bytes=_METADATA_CACHE, index_cache_size_bytes=_INDEX_CACHE
        )
        check_endpoint(self.settings)  # an object store's endpoint that does not answer: one line now
        try:
            db = lancedb.connect(
                self.settings.db,
                read_consistency_interval=timedelta(0),
                storage_options=self.storage_options,
                session=session,
            )
            migrate(db, where=self.settings.db)  # kept only once migrated: a newer store stays refused
        except Exception as err:
            if line := os_error_line(err, self.settings.db):
                raise StoreAccessError(line) from None
            if line := access_problem(err, self.settings):
                raise ObjectStoreError(line) from err
            raise
        return db

    def prepare(self) -> None:
        """Load the embedder and the LanceDB client, and create the trajectories table, now
        rather than on first write.

        A process that writes from a background thread has that thread call this first
        (`WorkflowMemory`'s writer), so that a write at interpreter exit finds everything
        loaded: Python then refuses some imports that lancedb and sklearn make lazily.
        """
        self.embedder.embed(["warm up"])
        _ = self.db
        import lance  # noqa: F401  (a writer's first write reads fragments through it)

        # The trajectories table is created (or opened) now, before any append: Lance's creation
        # is not atomic (lance-format/lance#4451), and a second creation racing a first one
        # commits as an overwrite, which would drop rows appended in between.
        _ = self._trajectories()

    def _table(self, name: str, schema: Any) -> Any:
        """The table `name` (created with `schema` when missing); until the LanceDB connection
        is open, a handle that reads a local store through Lance (`early_reads`)."""
        table = self._tables.get(name)
        if table is None and self._db is None:
            early = self._early(name, schema)
            if early is not None:
                return early  # not in `_tables`: once connected, LanceDB's own handle is
        return table if table is not None else self._open_table(name, schema)

    def _early(self, name: str, schema: Any) -> EarlyTable | None:
        """`early_reads.early_table` for this store, made once per table."""
        with self._early_lock:
            if name not in self._early_tables:
                self._early_tables[name] = early_table(
                    self.settings.db,
                    name,
                    rows.EMBEDDER_KEY,
                    (schema.metadata or {}).get(rows.EMBEDDER_KEY),
                    lambda root: self._schema_check.holds(root, SCHEMA_VERSION, read_version),
                    lambda: self._open_table(name, schema),
                    lambda: self._db is not None,
                )
            return self._early_tables[name]

    def _open_table(self, name: str, schema: Any) -> Any:
        """The table `name` through the LanceDB connection (waiting for it to open), created
        with `schema` when missing, its embedder checked; kept."""
        table = self._tables.get(name)
        if table is None:
            try:
                table = self.db.open_table(name)
            except ValueError:  # not there yet; another process may be creating it right now
                # (two creations at once: one commits, the other fails as a retryable conflict)
                table = retry_conflicts(lambda: self.db.create_table(name, schema=schema, exist_ok=True))
            stored = (table.schema.metadata or {}).get(rows.EMBEDDER_KEY)
            expected = (schema.metadata or {}).get(rows.EMBEDDER_KEY)
            if stored != expected:
                raise StoreError(
                    f"table {name!r} at {self.settings.db} holds vectors of embedder "
                    f"{(stored or b'?').decode()}, but {(expected or b'?').decode()} is "
                    "configured; use the same embedding settings or another FLOWMEM_DB"
                )
            self._tables[name] = table
        return table

    def _trajectories_for_appends(self) -> Any:
        """A handle of the trajectories table that reloads only when told to
        (`flowmem.storage.appends`), on a connection of its own."""
        if self._appender is None:
            from flowmem.storage.lance_import import load_lancedb

            lancedb = load_lancedb()

            _ = self._trajectories()  # migrated, created, and its embedder checked
            session = lancedb.Session(metadata_cache_size_bytes=_METADATA_CACHE, index_cache_size_bytes=0)
            connection = lancedb.connect(
                self.settings.db, storage_options=self.storage_options, session=session
            )
            self._appender = connection.open_table(TRAJECTORIES)
        return self._appender

    def _trajectories(self) -> Any:
        e = self.embedder
        return self._table(TRAJECTORIES, rows.trajectory_schema(e.dim, e.name))

    def _workflows(self, namespace: str) -> Any:
        e = self.embedder
        return self._table(f"workflows__{namespace}", rows.workflow_schema(e.dim, e.name))

    def _workflows_at(self, namespace: str, at: str | int | None) -> Any:
        """The namespace's workflows table, now or checked out at a run tag or table version.

        Raises:
            NotFoundError: if the table has no such version or tag.
        """
        if at is None:
            return self._workflows(namespace)
        table = self.db.open_table(f"workflows__{namespace}")
        try:
            table.checkout(at)
        except Exception as err:
            raise NotFoundError(f"no table version or run tag {at!r} in namespace {namespace!r}") from err
        return table

    def _runs(self) -> Any:
        return self._table(RUNS, rows.run_schema())

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.settings.namespace

    def _versions(self, table: Any, namespace: str, ids: Iterable[str]) -> dict[str, list[int]]:
        id_list = sorted(set(ids))
        if not id_list:
            return {}
        where = f"namespace = {quote(namespace)} AND id IN ({', '.join(map(quote, id_list))})"
        found: dict[str, list[int]] = {}
        for r in rows.rows_of(select(table, where, ["id", "version"])):
            found.setdefault(r["id"], []).append(r["version"])
        return found

    def _check_versions(self, table: Any, namespace: str, workflows: Sequence[Workflow]) -> None:
        existing = self._versions(table, namespace, (w.id for w in workflows))
        seen: set[tuple[str, int]] = set()
        for w in sorted(workflows, key=lambda w: (w.id, w.version)):
            if w.namespace != namespace:
                raise StoreError(f"workflow {w.id!r} is in namespace {w.namespace!r}, not {namespace!r}")
            versions = existing.setdefault(w.id, [])
            if w.version in versions or (w.id, w.version) in seen:
                raise VersionConflictError(f"{w.id} v{w.version} exists; versions are never overwritten")
            latest = max(versions, default=0)
            if w.version != latest + 1:
                raise VersionConflictError(f"{w.id}: next version is v{latest + 1}, not v{w.version}")
            if (w.parent_version is None) != (w.version == 1) or (
                w.parent_version is not None and w.parent_version not in versions
            ):
                raise VersionConflictError(
                    f"{w.id} v{w.version}: parent_version must name an existing version "
                    "(and be empty only for v1)"
                )
            versions.append(w.version)
            seen.add((w.id, w.version))

    def _append_workflows(
        self,
        namespace: str,
        workflows: Sequence[Workflow],
        keys: Mapping[str, Vector] | None = None,
        shares: Mapping[str, Sequence[float]] | None = None,
    ) -> int:
        """Validate and append versions in one commit; returns the new table version.

        `keys` maps a workflow id to its retrieval vectors (one row per source task); without
        them a workflow is keyed by the embedding of its name, description and actions.
        `shares` maps it to each key's share of its task (`retrieval.nearest`).
        """
        table = self._workflows(namespace)
        if not workflows:
            return int(table.version)
        self._check_versions(table, namespace, workflows)
        unkeyed = [w for w in workflows if not keys or w.id not in keys]  # only these are embedded
        texts = [rows.workflow_text(w) for w in unkeyed]
        embedded = dict(
            zip((w.id for w in unkeyed), self.embedder.embed(texts) if texts else [], strict=True)
        )
        data = [
            rows.workflow_to_row(w, keys[w.id], (shares or {}).get(w.id))
            if keys and w.id in keys
            else rows.workflow_to_row(w, embedded[w.id][None, :])
            for w in workflows
        ]

        def write() -> int:
            merge = table.merge_insert(["namespace", "id", "version"])
            result = merge.when_not_matched_insert_all().execute(data)
            if int(result.num_inserted_rows) != len(data):
                raise VersionConflictError("a concurrent writer stored one of these versions")
            return int(result.version)

        return retry_conflicts(write)
