"""Runs, tags and rollback: a run's versions are one LanceDB commit tagged with the run id."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from pydantic import BaseModel, ConfigDict

from flowmem.docstrings import attribute_descriptions
from flowmem.models import InductionRun, Workflow, now
from flowmem.policy.lifecycle import Transition
from flowmem.storage import rows
from flowmem.storage.base import StoreBase, Vector
from flowmem.storage.errors import NotFoundError, StoreError
from flowmem.storage.lance_ops import quote, retry_conflicts, select

if TYPE_CHECKING:
    from flowmem.storage.version_state import VersionStateMixin

__all__ = ["RollbackPlan", "RunsMixin", "TableVersion", "VersionKey"]


class VersionKey(NamedTuple):
    """One stored workflow version, as a listing of the table shows it."""

    workflow_id: str
    version: int
    name: str
    run_id: str | None
    """The run that committed it (None: stored outside any run)."""


class TableVersion(NamedTuple):
    """One LanceDB version of a namespace's workflows table."""

    version: int
    timestamp: datetime
    """When it was committed."""
    tags: list[str]
    """The run tags pointing at it, sorted."""


class RollbackPlan(BaseModel):
    """What `Store.rollback` of a run does, decided before it does it: the preview of a
    rollback is this, and the rollback applies this."""

    model_config = ConfigDict(frozen=True, json_schema_extra=attribute_descriptions)

    run: InductionRun
    """The run to undo."""
    restore_to: int
    """The table version the restore goes back to: the run's base version."""
    removed: list[VersionKey]
    """Versions in the table now that the restore takes out (the run's, and any later run's),
    by run, then workflow id and version."""
    returned: list[VersionKey]
    """Versions the restore puts back: ones stored before the run that left the table since
    (none, unless something deleted them)."""
    restored: list[Transition]
    """The versions the run retired, given back their status from before it."""
    later: list[InductionRun]
    """Runs committed after it whose versions leave too."""


class RunsMixin(StoreBase):
    """The run verbs of `Store`."""

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
        shares: Mapping[str, Sequence[float]] | None = None,
    ) -> InductionRun:
        """Append a run's workflow versions in one commit, tag that table version with the
        run id, and record the run. Readers see all of the run's versions or none.

        `keys` maps workflow ids to retrieval vectors and `shares` to their shares (see
        `_append_workflows`)."""
        ns = run.namespace
        table = self._workflows(ns)
        self.repair(namespace=ns)
        base = int(table.version)
        version = self._append_workflows(ns, workflows, keys, shares)
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
        retry_conflicts(lambda: self._runs().add([rows.run_to_row(committed)]))
        self.writes += 1
        return committed

    def repair(self, *, namespace: str | None = None) -> int:
        """Drop the versions and tag of a commit that was interrupted before its run was
        recorded (a process killed mid-commit). Readers never see them (`committed_rows`);
        the next commit calls this first, so a version number is never taken twice.
        Returns how many versions were dropped."""
        ns = self._ns(namespace)
        table = self._workflows(ns)
        recorded = {r.id for r in self.list_runs(namespace=ns)}
        found = rows.rows_of(select(table, None, ["run_id"]))
        torn = sorted({r["run_id"] for r in found if r["run_id"] is not None and r["run_id"] not in recorded})
        if torn:
            where = f"run_id IN ({', '.join(quote(t) for t in torn)})"
            retry_conflicts(lambda: table.delete(where))
        for name in table.tags.list():
            if name not in recorded:
                table.tags.delete(name)
        return sum(1 for r in found if r["run_id"] in set(torn))

    def committed_rows(
        self, found: list[dict[str, Any]], *, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        """The version rows of recorded runs (and of versions stored outside any run): what a
        reader may see, whatever an interrupted commit left behind."""
        runs = {r["run_id"] for r in found if r["run_id"] is not None}
        if not runs:
            return found
        recorded = {r.id for r in self.list_runs(namespace=namespace)}
        return [r for r in found if r["run_id"] is None or r["run_id"] in recorded]

    def runs_version(self) -> int:
        """The runs table's version: it moves when a run is recorded (`commit_run`, after its
        versions are appended: a reader in between leaves them out, `storage.served`)."""
        return int(self._runs().version)

    def list_runs(self, *, namespace: str | None = None) -> list[InductionRun]:
        """Committed runs and rollbacks of a namespace, oldest first."""
        where = f"namespace = {quote(self._ns(namespace))}"
        found = [rows.run_from_row(r) for r in rows.rows_of(select(self._runs(), where))]
        return sorted(found, key=lambda r: (r.started_at, r.id))

    def trajectory_scan(
        self, columns: Sequence[str], *, namespace: str | None = None
    ) -> dict[str, list[Any]]:
        """Some columns of every trajectory of a namespace, a list each, in no particular
        order (no sort: what an induction run counts over the whole namespace, such as the
        literal index, needs every row but not their order)."""
        where = f"namespace = {quote(self._ns(namespace))}"
        table = select(self._trajectories(), where, list(columns))
        return {name: table[name].to_pylist() for name in columns}

    def get_run(self, run_id: str, *, namespace: str | None = None) -> InductionRun:
        """One run by id.

        Raises:
            NotFoundError: if the namespace has no such run.
        """
        for run in self.list_runs(namespace=namespace):
            if run.id == run_id:
                return run
        raise NotFoundError(f"no run {run_id!r} in namespace {self._ns(namespace)!r}")

    def version_keys(
        self, *, namespace: str | None = None, at: int | str | None = None
    ) -> dict[tuple[str, int], VersionKey]:
        """Every committed workflow version of the table now (or at a table version or run
        tag), by (id, version): three columns, never the steps.

        Raises:
            NotFoundError: if the table has no such version or tag.
        """
        ns = self._ns(namespace)
        table = self._workflows_at(ns, at)
        found = rows.rows_of(select(table, None, ["id", "version", "name", "run_id"]))
        return {
            (r["id"], r["version"]): VersionKey(r["id"], r["version"], r["name"], r["run_id"])
            for r in self.committed_rows(found, namespace=ns)
        }

    def version_change(
        self, *, namespace: str | None = None, before: int | str | None, after: int | str | None
    ) -> tuple[list[VersionKey], list[VersionKey]]:
        """Going from one table version (or run tag; None: now) to another: the versions that
        leave the table and those that come into it, each by run, workflow id and version.

        Raises:
            NotFoundError: if the table has no such version or tag.
        """
        old = self.version_keys(namespace=namespace, at=before)
        new = self.version_keys(namespace=namespace, at=after)
        order = lambda k: (k.run_id or "", k.workflow_id, k.version)  # noqa: E731 (run ids sort by time)
        return (
            sorted((old[k] for k in old.keys() - new.keys()), key=order),
            sorted((new[k] for k in new.keys() - old.keys()), key=order),
        )

    def run_versions(self, run_id: str, *, namespace: str | None = None) -> list[Workflow]:
        """The workflow versions a run committed, as its tag holds them (so also after a
        rollback took them out of the table), by workflow id.

        Raises:
            NotFoundError: if the namespace has no such run.
        """
        ns = self._ns(namespace)
        run = self.get_run(run_id, namespace=ns)
        table = self._workflows(ns)
        if run.tag is not None and run.tag in table.tags.list():
            table = self.db.open_table(f"workflows__{ns}")
            table.checkout(run.tag)
        found = rows.rows_of(select(table, f"run_id = {quote(run_id)}"))
        return sorted((rows.workflow_from_row(r) for r in found), key=lambda w: (w.id, w.version))

    def rollback_plan(self, run_id: str, *, namespace: str | None = None) -> RollbackPlan:
        """What `rollback(run_id)` would change, without changing anything.

        Raises:
            NotFoundError: if there is no such run.
            StoreError: if the run has no base version or was already rolled back.
        """
        ns = self._ns(namespace)
        runs = self.list_runs(namespace=ns)
        target = next((r for r in runs if r.id == run_id), None)
        if target is None:
            raise NotFoundError(f"no run {run_id!r} in namespace {ns!r}")
        if target.base_version is None:
            raise StoreError(f"run {run_id!r} has no base version to restore")
        for other in runs:
            if other.rolled_back_run == run_id:
                raise StoreError(f"run {run_id!r} was already rolled back by {other.id!r}")
        removed, returned = self.version_change(namespace=ns, before=None, after=target.base_version)
        leaving = {k.run_id for k in removed} - {run_id}
        return RollbackPlan(
            run=target,
            restore_to=target.base_version,
            removed=removed,
            returned=returned,
            restored=[
                Transition(wid, v, "retired", old, f"rollback of run {run_id}", "manual")
                for wid, v, old in target.state.retired
            ],
            later=[r for r in runs if r.id in leaving],
        )

    def rollback(self, run_id: str, *, namespace: str | None = None, note: str | None = None) -> InductionRun:
        """Restore the namespace's workflows table to the version before a run
        (`rollback_plan` says what that changes).

        The restore is itself a new table version (LanceDB `restore`), tagged and recorded as a
        `rollback` run, so the versions it undid stay reachable by their run tags.

        Raises:
            NotFoundError: if there is no such run.
            StoreError: if the run has no base version or was already rolled back.
        """
        ns = self._ns(namespace)
        plan = self.rollback_plan(run_id, namespace=ns)
        table = self._workflows(ns)
        before = int(table.version)
        retry_conflicts(lambda: table.restore(plan.restore_to))
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
        retry_conflicts(lambda: self._runs().add([rows.run_to_row(rollback)]))
        self.writes += 1
        # What the run retired is served again, as it was before the run.
        # The lifecycle log is the sibling mixin's: every `Store` has both.
        cast("VersionStateMixin", self).record_transitions(plan.restored, namespace=ns)
        return rollback

    def table_versions(self, *, namespace: str | None = None) -> list[TableVersion]:
        """The workflows table's LanceDB versions, with the run tags pointing at them."""
        table = self._workflows(self._ns(namespace))
        tags: dict[int, list[str]] = {}
        for name, info in table.tags.list().items():
            tags.setdefault(int(info["version"]), []).append(name)
        return [
            TableVersion(v["version"], v["timestamp"], sorted(tags.get(v["version"], [])))
            for v in table.list_versions()
        ]
