"""The store: trajectories, versioned workflows and induction runs in LanceDB.

Tables:
- `trajectories`: every namespace, one row per trajectory, keyed by (namespace, id);
- `workflows__<namespace>`: one per namespace, one row per workflow version; an induction run
  commits its versions in one LanceDB commit and tags the resulting table version with the
  run id, so a rollback (LanceDB `restore`) of one tenant never touches another's;
- `usage__<namespace>`: usage stats per workflow version (apart, so rollbacks keep them);
- `runs`: induction runs and rollbacks;
- `embeddings__<embedder>`: the persistent embedding cache of network embedders.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, get_args

import numpy as np

from flowmem.models import PriorOutcome, Trajectory, Workflow, now
from flowmem.retrieval.serving import served_versions
from flowmem.storage import rows
from flowmem.storage.appends import append_new
from flowmem.storage.base import TRAJECTORIES, Vector
from flowmem.storage.errors import NotFoundError, StoreError
from flowmem.storage.lance_ops import quote, retry_conflicts, select
from flowmem.storage.maintenance import MaintenanceMixin
from flowmem.storage.migrations import table_names
from flowmem.storage.runs import RunsMixin
from flowmem.storage.served import ServedMixin
from flowmem.storage.stamps import Stamp, TableStamps, local_directory
from flowmem.storage.version_state import VersionStateMixin

if TYPE_CHECKING:
    from flowmem.induction.render.diff import WorkflowDiff

__all__ = ["STATUSES", "Store", "pick_version"]

STATUSES: tuple[str, ...] = get_args(Workflow.model_fields["status"].annotation)
"""The statuses a workflow version can have."""

_BATCH = 1_000


def pick_version(history: Sequence[Workflow], version: int | None) -> Workflow:
    """The given version among a workflow's versions (oldest first), or the latest.

    Raises:
        NotFoundError: if there is no such version.
    """
    if version is None:
        return history[-1]
    for w in history:
        if w.version == version:
            return w
    raise NotFoundError(f"workflow {history[-1].id!r} has no version {version}")


class Store(VersionStateMixin, MaintenanceMixin, RunsMixin, ServedMixin):
    """Trajectories, workflow versions and runs, in one LanceDB database."""

    # -- trajectories -------------------------------------------------------------------

    def insert_trajectories(self, trajectories: Iterable[Trajectory]) -> set[tuple[str, str]]:
        """Store trajectories as given, skipping any (namespace, id) already stored; returns
        the (namespace, id) of each one this call stored (of a key given twice, the first).
        Writes go in batches of 1,000, one commit each.

        Every input path stores through `flowmem.jobs.ingest.store_trajectories`, which
        scrubs them first: the store keeps what it is given."""
        stored: set[tuple[str, str]] = set()
        batch: dict[tuple[str, str], Trajectory] = {}
        for trajectory in trajectories:
            key = (trajectory.namespace, trajectory.id)
            if key not in batch:
                batch[key] = trajectory
            if len(batch) >= _BATCH:
                stored |= self._insert_trajectories(list(batch.values()))
                batch.clear()
        if batch:
            stored |= self._insert_trajectories(list(batch.values()))
        return stored

    def _insert_trajectories(self, batch: list[Trajectory]) -> set[tuple[str, str]]:
        keys = [(t.namespace, t.id) for t in batch]
        at = now()

        def build(positions: list[int]) -> list[dict[str, Any]]:
            chosen = [batch[i] for i in positions]
            vectors = self.embedder.embed([t.task for t in chosen])
            return [rows.trajectory_to_row(t, v, at) for t, v in zip(chosen, vectors, strict=True)]

        reopen = lambda: self.db.open_table(TRAJECTORIES)  # noqa: E731
        table = self._trajectories_for_appends()
        return append_new(table, self._known, keys, build, at, reopen, storage_options=self.storage_options)

    def namespaces(self) -> list[str]:
        """Every namespace that holds a trajectory or a workflow, sorted."""
        found = {r["namespace"] for r in rows.rows_of(select(self._trajectories(), None, ["namespace"]))}
        found |= {n.removeprefix("workflows__") for n in table_names(self.db) if n.startswith("workflows__")}
        return sorted(found)

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
        found = rows.rows_of(select(self._trajectories(), where))
        if not found:
            raise NotFoundError(f"no trajectory {trajectory_id!r} in namespace {ns!r}")
        return rows.trajectory_from_row(found[0])

    def get_trajectories(
        self, trajectory_ids: Sequence[str], *, namespace: str | None = None
    ) -> list[Trajectory]:
        """The stored trajectories among these ids, in one read (ids not stored are skipped)."""
        if not trajectory_ids:
            return []
        listed = ", ".join(quote(i) for i in trajectory_ids)
        where = f"namespace = {quote(self._ns(namespace))} AND id IN ({listed})"
        found = {
            r["id"]: rows.trajectory_from_row(r) for r in rows.rows_of(select(self._trajectories(), where))
        }
        return [found[i] for i in dict.fromkeys(trajectory_ids) if i in found]

    def list_trajectories(
        self, *, namespace: str | None = None, limit: int | None = 20, agent: str | None = None
    ) -> list[Trajectory]:
        """Trajectories of a namespace, newest first (all of them when `limit` is None)."""
        where = f"namespace = {quote(self._ns(namespace))}"
        if agent is not None:
            where += f" AND agent = {quote(agent)}"
        table = select(self._trajectories(), where)
        table = table.sort_by([("created_at", "descending"), ("id", "ascending")])
        if limit is not None:
            table = table.slice(0, limit)
        return [rows.trajectory_from_row(r) for r in rows.rows_of(table)]

    def set_outcome(
        self, trajectory_id: str, *, success: bool, feedback: str | None = None, namespace: str | None = None
    ) -> PriorOutcome:
        """Record a run's outcome after the fact (the feedback as given: callers scrub it);
        returns its outcome and the versions it was served as they were before (read alone:
        the run's steps and vector, the most of a row, are not read; half the read's time at
        100k runs).

        Raises:
            NotFoundError: if the namespace has no such trajectory.
        """
        ns = self._ns(namespace)
        where = f"namespace = {quote(ns)} AND id = {quote(trajectory_id)}"
        found = rows.rows_of(select(self._trajectories(), where, ["success", "workflows_used"]))
        if not found:
            raise NotFoundError(f"no trajectory {trajectory_id!r} in namespace {ns!r}")
        before = rows.prior_outcome_from_row(found[0])
        values: dict[str, Any] = {"success": success}
        if feedback is not None:
            values["feedback"] = feedback
        retry_conflicts(lambda: self._trajectories().update(where=where, values=values))
        return before

    def iter_trajectories(self, *, namespace: str | None = None) -> Iterator[Trajectory]:
        """Every trajectory of a namespace, oldest first."""
        yield from reversed(self.list_trajectories(namespace=namespace, limit=None))

    # -- workflows ----------------------------------------------------------------------

    def put_workflow(self, workflow: Workflow) -> Workflow:
        """Store a new version of a workflow (v1 of a new id, or latest + 1 with its parent).

        Raises:
            VersionConflictError: if the version exists or does not follow the latest one.
        """
        self._append_workflows(workflow.namespace, [workflow])
        self.writes += 1
        return workflow

    def get_workflow(
        self, workflow_id: str, version: int | None = None, *, namespace: str | None = None
    ) -> Workflow:
        """A workflow's latest version, or the given one.

        Raises:
            NotFoundError: if there is no such workflow or version.
        """
        return pick_version(self.history(workflow_id, namespace=namespace), version)

    def history(self, workflow_id: str, *, namespace: str | None = None) -> list[Workflow]:
        """Every stored version of a workflow, oldest first.

        Raises:
            NotFoundError: if there is no such workflow.
        """
        ns = self._ns(namespace)
        where = f"namespace = {quote(ns)} AND id = {quote(workflow_id)}"
        raw = self.committed_rows(rows.rows_of(select(self._workflows(ns), where)), namespace=ns)
        found = [rows.workflow_from_row(r) for r in raw]
        if not found:
            raise NotFoundError(f"no workflow {workflow_id!r} in namespace {ns!r}")
        return self.with_live_state(sorted(found, key=lambda w: w.version), namespace=ns)

    def list_workflows(
        self, *, namespace: str | None = None, status: str | None = None, at: str | int | None = None
    ) -> list[Workflow]:
        """The latest version of every workflow, by id (optionally of one status, or as the
        table was at a run tag or table version)."""
        if status is not None and status not in STATUSES:
            raise StoreError(f"unknown workflow status {status!r}: use {', '.join(STATUSES)}")
        ns = self._ns(namespace)
        table = self._workflows_at(ns, at)
        latest: dict[str, Workflow] = {}
        found_rows = rows.rows_of(select(table, f"namespace = {quote(ns)}"))
        for r in self.committed_rows(found_rows, namespace=ns):
            if r["id"] not in latest or r["version"] > latest[r["id"]].version:
                latest[r["id"]] = rows.workflow_from_row(r)
        found = self.with_live_state(sorted(latest.values(), key=lambda w: w.id), namespace=ns)
        return [w for w in found if status is None or w.status == status]

    def diff(self, workflow_id: str, old: int, new: int, *, namespace: str | None = None) -> WorkflowDiff:
        """Step-level diff between two versions of a workflow."""
        from flowmem.induction.render.diff import diff_workflows  # here: recording loads no diffing

        return diff_workflows(
            self.get_workflow(workflow_id, old, namespace=namespace),
            self.get_workflow(workflow_id, new, namespace=namespace),
        )

    def _table_stamps(self) -> TableStamps:
        stamps = self._stamps
        if stamps is None:
            stamps = self._stamps = TableStamps(local_directory(self.settings.db))
        return stamps

    def versions_local(self) -> bool:
        """Whether `served_version` is mostly told by a `stat` (a local store, on a file system
        that keeps directory times: `storage.stamps`); else every call asks LanceDB, which on
        object storage means round trips to it."""
        return self._table_stamps().root is not None

    def served_version(self, *, namespace: str | None = None) -> tuple[int, int, int]:
        """(workflows, usage and lifecycle table versions): changes whenever what search serves
        or how it ranks could change."""
        ns = self._ns(namespace)
        stamps = self._table_stamps()
        known = self._stamped.get(ns, (None, None, None))
        # On a local store, a stat of a table's version directory tells whether it changed
        # since its version was last read (`storage.stamps`): ~2 µs against ~0.3-0.6 ms through
        # LanceDB. Each table apart: after an outcome only the usage table is asked.
        tables = (self._workflows, self._usage_table, self._lifecycle_table)
        seen: list[tuple[Stamp, int] | None] = []
        versions: list[int] = []
        for name, table, before in zip(("workflows", "usage", "lifecycle"), tables, known, strict=True):
            stamp = stamps.stamp((f"{name}__{ns}",))
            if stamp is not None and before is not None and before[0] == stamp:
                version = before[1]
            else:
                version = int(table(ns).version)
            # Stamped before the read: a commit in between changes the stamp.
            seen.append((stamp, version) if stamp is not None else None)
            versions.append(version)
        self._stamped[ns] = tuple(seen)
        return versions[0], versions[1], versions[2]

    def _served(self, ns: str) -> tuple[list[Workflow], dict[tuple[str, int], dict[str, Any]]]:
        """The versions search serves (`served_versions`), and every committed row by (id, version)."""
        found = self.committed_rows(
            rows.rows_of(select(self._workflows(ns), f"namespace = {quote(ns)}")), namespace=ns
        )
        served = served_versions(
            self.with_live_state([rows.workflow_from_row(r) for r in found], namespace=ns)
        )
        return served, {(r["id"], r["version"]): r for r in found}

    def served_workflows(self, *, namespace: str | None = None) -> list[Workflow]:
        """One version per workflow not wholly deprecated: the active one, or, with none, the
        candidate search serves (`flowmem.retrieval.serving.served_versions`)."""
        chosen: dict[str, Workflow] = {}
        for w in self._served(self._ns(namespace))[0]:
            if w.id not in chosen or w.status == "active":
                chosen[w.id] = w
        return [chosen[k] for k in sorted(chosen)]

    def workflow_index(
        self, *, namespace: str | None = None
    ) -> tuple[list[Workflow], Vector, list[int], list[float]]:
        """The served versions (`flowmem.retrieval.serving.served_versions`) with their retrieval
        vectors, the index of the version each vector belongs to and each vector's share of
        its task (1 where none is recorded): the makings of an `ExampleIndex`."""
        served, by_key = self._served(self._ns(namespace))
        owners: list[int] = []
        vectors: list[Any] = []
        shares: list[float] = []
        for i, w in enumerate(served):
            r = by_key[(w.id, w.version)]
            keys = r["keys"] or [r["vector"]]
            owners += [i] * len(keys)
            vectors += keys
            recorded = r.get("key_shares")
            shares += recorded if recorded and len(recorded) == len(keys) else [1.0] * len(keys)
        matrix = np.array(vectors, dtype=np.float32).reshape(len(vectors), self.embedder.dim)
        return served, matrix, owners, shares

    def trajectory_index(
        self, *, namespace: str | None = None, success: bool | None = None, source: str | None = None
    ) -> tuple[list[Trajectory], Vector]:
        """Trajectories (optionally only successful or failed ones, only from one `source`) and
        their task vectors."""
        where = f"namespace = {quote(self._ns(namespace))}"
        if success is not None:
            where += f" AND success = {'true' if success else 'false'}"
        if source is not None:
            where += f" AND source = {quote(source)}"
        found = rows.rows_of(select(self._trajectories(), where))
        matrix = np.array([r["vector"] for r in found], dtype=np.float32).reshape(
            len(found), self.embedder.dim
        )
        return [rows.trajectory_from_row(r) for r in found], matrix
