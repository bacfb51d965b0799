"""The JSON of a workflow version, a search hit, a status transition and an induction run:
the one shape the API, the MCP server and `flowmem search --json` return."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flowmem.agents.retrieval import Hit
from flowmem.induction.render import render_workflow
from flowmem.models import InductionRun, Workflow
from flowmem.policy.lifecycle import Transition

__all__ = ["hit_payload", "run_payload", "transition_payload", "version_payload", "workflow_payload"]


def workflow_payload(w: Workflow) -> dict[str, Any]:
    """A workflow version as JSON: what an agent needs to follow it, and its state."""
    return {
        "id": w.id,
        "version": w.version,
        "name": w.name,
        "description": w.description,
        "status": w.status,
        "scope": w.scope,
        "kind": w.kind,
        "agent": w.agent,
        "steps": [s.model_dump(mode="json", exclude_none=True) for s in w.steps],
        "parameters": w.parameters,
        "pitfalls": [p.text for p in w.pitfalls],
        "stats": w.stats.model_dump(mode="json"),
        "parent_version": w.parent_version,
        "created_at": w.created_at.isoformat(),
    }


def hit_payload(h: Hit) -> dict[str, Any]:
    """A search result as JSON: the served version, its score and its prompt text."""
    return {
        **workflow_payload(h.workflow),
        "score": round(h.score, 4),
        "similarity": round(h.similarity, 4),
        "text": render_workflow(h.workflow, description=True),
    }


def version_payload(w: Workflow) -> dict[str, Any]:
    """A version in a workflow's history: its payload, where it came from and its cluster."""
    return {
        **workflow_payload(w),
        "provenance": w.provenance.model_dump(mode="json"),
        "cluster_id": w.cluster_id,
        "source_trajectories": len(w.source_trajectory_ids),
        "content_hash": w.content_hash(),
    }


def transition_payload(t: Transition | Mapping[str, Any]) -> dict[str, Any]:
    """A status change: one just made, or a row of the lifecycle log (which has `at`)."""
    if isinstance(t, Transition):
        return {"version": t.version, "old": t.old, "new": t.new, "cause": t.cause, "reason": t.reason}
    at = t["at"]
    return {
        "version": t["version"],
        "old": t["old"],
        "new": t["new"],
        "cause": t["cause"],
        "reason": t["reason"],
        "at": at.isoformat() if isinstance(at, datetime) else at,
    }


def run_payload(r: InductionRun) -> dict[str, Any]:
    """An induction run or rollback with its full id (what a rollback takes), its tag and
    counts, and the workflows it retired. The run's internal state (cluster fingerprints and
    memberships) is left out."""
    return {
        **r.model_dump(mode="json", exclude={"state"}),
        "retired": sorted({str(wid) for wid, _, _ in r.state.retired}),
    }
