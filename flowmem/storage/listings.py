"""Light reads for the dashboard: the columns a listing shows, never vectors or step JSON.

`Store.list_workflows` builds whole `Workflow` models (steps, parameters, provenance); a page
that lists 10,000 workflows needs a dozen scalar columns of each, so these functions select
only those, keep the same visibility rules (`committed_rows`, `with_live_state`) and return
small frozen models (built with `model_construct`: the store's own columns need no validation).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict

from flowmem.models import Pitfall, UsageStats
from flowmem.storage import rows
from flowmem.storage.base import Vector
from flowmem.storage.lance_ops import quote, select
from flowmem.storage.store import Store

__all__ = [
    "Listed",
    "RunOutcome",
    "Served",
    "ShapeStep",
    "TaskPoint",
    "WorkflowShape",
    "WorkflowSummary",
    "data_version",
    "run_listing",
    "served_summaries",
    "subtask_ids",
    "task_vectors",
    "trajectory_outcomes",
    "workflow_shapes",
    "workflow_summaries",
]


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True, extra="forbid")


class Served(_Row):
    """One version's figures, as a listing shows them."""

    version: int
    """The version."""
    status: str
    """Its status now (the lifecycle log's, else the one it was stored with)."""
    name: str
    """Its name."""
    description: str
    """When to use it."""
    support: int
    """How many trajectories it was induced from."""
    served: int
    """Runs it was served to (its live usage, else its stored stats)."""
    successes: int
    """Of those, runs that succeeded."""
    failures: int
    """Of those, runs that failed."""


class WorkflowSummary(Served):
    """The latest committed version of a workflow, as the dashboard lists it."""

    id: str
    """The workflow."""
    versions: int
    """How many versions it has."""
    agent: str
    """The agent role it is for."""
    kind: str
    """`task` or `subroutine`."""
    cluster_id: int | None
    """The trajectory cluster it was induced from."""
    created_at: datetime
    """When the version was created."""


class ShapeStep(_Row):
    """A step of a workflow, as compared with other workflows' steps."""

    action: str
    """The tool or action it calls."""
    args: dict[str, Any]
    """Its arguments (JSON, as stored)."""


class WorkflowShape(_Row):
    """What a workflow version does: its steps, parameters and pitfalls."""

    steps: list[ShapeStep]
    """Its steps, in order."""
    parameters: list[str]
    """Its placeholders' names, sorted."""
    pitfalls: list[str]
    """Its pitfalls' texts."""


class TaskPoint(_Row):
    """A trajectory's task, for the cluster map."""

    id: str
    """The trajectory."""
    task: str
    """Its task."""
    agent: str
    """The agent role that ran it."""
    success: bool | None
    """Its outcome (None: none recorded)."""


class RunOutcome(TaskPoint):
    """A trajectory without its steps: its outcome and what it was served."""

    n_steps: int
    """How many steps it took."""
    used: list[tuple[str, int]]
    """The (workflow id, version) pairs it was served."""
    created_at: datetime
    """When it was recorded."""


class Listed(RunOutcome):
    """A trajectory in the runs listing: a `RunOutcome` and the run it is a subtask of."""

    parent_id: str | None
    """The orchestrator's run, for a subtask run."""


_SUMMARY_COLUMNS = (
    "id",
    "version",
    "name",
    "description",
    "agent",
    "status",
    "kind",
    "cluster_id",
    "run_id",
    "source_trajectory_ids",
    "created_at",
    "stats",
)


def data_version(store: Store, *, namespace: str) -> tuple[int, ...]:
    """The versions of every table a dashboard page reads (workflows, usage, lifecycle,
    trajectories, runs): a page cached under it is stale as soon as any of them moves."""
    return (
        *store.served_version(namespace=namespace),
        int(store._trajectories().version),
        int(store._runs().version),
    )


def workflow_summaries(store: Store, *, namespace: str) -> list[WorkflowSummary]:
    """The latest committed version of every workflow of a namespace, its status and usage
    live (as `Store.with_live_state` merges them)."""
    table = store._workflows(namespace)
    columns = [c for c in _SUMMARY_COLUMNS if c in table.schema.names]
    found = select(table, f"namespace = {quote(namespace)}", columns)
    # The support is a count: the id lists are never turned into Python lists.
    support = pc.fill_null(pc.list_value_length(found["source_trajectory_ids"]), 0)
    found = found.drop_columns(["source_trajectory_ids"]).append_column("support", support)
    raw = store.committed_rows(rows.rows_of(found), namespace=namespace)
    latest: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for r in raw:
        counts[r["id"]] = counts.get(r["id"], 0) + 1
        if r["id"] not in latest or r["version"] > latest[r["id"]]["version"]:
            latest[r["id"]] = r
    usage = store.usage(namespace=namespace)
    status = store.live_statuses(namespace=namespace)
    out = []
    for wid in sorted(latest):
        r = latest[wid]
        stats = usage.get((wid, r["version"]))
        if stats is None:  # no outcome since it was stored: the stats it was stored with
            stats = UsageStats.model_validate_json(r.get("stats") or "{}")
        out.append(
            WorkflowSummary.model_construct(
                id=wid,
                version=r["version"],
                versions=counts[wid],
                name=r["name"],
                description=r.get("description") or "",
                agent=r["agent"],
                status=status.get((wid, r["version"]), r["status"]),
                kind=r.get("kind") or "task",
                cluster_id=r["cluster_id"],
                support=r["support"],
                served=stats.served,
                successes=stats.successes,
                failures=stats.failures,
                created_at=r["created_at"],
            )
        )
    return out


def served_summaries(store: Store, *, namespace: str) -> dict[str, tuple[Served, Served | None]]:
    """Per workflow id that agents are served: the version they are served (its active one,
    else its candidate) and a newer candidate on trial beside it (or None). Read by
    `Store.served_rows`, which the agents' search index is built from: the same versions,
    statuses and live stats."""
    found = store.served_rows(namespace=namespace)
    if not len(found):
        return {}
    table = found.table
    names = table.column("name").to_pylist()
    descriptions = table.column("description").to_pylist()
    support = pc.fill_null(pc.list_value_length(table.column("source_trajectory_ids")), 0).to_pylist()
    by_id: dict[str, list[Served]] = {}
    for i, wid in enumerate(found.ids):  # newest first within a workflow
        stats = found.stats[i]
        by_id.setdefault(wid, []).append(
            Served.model_construct(
                version=int(found.versions[i]),
                status=found.statuses[i],
                name=names[i],
                description=descriptions[i] or "",
                support=support[i],
                served=stats.served,
                successes=stats.successes,
                failures=stats.failures,
            )
        )
    out: dict[str, tuple[Served, Served | None]] = {}
    for wid, versions in by_id.items():
        shown = next((v for v in versions if v.status == "active"), versions[0])
        trial = versions[0] if versions[0] is not shown else None
        out[wid] = (shown, trial)
    return out


def workflow_shapes(
    store: Store, keys: Sequence[tuple[str, int]], *, namespace: str
) -> dict[tuple[str, int], WorkflowShape]:
    """What a workflow does, for the versions `keys` names (id, version), read in one query."""
    if not keys:
        return {}
    wanted = set(keys)
    listed = ", ".join(quote(i) for i in sorted({i for i, _ in wanted}))
    where = f"namespace = {quote(namespace)} AND id IN ({listed})"
    found = select(store._workflows(namespace), where, ["id", "version", "steps", "parameters", "pitfalls"])
    out = {}
    for r in rows.rows_of(found):
        if (r["id"], r["version"]) in wanted:
            out[(r["id"], r["version"])] = WorkflowShape.model_construct(
                steps=[
                    ShapeStep.model_construct(action=s["action"], args=s.get("args", {}))
                    for s in json.loads(r["steps"])
                ],
                parameters=sorted(json.loads(r["parameters"])),
                pitfalls=[Pitfall.model_validate(p).text for p in json.loads(r["pitfalls"])],
            )
    return out


def trajectory_outcomes(store: Store, *, namespace: str) -> list[RunOutcome]:
    """Every trajectory of a namespace without its steps."""
    columns = ["id", "task", "agent", "success", "n_steps", "workflows_used", "created_at"]
    found = select(store._trajectories(), f"namespace = {quote(namespace)}", columns)
    out = []
    for r in rows.rows_of(found):
        used = json.loads(r.pop("workflows_used") or "[]")
        out.append(RunOutcome.model_construct(**r, used=[(u["id"], int(u["version"])) for u in used]))
    return out


def task_vectors(store: Store, *, namespace: str) -> tuple[list[TaskPoint], Vector]:
    """The trajectories of a namespace and their task vectors (a row each)."""
    table = select(
        store._trajectories(),
        f"namespace = {quote(namespace)}",
        ["id", "task", "agent", "success", "vector"],
    )
    found = [TaskPoint.model_construct(**r) for r in rows.rows_of(table, ["id", "task", "agent", "success"])]
    # Straight from Arrow's flat buffer: a list per row first took ~0.2 s for 4,000 runs.
    flat = pc.list_flatten(table.column("vector").combine_chunks()) if len(found) else []
    matrix = np.asarray(flat, dtype=np.float32).reshape(len(found), store.embedder.dim)
    return found, matrix


def run_listing(store: Store, *, namespace: str, agent: str | None = None) -> list[Listed]:
    """Every trajectory of a namespace (of one agent) without its steps, newest first."""
    columns = ["id", "task", "agent", "parent_id", "success", "n_steps", "workflows_used", "created_at"]
    where = f"namespace = {quote(namespace)}"
    if agent is not None:
        where += f" AND agent = {quote(agent)}"
    found = select(store._trajectories(), where, columns)
    found = found.sort_by([("created_at", "descending"), ("id", "ascending")])
    out = []
    for r in rows.rows_of(found):
        used = json.loads(r.pop("workflows_used") or "[]")
        out.append(Listed.model_construct(**r, used=[(u["id"], int(u["version"])) for u in used]))
    return out


def subtask_ids(
    store: Store, parent_ids: Collection[str], *, namespace: str, agent: str | None = None
) -> dict[str, list[str]]:
    """The ids of the runs recorded as subtasks of each of these runs (`parent_id`), of one
    agent if given, in the order they were recorded."""
    if not parent_ids:
        return {}
    listed = ", ".join(quote(i) for i in parent_ids)
    where = f"namespace = {quote(namespace)} AND parent_id IN ({listed})"
    if agent is not None:
        where += f" AND agent = {quote(agent)}"
    found = select(store._trajectories(), where, ["id", "parent_id", "created_at"])
    out: dict[str, list[str]] = {}
    for r in sorted(rows.rows_of(found), key=lambda r: (r["created_at"], r["id"])):
        out.setdefault(r["parent_id"], []).append(r["id"])
    return out
