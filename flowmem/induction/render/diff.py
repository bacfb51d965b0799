"""Step-level diff of two workflow versions (pure)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic_core import to_jsonable_python

from flowmem.models import Workflow, WorkflowStep

__all__ = ["FieldChange", "StepChange", "WorkflowDiff", "diff_workflows", "pitfall_text"]


class StepChange(BaseModel):
    """One entry of a step diff."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    op: Literal["equal", "changed", "added", "removed"]
    """`changed`: same action, other arguments or note."""
    old_index: int | None = None
    """Position in the old version's steps."""
    new_index: int | None = None
    """Position in the new version's steps."""
    old: WorkflowStep | None = None
    """The old step (None when added)."""
    new: WorkflowStep | None = None
    """The new step (None when removed)."""
    changed_args: list[str] = []
    """For `changed`: the argument keys whose values differ."""


class FieldChange(BaseModel):
    """A non-step field that differs between the versions."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    field: str
    """Field name."""
    old: Any
    """Value in the old version."""
    new: Any
    """Value in the new version."""


class WorkflowDiff(BaseModel):
    """What changed from one version of a workflow to another."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    id: str
    """The workflow."""
    old_version: int
    """The version compared from."""
    new_version: int
    """The version compared to."""
    steps: list[StepChange]
    """Every step of both versions, aligned."""
    fields: list[FieldChange]
    """Other fields that differ (name, description, parameters, pitfalls, ...)."""

    @property
    def unchanged(self) -> bool:
        """True when the two versions serve the same content."""
        return not self.fields and all(c.op == "equal" for c in self.steps)


_COMPARED_FIELDS = ("name", "description", "parameters", "pitfalls", "scope", "agent", "status")


def _key(step: WorkflowStep) -> str:
    return json.dumps(step.model_dump(mode="json"), sort_keys=True)


def _pair(a: WorkflowStep, b: WorkflowStep, i: int, j: int) -> list[StepChange]:
    if a.action != b.action:
        return [
            StepChange(op="removed", old_index=i, old=a),
            StepChange(op="added", new_index=j, new=b),
        ]
    keys = sorted(set(a.args) | set(b.args))
    changed = [k for k in keys if a.args.get(k) != b.args.get(k)]
    return [StepChange(op="changed", old_index=i, new_index=j, old=a, new=b, changed_args=changed)]


def diff_workflows(old: Workflow, new: Workflow) -> WorkflowDiff:
    """Align the steps of two versions and list what differs."""
    a, b = old.steps, new.steps
    matcher = difflib.SequenceMatcher(a=[_key(s) for s in a], b=[_key(s) for s in b], autojunk=False)
    changes: list[StepChange] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            changes += [
                StepChange(op="equal", old_index=i, new_index=j, old=a[i], new=b[j])
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            ]
            continue
        paired = min(i2 - i1, j2 - j1)
        for k in range(paired):
            changes += _pair(a[i1 + k], b[j1 + k], i1 + k, j1 + k)
        changes += [StepChange(op="removed", old_index=i, old=a[i]) for i in range(i1 + paired, i2)]
        changes += [StepChange(op="added", new_index=j, new=b[j]) for j in range(j1 + paired, j2)]
    fields = [
        # As JSON values: a pitfall is its text, or its text and condition (`Pitfall`).
        FieldChange(field=f, old=to_jsonable_python(getattr(old, f)), new=to_jsonable_python(getattr(new, f)))
        for f in _COMPARED_FIELDS
        if getattr(old, f) != getattr(new, f)
    ]
    return WorkflowDiff(
        id=new.id,
        old_version=old.version,
        new_version=new.version,
        steps=changes,
        fields=fields,
    )


def pitfall_text(value: Any) -> Any:
    """A pitfall of a `FieldChange` (JSON) as the text an agent is told: a checked one is
    stored with its condition, a text-only one as its text."""
    return value.get("text", value) if isinstance(value, Mapping) else value
