from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from flowmem.docstrings import attribute_descriptions
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


def test_attribute_docstrings_describe_fields_when_a_schema_is_made_as_pydantic_would() -> None:
    """`attribute_descriptions` (read when a schema is made, not at import) gives the schema
    pydantic's `use_attribute_docstrings` gives (read at import), nested models and stdlib
    dataclasses included, and a subclass's own docstring wins over its base's."""

    def family(config: ConfigDict) -> type[BaseModel]:
        @dataclasses.dataclass
        class Leaf:
            size: int
            """How big."""
            plain: str = ""

            __pydantic_config__: ClassVar[ConfigDict] = config

        class Base(BaseModel):
            model_config = config

            name: str
            """What it is called.

            Over two paragraphs."""
            kept: int = 0
            """Inherited as is."""

        class Child(Base):
            name: str = "x"
            """Its own words."""
            leaves: list[Leaf] = []
            """Its leaves."""

        return Child

    eager = family(ConfigDict(use_attribute_docstrings=True)).model_json_schema()
    lazy = family(ConfigDict(json_schema_extra=attribute_descriptions)).model_json_schema()
    assert lazy == eager
    assert lazy["properties"]["name"]["description"] == "Its own words."
    assert lazy["properties"]["kept"]["description"] == "Inherited as is."
    assert lazy["$defs"]["Leaf"]["properties"]["size"]["description"] == "How big."
    assert Workflow.model_json_schema()["properties"]["id"]["description"] == "Stable id across versions."
