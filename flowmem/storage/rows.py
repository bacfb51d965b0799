"""Arrow schemas of the store's tables, and domain model <-> row conversion.

Nested, free-form data (steps with arbitrary arguments, meta) is stored as JSON text; the
columns that are filtered or shown in listings are stored as typed columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from flowmem.induction.abstract.loops import encoded
from flowmem.models import (
    InductionRun,
    PriorOutcome,
    RunState,
    Step,
    Trajectory,
    Workflow,
    WorkflowRef,
)

if TYPE_CHECKING:  # imported where a schema is built: an agent's recording never loads Arrow
    import pyarrow as pa

__all__ = [
    "EMBEDDER_KEY",
    "lifecycle_schema",
    "prior_outcome_from_row",
    "run_from_row",
    "run_schema",
    "run_to_row",
    "trajectory_from_row",
    "trajectory_schema",
    "trajectory_to_row",
    "usage_schema",
    "vector_cache_schema",
    "WORKFLOW_FIELDS",
    "workflow_from_row",
    "workflow_schema",
    "workflow_to_row",
]

EMBEDDER_KEY = b"flowmem.embedder"
"""Schema metadata key naming the embedder whose vectors a table holds."""


USAGE_COLUMNS = ("id", "version", "served", "successes", "failures")
"""Columns of a namespace's usage table."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _ts() -> pa.DataType:
    import pyarrow as pa

    return pa.timestamp("us", tz="UTC")


def _vector_field(dim: int) -> pa.Field:
    import pyarrow as pa

    return pa.field("vector", pa.list_(pa.float32(), dim))


def trajectory_schema(dim: int, embedder: str) -> pa.Schema:
    """Schema of the `trajectories` table."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("namespace", pa.string(), nullable=False),
            pa.field("id", pa.string(), nullable=False),
            pa.field("task", pa.string(), nullable=False),
            pa.field("agent", pa.string(), nullable=False),
            pa.field("parent_id", pa.string()),
            pa.field("success", pa.bool_()),
            pa.field("score", pa.float64()),
            pa.field("final_answer", pa.string()),
            pa.field("feedback", pa.string()),
            pa.field("source", pa.string()),
            pa.field("group", pa.string()),
            pa.field("n_steps", pa.int32(), nullable=False),
            pa.field("actions", pa.list_(pa.string())),
            pa.field("steps", pa.string(), nullable=False),
            pa.field("workflows_used", pa.string(), nullable=False),
            pa.field("meta", pa.string(), nullable=False),
            pa.field("created_at", _ts(), nullable=False),
            pa.field("stored_at", _ts(), nullable=False),
            _vector_field(dim),
        ],
        metadata={EMBEDDER_KEY: embedder.encode()},
    )


def trajectory_to_row(t: Trajectory, vector: npt.NDArray[np.float32], stored_at: datetime) -> dict[str, Any]:
    """The row of one trajectory."""
    return {
        "namespace": t.namespace,
        "id": t.id,
        "task": t.task,
        "agent": t.agent,
        "parent_id": t.parent_id,
        "success": t.success,
        "score": t.score,
        "final_answer": t.final_answer,
        "feedback": t.feedback,
        "source": t.source,
        "group": t.group,
        "n_steps": len(t.steps),
        "actions": t.actions,
        "steps": _dumps([s.model_dump(mode="json", exclude_defaults=True) for s in t.steps]),
        "workflows_used": _dumps([r.model_dump(mode="json") for r in t.workflows_used]),
        "meta": _dumps(t.meta),
        "created_at": t.created_at,
        "stored_at": stored_at,
        "vector": vector.tolist(),
    }


def _served(row: dict[str, Any]) -> list[WorkflowRef]:
    """The versions a row's run was served (its `workflows_used` column)."""
    return [WorkflowRef.model_validate(r) for r in json.loads(row["workflows_used"])]


def prior_outcome_from_row(row: dict[str, Any]) -> PriorOutcome:
    """A row's outcome and the versions it was served (its `success` and `workflows_used`)."""
    return PriorOutcome(success=row["success"], workflows_used=_served(row))


def trajectory_from_row(row: dict[str, Any]) -> Trajectory:
    """The trajectory of one row."""
    return Trajectory(
        id=row["id"],
        task=row["task"],
        agent=row["agent"],
        parent_id=row["parent_id"],
        namespace=row["namespace"],
        steps=[Step.model_validate(s) for s in json.loads(row["steps"])],
        success=row["success"],
        score=row["score"],
        final_answer=row["final_answer"],
        feedback=row["feedback"],
        workflows_used=_served(row),
        source=row["source"],
        group=row["group"],
        meta=json.loads(row["meta"]),
        created_at=row["created_at"],
    )


def usage_schema() -> pa.Schema:
    """Schema of a namespace's usage table (stats per workflow version)."""
    import pyarrow as pa

    return pa.schema([pa.field(name, pa.string() if name == "id" else pa.int64()) for name in USAGE_COLUMNS])


def lifecycle_schema() -> pa.Schema:
    """Schema of a namespace's lifecycle log (one row per status transition)."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string()),
            pa.field("version", pa.int64()),
            pa.field("old", pa.string()),
            pa.field("new", pa.string()),
            pa.field("cause", pa.string()),
            pa.field("reason", pa.string()),
            pa.field("at", _ts()),
        ]
    )


def vector_cache_schema(dim: int) -> pa.Schema:
    """Schema of an embedder's vector cache table (content hash -> vector)."""
    import pyarrow as pa

    return pa.schema([pa.field("key", pa.string()), _vector_field(dim)])


def workflow_schema(dim: int, embedder: str) -> pa.Schema:
    """Schema of a namespace's workflows table (one row per version)."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("namespace", pa.string(), nullable=False),
            pa.field("id", pa.string(), nullable=False),
            pa.field("version", pa.int64(), nullable=False),
            pa.field("parent_version", pa.int64()),
            pa.field("name", pa.string(), nullable=False),
            pa.field("description", pa.string(), nullable=False),
            pa.field("steps", pa.string(), nullable=False),
            pa.field("actions", pa.list_(pa.string())),
            pa.field("parameters", pa.string(), nullable=False),
            pa.field("pitfalls", pa.string(), nullable=False),
            pa.field("scope", pa.string(), nullable=False),
            pa.field("agent", pa.string(), nullable=False),
            pa.field("status", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("cluster_id", pa.int64()),
            pa.field("source_trajectory_ids", pa.list_(pa.string())),
            pa.field("stats", pa.string(), nullable=False),
            pa.field("provenance", pa.string(), nullable=False),
            pa.field("run_id", pa.string()),
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("created_at", _ts(), nullable=False),
            _vector_field(dim),
            pa.field("keys", pa.list_(pa.list_(pa.float32(), dim))),
            pa.field("key_shares", pa.list_(pa.float32())),
        ],
        metadata={EMBEDDER_KEY: embedder.encode()},
    )


def workflow_text(w: Workflow) -> str:
    """The text a workflow is embedded from: what it is for, and what it does."""
    return f"{w.name.replace('_', ' ')}. {w.description} {' '.join(w.actions)}"


def workflow_to_row(
    w: Workflow, keys: npt.NDArray[np.float32], shares: Sequence[float] | None = None
) -> dict[str, Any]:
    """The row of one workflow version; `keys` are its retrieval vectors (one per source task,
    or one), `shares` each one's share of its task (`retrieval.nearest`; none: whole), and
    `vector` their normalised mean (for LanceDB's own vector search)."""
    if shares is not None and len(shares) != len(keys):
        raise ValueError(f"{w.id}: one share per retrieval key")
    mean = keys.mean(axis=0)
    vector = mean / (np.linalg.norm(mean) or 1.0)
    return {
        "namespace": w.namespace,
        "id": w.id,
        "version": w.version,
        "parent_version": w.parent_version,
        "name": w.name,
        "description": w.description,
        "steps": _dumps([s.model_dump(mode="json", exclude_defaults=True) for s in w.steps]),
        "actions": encoded(w.pattern),  # a loop as its unit's action (`loops.encoded`)
        "parameters": _dumps(w.parameters),
        # A pitfall without a condition is stored as its text, as before conditions existed.
        "pitfalls": _dumps(w.model_dump(mode="json", include={"pitfalls"})["pitfalls"]),
        "scope": w.scope,
        "agent": w.agent,
        "status": w.status,
        "kind": w.kind,
        "cluster_id": w.cluster_id,
        "source_trajectory_ids": w.source_trajectory_ids,
        "stats": _dumps(w.stats.model_dump()),
        "provenance": _dumps(w.provenance.model_dump()),
        "run_id": w.provenance.run_id,
        "content_hash": w.content_hash(),
        "created_at": w.created_at,
        "vector": vector.astype(np.float32).tolist(),
        "keys": keys.astype(np.float32).tolist(),
        "key_shares": None if shares is None else [float(x) for x in shares],
    }


WORKFLOW_FIELDS = (
    "id",
    "version",
    "parent_version",
    "name",
    "description",
    "steps",
    "parameters",
    "pitfalls",
    "scope",
    "agent",
    "namespace",
    "status",
    "kind",
    "cluster_id",
    "source_trajectory_ids",
    "stats",
    "provenance",
    "created_at",
)
"""The columns of a workflows row that `workflow_from_row` reads."""

_JSON_FIELDS = ("steps", "parameters", "pitfalls", "stats", "provenance")


def workflow_from_row(row: Mapping[str, Any], **live: Any) -> Workflow:
    """The workflow version of one row (its `WORKFLOW_FIELDS`), validated in one call; `live`
    replaces fields whose values are given already (a live status, its `UsageStats`)."""
    fields = {name: row[name] for name in WORKFLOW_FIELDS if name not in live and name != "kind"}
    for name in _JSON_FIELDS:
        if name in fields:
            fields[name] = json.loads(fields[name])
    fields["kind"] = row.get("kind") or "task"  # table versions from before schema v2 have no kind
    fields["source_trajectory_ids"] = fields["source_trajectory_ids"] or []
    return Workflow.model_validate(fields | live)


def run_schema() -> pa.Schema:
    """Schema of the `runs` table."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("namespace", pa.string(), nullable=False),
            pa.field("id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("started_at", _ts(), nullable=False),
            pa.field("finished_at", _ts()),
            pa.field("counts", pa.string(), nullable=False),
            pa.field("tag", pa.string()),
            pa.field("table_version", pa.int64()),
            pa.field("base_version", pa.int64()),
            pa.field("rolled_back_run", pa.string()),
            pa.field("note", pa.string()),
            pa.field("state", pa.string()),
        ]
    )


def run_to_row(run: InductionRun) -> dict[str, Any]:
    """The row of one run."""
    row = run.model_dump(exclude={"counts", "state"})
    row["counts"] = _dumps(run.counts)
    row["state"] = run.state.to_stored()
    return row


def run_from_row(row: dict[str, Any]) -> InductionRun:
    """The run of one row."""
    data = dict(row)
    data["counts"] = json.loads(data["counts"])
    data["state"] = RunState.from_stored(data.get("state"))
    return InductionRun.model_validate(data)


def rows_of(table: pa.Table, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Rows of an Arrow table as dicts (optionally only some columns)."""
    if columns is not None:
        table = table.select(list(columns))
    found: list[dict[str, Any]] = table.to_pylist()
    return found
