from __future__ import annotations

import pytest
from pydantic import ValidationError

from flowmem.models import Trajectory, Workflow, placeholders_in
from tests.factories import make_workflow


def test_placeholders_found_in_nested_args_in_order() -> None:
    assert placeholders_in({"a": "{x} and {y}", "b": ["{z}", {"c": "{x}"}], "d": 3}) == ["x", "y", "z"]
    assert make_workflow(steps=3).placeholders == ["subject", "recipient", "email_id", "recipient_email"]


def test_content_hash_ignores_versions_and_stats_but_not_steps() -> None:
    a = make_workflow(version=1, steps=2)
    b = make_workflow(version=2, steps=2)
    c = make_workflow(version=2, steps=3)
    assert a.content_hash() == b.content_hash()
    assert a.content_hash() != c.content_hash()


def test_models_are_frozen_and_validate() -> None:
    w = make_workflow()
    with pytest.raises(ValidationError):
        w.name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="parent_version"):
        Workflow.model_validate({**w.model_dump(), "version": 2, "parent_version": 2})
    with pytest.raises(ValidationError):
        Trajectory(id="x", task="t", namespace="bad namespace")
    t = Trajectory(id="x", task="t", steps=[{"action": "a"}, {"action": "b"}])
    assert t.actions == ["a", "b"] and t.agent == "agent" and t.namespace == "default"
