"""What the dashboard's diff page says besides the steps: the other fields as people read them,
and how the older version became the newer one — what changed when the steps did not, the
versions between them (the run that made each and what it changed), and every status change
of those versions with its reason (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from flowmem.induction.render.diff import FieldChange, WorkflowDiff, diff_workflows, pitfall_text
from flowmem.models import Workflow
from flowmem.storage.version_state import LoggedTransition

__all__ = ["Explained", "FieldShown", "StatusChange", "VersionMade", "explain", "shown_fields"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)


class FieldShown(_Frozen):
    """A field other than the steps that differs, its values as a page shows them."""

    field: str
    """The field's name (`pitfalls`, `status`, ...)."""
    old: Any
    """Its value in the older version (a pitfall as its text)."""
    new: Any
    """Its value in the newer version."""


class VersionMade(_Frozen):
    """One version between the two compared (both included): who made it and what it changed."""

    version: int
    """The version."""
    parent_version: int | None
    """The version it revises."""
    created_at: datetime
    """When it was stored."""
    run_id: str | None
    """The induction run that made it (None: put by hand)."""
    inducer: str
    """`rule`, `llm` or `manual`."""
    sources: int
    """The runs it was induced from."""
    status: str
    """Its status now."""
    changed: list[str]
    """What it changed from its parent (`steps`, then the other fields agents are served);
    empty when it serves the same (a fresh candidate for a deprecated parent)."""


class StatusChange(_Frozen):
    """A status change of one of the versions, from the lifecycle log."""

    version: int
    """The version."""
    old: str
    """Its status before."""
    new: str
    """Its status after."""
    at: datetime
    """When."""
    reason: str
    """Why (the policy's figures, or the run that retired it)."""


class Explained(_Frozen):
    """How the older version became the newer one."""

    same_steps: bool
    """The two versions' steps are the same."""
    changed: list[str]
    """The fields other than the steps that differ between the two (`pitfalls`, `status`, ...)."""
    versions: list[VersionMade]
    """Every version from the older to the newer, oldest first."""
    transitions: list[StatusChange]
    """Every status change of those versions, oldest first."""


def shown_fields(diff: WorkflowDiff) -> list[FieldShown]:
    """The diff's other fields, each pitfall as its text (never its condition's JSON)."""
    out = []
    for f in diff.fields:
        old, new = f.old, f.new
        if f.field == "pitfalls":
            old, new = [pitfall_text(p) for p in old or []], [pitfall_text(p) for p in new or []]
        out.append(FieldShown(field=f.field, old=old, new=new))
    return out


def _changed(fields: Sequence[FieldChange], steps_equal: bool) -> list[str]:
    return ([] if steps_equal else ["steps"]) + [f.field for f in fields if f.field != "status"]


def explain(
    history: Sequence[Workflow], transitions: Sequence[LoggedTransition], diff: WorkflowDiff
) -> Explained:
    """The versions from `diff`'s older to its newer one (`history`: every version of the
    workflow with its status now), what each changed from its parent, and their status
    changes (`transitions`: the workflow's lifecycle log, `Store.transitions`)."""
    low, high = sorted((diff.old_version, diff.new_version))
    by_version = {w.version: w for w in history}
    made = []
    for w in (v for v in history if low <= v.version <= high):
        parent = by_version.get(w.parent_version) if w.parent_version is not None else None
        step = diff_workflows(parent, w) if parent is not None else None
        made.append(
            VersionMade(
                version=w.version,
                parent_version=w.parent_version,
                created_at=w.created_at,
                run_id=w.provenance.run_id,
                inducer=w.provenance.inducer,
                sources=len(w.source_trajectory_ids),
                status=w.status,
                changed=_changed(step.fields, all(c.op == "equal" for c in step.steps)) if step else [],
            )
        )
    changes = [
        StatusChange(version=t.version, old=t.old, new=t.new, at=t.at, reason=t.reason)
        for t in transitions
        if low <= t.version <= high
    ]
    return Explained(
        same_steps=all(c.op == "equal" for c in diff.steps),
        changed=[f.field for f in diff.fields],
        versions=made,
        transitions=changes,
    )
