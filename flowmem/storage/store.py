"""The store: trajectories, versioned workflows and induction runs in LanceDB.

This module and `flowmem.storage.rows` are the only places lancedb and pyarrow are used.

Tables:
- `trajectories`: every namespace, one row per trajectory, keyed by (namespace, id);
- `workflows__<namespace>`: one per namespace, one row per workflow version; an induction run
  commits its versions in one LanceDB commit and tags the resulting table version with the
  run id, so a rollback (LanceDB `restore`) of one tenant never touches another's;
- `runs`: induction runs and rollbacks.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from flowmem.diff import WorkflowDiff, diff_workflows
from flowmem.induction.embed import Embedder, Vectors
from flowmem.models import InductionRun, Trajectory, UsageStats, Workflow, now
from flowmem.settings import Settings
from flowmem.storage import rows

__all__ = ["NotFoundError", "Store", "StoreError", "VersionConflictError"]

T = TypeVar("T")
Vector = npt.NDArray[np.float32]

TRAJECTORIES = "trajectories"
RUNS = "runs"
_BATCH = 1_000


class StoreError(RuntimeError):
    """The store cannot do what was asked; the message says why."""


class NotFoundError(StoreError, LookupError):
    """No such trajectory, workflow, version or run."""


class VersionConflictError(StoreError):
    """A workflow version that would overwrite or skip an existing one."""


def quote(value: str) -> str:
    """A SQL string literal for a LanceDB filter, refusing characters that have no place there."""
    if any(ord(c) < 32 for c in value):
        raise StoreError("control characters are not allowed in ids")
    return "'" + value.replace("'", "''") + "'"


def _retry(op: Callable[[], T], *, attempts: int = 8) -> T:
    """Run a write, retrying LanceDB commit conflicts from concurrent writers with backoff."""
    for attempt in range(attempts):
        try:
            return op()
        except Exception as err:  # lancedb raises plain RuntimeError/OSError for conflicts
            text = str(err).lower()
            if attempt == attempts - 1 or ("conflict" not in text and "retry" not in text):
                raise
            time.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


class StoreVectorCache:
    """Embeddings by content hash in a table of the store (one table per embedder), so a
    network embedder embeds a text once across processes."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _table(self, dim: int) -> Any:
        import pyarrow as pa

        name = "embeddings__" + "".join(c if c.isalnum() else "_" for c in self.store.embedder.name)
        schema = pa.schema([pa.field("key", pa.string()), pa.field("vector", pa.list_(pa.float32(), dim))])
        return self.store._table(name, schema)

    def get_many(self, keys: Sequence[str]) -> dict[str, Vectors]:
        """The cached vectors among `keys`."""
        table = self._table(self.store.embedder.dim)
        found: dict[str, Vectors] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            where = f"key IN ({', '.join(quote(k) for k in chunk)})"
            for r in rows.rows_of(self.store._select(table, where)):
                found[r["key"]] = np.asarray(r["vector"], dtype=np.float32)
        return found

    def put_many(self, vectors: dict[str, Vectors]) -> None:
        """Remember vectors (a key already stored is kept as it is)."""
        if not vectors:
            return
        table = self._table(len(next(iter(vectors.values()))))
        data = [{"key": k, "vector": v.tolist()} for k, v in vectors.items()]
        _retry(lambda: table.merge_insert("key").when_not_matched_insert_all().execute(data))


class Store:
    """Trajectories, workflow versions and runs, in one LanceDB database."""

    def __init__(self, settings: Settings, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self._embedder = embedder
        self._db: Any = None
        self._tables: dict[str, Any] = {}

    # -- plumbing -----------------------------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        """The embedder whose vectors the tables hold (built on first use)."""
        if self._embedder is None:
            from flowmem.embedders import embedder_from

            self._embedder = embedder_from(self.settings, persistent=StoreVectorCache(self))
        return self._embedder

    @property
    def db(self) -> Any:
        """The LanceDB connection, opened on first use (opening a Store does no I/O)."""
        if self._db is None:
            import lancedb

            # A zero interval: every read sees what other processes committed before it.
            self._db = lancedb.connect(self.settings.db, read_consistency_interval=timedelta(0))
        return self._db

    def prepare(self) -> None:
        """Load the embedder and the LanceDB client now rather than on first write.

        A process that writes from a background thread calls this up front: at interpreter
        exit, Python refuses some imports that lancedb and sklearn make lazily.
        """
        self.embedder.embed(["warm up"])
        _ = self.db

    def _table(self, name: str, schema: Any) -> Any:
        table = self._tables.get(name)
        if table is None:
            try:
                table = self.db.open_table(name)
            except ValueError:  # not there yet; another process may be creating it right now
                table = self.db.create_table(name, schema=schema, exist_ok=True)
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

    def _trajectories(self) -> Any:
        e = self.embedder
        return self._table(TRAJECTORIES, rows.trajectory_schema(e.dim, e.name))

    def _workflows(self, namespace: str) -> Any:
        e = self.embedder
        return self._table(f"workflows__{namespace}", rows.workflow_schema(e.dim, e.name))

    def _runs(self) -> Any:
        return self._table(RUNS, rows.run_schema())

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.settings.namespace

    @staticmethod
    def _select(table: Any, where: str | None, columns: Sequence[str] | None = None) -> Any:
        query = table.search()
        if where:
            query = query.where(where)
        if columns is not None:
            query = query.select(list(columns))
        return query.limit(None).to_arrow()

    # -- trajectories -------------------------------------------------------------------

    def add_trajectories(self, trajectories: Iterable[Trajectory]) -> int:
        """Store trajectories, skipping any (namespace, id) already stored; returns how many
        were new. Writes go in batches of 1,000, one commit each."""
        stored = 0
        batch: dict[tuple[str, str], Trajectory] = {}
        for trajectory in trajectories:
            batch.setdefault((trajectory.namespace, trajectory.id), trajectory)
            if len(batch) >= _BATCH:
                stored += self._insert_trajectories(list(batch.values()))
                batch.clear()
        if batch:
            stored += self._insert_trajectories(list(batch.values()))
        return stored

    def _insert_trajectories(self, batch: list[Trajectory]) -> int:
        vectors = self.embedder.embed([t.task for t in batch])
        at = now()
        data = [rows.trajectory_to_row(t, v, at) for t, v in zip(batch, vectors, strict=True)]
        table = self._trajectories()

        def write() -> int:
            merge = table.merge_insert(["namespace", "id"]).when_not_matched_insert_all()
            return int(merge.execute(data).num_inserted_rows)

        return _retry(write)

    def count_trajectories(self, *, namespace: str | None = None) -> int:
        """How many trajectories the namespace holds."""
        return int(self._trajectories().count_rows(f"namespace = {quote(self._ns(namespace))}"))

    def get_trajectory(self, trajectory_id: str, *, namespace: str | None = None) -> Trajectory:
        """One trajectory by id.

        Raises:
            NotFoundError: if the namespace has no trajectory with that id.
        """
        ns = self._ns(namespace)
        where = f"namespace = {quote(ns)} AND id = {quote(trajectory_id)}"
        found = rows.rows_of(self._select(self._trajectories(), where))
        if not found:
            raise NotFoundError(f"no trajectory {trajectory_id!r} in namespace {ns!r}")
        return rows.trajectory_from_row(found[0])

    def list_trajectories(
        self, *, namespace: str | None = None, limit: int | None = 20, agent: str | None = None
    ) -> list[Trajectory]:
        """Trajectories of a namespace, newest first (all of them when `limit` is None)."""
        where = f"namespace = {quote(self._ns(namespace))}"
        if agent is not None:
            where += f" AND agent = {quote(agent)}"
        table = self._select(self._trajectories(), where)
        table = table.sort_by([("created_at", "descending"), ("id", "ascending")])
        if limit is not None:
            table = table.slice(0, limit)
        return [rows.trajectory_from_row(r) for r in rows.rows_of(table)]

    def iter_trajectories(self, *, namespace: str | None = None) -> Iterator[Trajectory]:
        """Every trajectory of a namespace, oldest first."""
        yield from reversed(self.list_trajectories(namespace=namespace, limit=None))

    # -- workflows ----------------------------------------------------------------------

    def _versions(self, table: Any, namespace: str, ids: Iterable[str]) -> dict[str, list[int]]:
        id_list = sorted(set(ids))
        if not id_list:
            return {}
        where = f"namespace = {quote(namespace)} AND id IN ({', '.join(map(quote, id_list))})"
        found: dict[str, list[int]] = {}
        for r in rows.rows_of(self._select(table, where, ["id", "version"])):
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
        self, namespace: str, workflows: Sequence[Workflow], keys: Mapping[str, Vector] | None = None
    ) -> int:
        """Validate and append versions in one commit; returns the new table version.

        A workflow's vector is its retrieval key from `keys` when given (e.g. the mean of its
        source tasks' vectors), else the embedding of its name, description and actions.
        """
        table = self._workflows(namespace)
        if not workflows:
            return int(table.version)
        self._check_versions(table, namespace, workflows)
        embedded = self.embedder.embed([rows.workflow_text(w) for w in workflows])
        vectors = [
            keys[w.id] if keys and w.id in keys else v for w, v in zip(workflows, embedded, strict=True)
        ]
        data = [rows.workflow_to_row(w, v) for w, v in zip(workflows, vectors, strict=True)]

        def write() -> int:
            merge = table.merge_insert(["namespace", "id", "version"])
            result = merge.when_not_matched_insert_all().execute(data)
            if int(result.num_inserted_rows) != len(data):
                raise VersionConflictError("a concurrent writer stored one of these versions")
            return int(result.version)

        return _retry(write)

    def put_workflow(self, workflow: Workflow) -> Workflow:
        """Store a new version of a workflow (v1 of a new id, or latest + 1 with its parent).

        Raises:
            VersionConflictError: if the version exists or does not follow the latest one.
        """
        self._append_workflows(workflow.namespace, [workflow])
        return workflow

    def get_workflow(
        self, workflow_id: str, version: int | None = None, *, namespace: str | None = None
    ) -> Workflow:
        """A workflow's latest version, or the given one.

        Raises:
            NotFoundError: if there is no such workflow or version.
        """
        history = self.history(workflow_id, namespace=namespace)
        if version is None:
            return history[-1]
        for w in history:
            if w.version == version:
                return w
        raise NotFoundError(f"workflow {workflow_id!r} has no version {version}")

    def history(self, workflow_id: str, *, namespace: str | None = None) -> list[Workflow]:
        """Every stored version of a workflow, oldest first.

        Raises:
            NotFoundError: if there is no such workflow.
        """
        ns = self._ns(namespace)
        where = f"namespace = {quote(ns)} AND id = {quote(workflow_id)}"
        found = [rows.workflow_from_row(r) for r in rows.rows_of(self._select(self._workflows(ns), where))]
        if not found:
            raise NotFoundError(f"no workflow {workflow_id!r} in namespace {ns!r}")
        return sorted(found, key=lambda w: w.version)

    def list_workflows(
        self, *, namespace: str | None = None, status: str | None = None, at: str | int | None = None
    ) -> list[Workflow]:
        """The latest version of every workflow, by id (optionally of one status, or as the
        table was at a run tag or table version)."""
        ns = self._ns(namespace)
        table = self._workflows(ns)
        if at is not None:
            table = self.db.open_table(f"workflows__{ns}")
            try:
                table.checkout(at)
            except Exception as err:
                raise NotFoundError(f"no table version or run tag {at!r} in namespace {ns!r}") from err
        latest: dict[str, Workflow] = {}
        for r in rows.rows_of(self._select(table, f"namespace = {quote(ns)}")):
            if r["id"] not in latest or r["version"] > latest[r["id"]].version:
                latest[r["id"]] = rows.workflow_from_row(r)
        usage = self.usage(namespace=ns)
        found = [
            w.model_copy(update={"stats": usage[(w.id, w.version)]}) if (w.id, w.version) in usage else w
            for w in sorted(latest.values(), key=lambda w: w.id)
        ]
        return [w for w in found if status is None or w.status == status]

    def diff(self, workflow_id: str, old: int, new: int, *, namespace: str | None = None) -> WorkflowDiff:
        """Step-level diff between two versions of a workflow."""
        return diff_workflows(
            self.get_workflow(workflow_id, old, namespace=namespace),
            self.get_workflow(workflow_id, new, namespace=namespace),
        )

    def _usage_table(self, namespace: str) -> Any:
        import pyarrow as pa

        schema = pa.schema(
            [pa.field(name, pa.string() if name == "id" else pa.int64()) for name in rows.USAGE_COLUMNS]
        )
        return self._table(f"usage__{namespace}", schema)

    def put_usage(self, usage: Mapping[tuple[str, int], UsageStats], *, namespace: str | None = None) -> int:
        """Store usage stats per workflow version (kept apart from the versions, so a rollback
        does not erase what was learnt). Returns how many versions were updated."""
        data = [{"id": i, "version": v, **u.model_dump()} for (i, v), u in usage.items()]
        if data:
            table = self._usage_table(self._ns(namespace))
            merge = (
                table.merge_insert(["id", "version"]).when_matched_update_all().when_not_matched_insert_all()
            )
            _retry(lambda: merge.execute(data))
        return len(data)

    def usage(self, *, namespace: str | None = None) -> dict[tuple[str, int], UsageStats]:
        """Usage stats per (workflow id, version)."""
        table = self._usage_table(self._ns(namespace))
        return {
            (r["id"], r["version"]): UsageStats(
                served=r["served"], successes=r["successes"], failures=r["failures"]
            )
            for r in rows.rows_of(self._select(table, None))
        }

    def workflow_index(self, *, namespace: str | None = None) -> tuple[list[Workflow], Vector]:
        """The served workflows (latest versions, not deprecated) and their vectors, for an
        in-process index."""
        ns = self._ns(namespace)
        latest: dict[str, dict[str, Any]] = {}
        for r in rows.rows_of(self._select(self._workflows(ns), f"namespace = {quote(ns)}")):
            if r["id"] not in latest or r["version"] > latest[r["id"]]["version"]:
                latest[r["id"]] = r
        served = [r for _, r in sorted(latest.items()) if r["status"] != "deprecated"]
        matrix = np.array([r["vector"] for r in served], dtype=np.float32).reshape(
            len(served), self.embedder.dim
        )
        return [rows.workflow_from_row(r) for r in served], matrix

    def trajectory_index(
        self, *, namespace: str | None = None, success: bool | None = None
    ) -> tuple[list[Trajectory], Vector]:
        """Trajectories (optionally only successful or failed ones) and their task vectors."""
        where = f"namespace = {quote(self._ns(namespace))}"
        if success is not None:
            where += f" AND success = {'true' if success else 'false'}"
        found = rows.rows_of(self._select(self._trajectories(), where))
        matrix = np.array([r["vector"] for r in found], dtype=np.float32).reshape(
            len(found), self.embedder.dim
        )
        return [rows.trajectory_from_row(r) for r in found], matrix

    def search_workflows(
        self, vector: Vector, *, k: int = 3, namespace: str | None = None
    ) -> list[tuple[Workflow, float]]:
        """The k workflows (latest versions, not deprecated) nearest a query vector, with their
        cosine similarity, best first."""
        ns = self._ns(namespace)
        table = self._workflows(ns)
        if table.count_rows() == 0:
            return []
        latest: dict[str, int] = {}
        for r in rows.rows_of(self._select(table, f"namespace = {quote(ns)}", ["id", "version"])):
            latest[r["id"]] = max(latest.get(r["id"], 0), r["version"])
        query = table.search(vector.tolist()).metric("cosine").where("status != 'deprecated'", prefilter=True)
        found = rows.rows_of(query.limit(max(k * 4, 20)).to_arrow())
        hits = [
            (rows.workflow_from_row(r), 1.0 - float(r["_distance"]))
            for r in found
            if latest.get(r["id"]) == r["version"]
        ]
        return hits[:k]

    def search_trajectories(
        self, vector: Vector, *, k: int = 3, namespace: str | None = None, success: bool | None = None
    ) -> list[tuple[Trajectory, float]]:
        """The k trajectories whose task is nearest a query vector (optionally only successful
        or failed ones), with cosine similarity, best first."""
        where = f"namespace = {quote(self._ns(namespace))}"
        if success is not None:
            where += f" AND success = {'true' if success else 'false'}"
        query = self._trajectories().search(vector.tolist()).metric("cosine").where(where, prefilter=True)
        found = rows.rows_of(query.limit(k).to_arrow())
        return [(rows.trajectory_from_row(r), 1.0 - float(r["_distance"])) for r in found]

    # -- runs, tags and rollback --------------------------------------------------------

    @staticmethod
    def new_run_id(kind: str = "run") -> str:
        """A fresh, time-ordered run id that is also a valid LanceDB tag."""
        return f"{kind}-{now().strftime('%Y%m%dT%H%M%S%f')}-{secrets.token_hex(3)}"

    def commit_run(
        self,
        run: InductionRun,
        workflows: Sequence[Workflow] = (),
        *,
        keys: Mapping[str, Vector] | None = None,
    ) -> InductionRun:
        """Append a run's workflow versions in one commit, tag that table version with the
        run id, and record the run. Readers see all of the run's versions or none.

        `keys` maps workflow ids to retrieval vectors (see `_append_workflows`)."""
        ns = run.namespace
        table = self._workflows(ns)
        base = int(table.version)
        version = self._append_workflows(ns, workflows, keys)
        table.tags.create(run.id, version)
        committed = run.model_copy(
            update={
                "finished_at": now(),
                "tag": run.id,
                "table_version": version,
                "base_version": base,
                "counts": {"versions_created": len(workflows), **run.counts},
            }
        )
        _retry(lambda: self._runs().add([rows.run_to_row(committed)]))
        return committed

    def list_runs(self, *, namespace: str | None = None) -> list[InductionRun]:
        """Committed runs and rollbacks of a namespace, oldest first."""
        where = f"namespace = {quote(self._ns(namespace))}"
        found = [rows.run_from_row(r) for r in rows.rows_of(self._select(self._runs(), where))]
        return sorted(found, key=lambda r: (r.started_at, r.id))

    def get_run(self, run_id: str, *, namespace: str | None = None) -> InductionRun:
        """One run by id.

        Raises:
            NotFoundError: if the namespace has no such run.
        """
        for run in self.list_runs(namespace=namespace):
            if run.id == run_id:
                return run
        raise NotFoundError(f"no run {run_id!r} in namespace {self._ns(namespace)!r}")

    def rollback(self, run_id: str, *, namespace: str | None = None, note: str | None = None) -> InductionRun:
        """Restore the namespace's workflows table to the version before a run.

        The restore is itself a new table version (LanceDB `restore`), tagged and recorded as a
        `rollback` run, so the versions it undid stay reachable by their run tags.

        Raises:
            NotFoundError: if there is no such run.
            StoreError: if the run has no base version or was already rolled back.
        """
        ns = self._ns(namespace)
        target = self.get_run(run_id, namespace=ns)
        if target.base_version is None:
            raise StoreError(f"run {run_id!r} has no base version to restore")
        for other in self.list_runs(namespace=ns):
            if other.rolled_back_run == run_id:
                raise StoreError(f"run {run_id!r} was already rolled back by {other.id!r}")
        table = self._workflows(ns)
        before = int(table.version)
        _retry(lambda: table.restore(target.base_version))
        version = int(table.version)
        rollback = InductionRun(
            id=self.new_run_id("rollback"),
            namespace=ns,
            kind="rollback",
            finished_at=now(),
            tag=None,
            table_version=version,
            base_version=before,
            rolled_back_run=run_id,
            note=note,
        )
        table.tags.create(rollback.id, version)
        rollback = rollback.model_copy(update={"tag": rollback.id})
        _retry(lambda: self._runs().add([rows.run_to_row(rollback)]))
        return rollback

    def table_versions(self, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """The workflows table's LanceDB versions, with the run tags pointing at them."""
        table = self._workflows(self._ns(namespace))
        tags: dict[int, list[str]] = {}
        for name, info in table.tags.list().items():
            tags.setdefault(int(info["version"]), []).append(name)
        return [
            {"version": v["version"], "timestamp": v["timestamp"], "tags": sorted(tags.get(v["version"], []))}
            for v in table.list_versions()
        ]
