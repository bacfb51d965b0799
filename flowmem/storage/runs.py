"""Runs, tags and rollback: a run's versions are one LanceDB commit tagged with the run id."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from flowmem.models import InductionRun, Workflow, now
from flowmem.policy.lifecycle import Transition
from flowmem.storage import rows
from flowmem.storage.base import StoreBase, Vector
from flowmem.storage.errors import NotFoundError, StoreError
from flowmem.storage.lance_ops import quote, retry_conflicts, select

if TYPE_CHECKING:
    from flowmem.storage.version_state import VersionStateMixin

__all__ = ["RunsMixin"]


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
        retry_conflicts(lambda: table.restore(target.base_version))
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
        restored = [
            Transition(wid, v, "retired", old, f"rollback of run {run_id}", "manual")
            for wid, v, old in target.state.retired
        ]
        # The lifecycle log is the sibling mixin's: every `Store` has both.
        cast("VersionStateMixin", self).record_transitions(restored, namespace=ns)
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
