"""What the dashboard's trace and run pages show, read from the store: the runs table with its
filters, a run's tree of parent and subtask runs, and what an induction run (or a rollback)
changed."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from flowmem.models import InductionRun, Trajectory
from flowmem.storage import NotFoundError, Store
from flowmem.storage.listings import data_version, run_listing, subtask_ids
from flowmem.storage.runs import VersionKey

__all__ = [
    "MAX_DEPTH",
    "MAX_TREE",
    "RunCache",
    "RunChanges",
    "RunFilter",
    "RollbackEffect",
    "RunRow",
    "TraceNode",
    "VersionLink",
    "rollback_effect",
    "run_changes",
    "trace_tree",
]

MAX_DEPTH = 8
"""Most levels of parent and subtask runs a tree follows (a guard against a cycle of ids)."""
MAX_TREE = 300
"""Most runs one tree shows."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)


class RunRow(_Frozen):
    """One line of the runs table."""

    id: str
    """The trajectory's id."""
    task: str
    """Its task."""
    agent: str
    """The agent role that ran it."""
    parent_id: str | None
    """The orchestrator's run, for a subtask run."""
    success: bool | None
    """Its outcome (None: none recorded)."""
    n_steps: int
    """How many steps it took."""
    used: list[tuple[str, int]]
    """The (workflow id, version) pairs it was served."""
    created_at: datetime
    """When it was recorded."""
    subtasks: int
    """How many runs name it as their parent."""


Outcome = Literal["true", "false", "none"]
"""The `success` filter: succeeded, failed, or no outcome recorded."""


class RunFilter(_Frozen):
    """The filters of the runs table (None: any)."""

    agent: str | None = None
    """Only runs of this agent role."""
    success: Outcome | None = None
    """Only runs with this outcome."""
    since: date | None = None
    """Only runs recorded on this day (UTC) or later."""
    until: date | None = None
    """Only runs recorded on this day (UTC) or earlier."""
    workflow: str | None = None
    """Only runs served some version of this workflow."""

    def keeps(self, row: RunRow) -> bool:
        """Whether the row passes every filter."""
        day = row.created_at.date()
        outcome = "none" if row.success is None else str(row.success).lower()
        return (
            (self.agent is None or row.agent == self.agent)
            and (self.success is None or outcome == self.success)
            and (self.since is None or day >= self.since)
            and (self.until is None or day <= self.until)
            and (self.workflow is None or any(wid == self.workflow for wid, _ in row.used))
        )


def _rows(store: Store, namespace: str) -> list[RunRow]:
    found = run_listing(store, namespace=namespace)
    children = Counter(r.parent_id for r in found if r.parent_id)
    # model_construct: thousands of rows from the store's own columns need no validation.
    return [RunRow.model_construct(**dict(r), subtasks=children.get(r.id, 0)) for r in found]


class RunCache:
    """The runs table of each namespace, read again only when a table it comes from moved."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[tuple[int, ...], list[RunRow]]] = {}

    def rows(self, namespace: str) -> list[RunRow]:
        """Every run of the namespace, newest first."""
        version = data_version(self.store, namespace=namespace)
        with self._lock:
            hit = self._cached.get(namespace)
            if hit is not None and hit[0] == version:
                return hit[1]
        found = _rows(self.store, namespace)
        with self._lock:
            self._cached[namespace] = (version, found)
        return found


class TraceNode(_Frozen):
    """A run in a tree of runs: an orchestrator's run and the subtask runs it delegated."""

    run: Trajectory
    """The run."""
    children: list[TraceNode]
    """Its subtask runs, in the order they were recorded."""
    current: bool
    """Whether this is the run the page is about."""


def _ancestors(store: Store, run: Trajectory, namespace: str) -> tuple[Trajectory, str | None]:
    """The topmost stored run above `run`, and the id of a parent that is not stored (if any)."""
    top, seen = run, {run.id}
    for _ in range(MAX_DEPTH):
        if top.parent_id is None or top.parent_id in seen:
            return top, None
        try:
            top = store.get_trajectory(top.parent_id, namespace=namespace)
        except NotFoundError:
            return top, top.parent_id
        seen.add(top.id)
    return top, None


def trace_tree(store: Store, run: Trajectory, namespace: str) -> tuple[TraceNode, str | None]:
    """The tree of runs `run` belongs to, from its topmost stored parent down through every
    subtask run (at most `MAX_DEPTH` levels, `MAX_TREE` runs), and the id of a parent
    named but not stored."""
    top, missing = _ancestors(store, run, namespace)
    kids: dict[str, list[str]] = {}
    level, seen = [top.id], {top.id}
    for _ in range(MAX_DEPTH):
        found = subtask_ids(store, level, namespace=namespace)
        level = []
        for parent, ids in found.items():
            fresh = [i for i in ids if i not in seen][: max(0, MAX_TREE - len(seen))]
            seen.update(fresh)
            kids[parent] = fresh
            level += fresh
        if not level:
            break
    runs = {t.id: t for t in store.get_trajectories(sorted(seen - {top.id}), namespace=namespace)}
    runs[top.id] = top

    def node(t: Trajectory) -> TraceNode:
        below = [node(runs[i]) for i in kids.get(t.id, []) if i in runs]
        return TraceNode(run=t, children=below, current=t.id == run.id)

    return node(top), missing


class VersionLink(_Frozen):
    """A workflow version a run touched, and where it stands now."""

    workflow_id: str
    """The workflow."""
    version: int
    """The version."""
    name: str
    """Its name (empty: not readable any more)."""
    parent_version: int | None = None
    """The version it follows (a changed workflow's previous version)."""
    old: str | None = None
    """For a retired version: its status before the run."""
    status: str | None = None
    """Its status now (None: the version is not in the table now)."""
    held: bool = True
    """Whether the table holds some version of the workflow now (its page exists)."""


class RunChanges(_Frozen):
    """What an induction run did to the workflows."""

    created: list[VersionLink]
    """Workflows it made (their version 1)."""
    changed: list[VersionLink]
    """New versions of workflows that existed before it."""
    retired: list[VersionLink]
    """Versions it retired: kept, never served."""


def _statuses(store: Store, namespace: str) -> dict[tuple[str, int], str]:
    return dict(store.live_statuses(namespace=namespace))


def run_changes(store: Store, run: InductionRun) -> RunChanges:
    """The versions an induction run created and changed (as its tag holds them) and those it
    retired, each with its status now when the table still holds it."""
    ns = run.namespace
    now = store.version_keys(namespace=ns)
    held = {wid for wid, _ in now}
    live = _statuses(store, ns)
    made = []
    for w in store.run_versions(run.id, namespace=ns):
        key = now.get((w.id, w.version))
        mine = key is not None and key.run_id == run.id  # not a later run's version of that number
        status = live.get((w.id, w.version), w.status) if mine else None
        made.append(
            VersionLink(
                workflow_id=w.id,
                version=w.version,
                name=w.name,
                parent_version=w.parent_version,
                status=status,
                held=w.id in held,
            )
        )
    retired = []
    for wid, version, old in run.state.retired:
        key = now.get((wid, version))
        retired.append(
            VersionLink(
                workflow_id=wid,
                version=version,
                name=key.name if key else "",
                old=old,
                status=live.get((wid, version), "retired") if key else None,
                held=wid in held,
            )
        )
    return RunChanges(
        created=[v for v in made if v.version == 1],
        changed=[v for v in made if v.version > 1],
        retired=retired,
    )


class RollbackEffect(_Frozen):
    """What a recorded rollback changed in the table."""

    left: list[VersionKey]
    """Versions it took out of the table."""
    came: list[VersionKey]
    """Versions it put back."""
    held: set[str]
    """The workflows the table holds some version of now (their pages exist)."""


def rollback_effect(store: Store, run: InductionRun) -> RollbackEffect | None:
    """For a recorded rollback: the table before it against the table after it (the change
    `Store.rollback_plan` planned), or None when the table's version from before it is no
    longer readable (`flowmem maintain` pruned it)."""
    if run.base_version is None or run.table_version is None:
        return None
    try:
        left, came = store.version_change(
            namespace=run.namespace, before=run.base_version, after=run.table_version
        )
    except NotFoundError:
        return None
    return RollbackEffect(
        left=left, came=came, held={wid for wid, _ in store.version_keys(namespace=run.namespace)}
    )
