"""The JSON of a workflow version and of a search hit: the one shape the API, the MCP server
and `flowmem search --json` return."""

from __future__ import annotations

from typing import Any

from flowmem.agents.retrieval import Hit
from flowmem.induction.render import render_workflow
from flowmem.models import Workflow

__all__ = ["hit_payload", "workflow_payload"]


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
        "pitfalls": w.pitfalls,
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
