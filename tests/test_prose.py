"""Steps written as sentences: their values become arguments, so procedures that differ only
in values are one workflow, rendered as sentences with placeholders."""

from __future__ import annotations

import pytest

from flowmem.induction.render.prose import is_prose, parse_prose, render_prose
from flowmem.induction.render.render import render_call


@pytest.mark.parametrize(
    ("text", "action", "args"),
    [
        ("Build Docker image app:2.4.1", "Build Docker image {image}", {"image": "app:2.4.1"}),
        ("Run database migrations", "Run database migrations", {}),
        ("Scale to 12 replicas.", "Scale to {value} replicas.", {"value": "12"}),
        ("Upload to S3 bucket 'logs-2024'", "Upload to S3 bucket '{bucket}'", {"bucket": "logs-2024"}),
        ("Enable 2FA for olga@corp.test", "Enable 2FA for {value}", {"value": "olga@corp.test"}),
        (
            "Check https://app.example.com/health",
            "Check {value}",
            {"value": "https://app.example.com/health"},
        ),
        (
            "Close ticket #W1234 on 2023-11-30",
            "Close ticket {ticket} on {value}",
            {"ticket": "#W1234", "value": "2023-11-30"},
        ),
        # One digit in a name is vocabulary, not a value; nor is a lone small number.
        ("Restart the EC2 and K8s nodes 3 times", "Restart the EC2 and K8s nodes 3 times", {}),
    ],
)
def test_values_in_a_sentence_become_arguments(text: str, action: str, args: dict[str, str]) -> None:
    assert parse_prose(text) == (action, args)
    assert render_call(*parse_prose(text)) == text


def test_a_value_keeps_its_name_across_a_procedures_steps() -> None:
    named: dict[str, str] = {}
    first = parse_prose("Build Docker image app:2.4.1", named)
    second = parse_prose("Deploy app:2.4.1 to production", named)
    assert first[1] == second[1] == {"image": "app:2.4.1"}
    assert second[0] == "Deploy {image} to production"


def test_a_sentence_with_placeholders_renders_as_a_sentence() -> None:
    action, args = "Deploy {image} to production", {"image": "{image}"}
    assert is_prose(action, args) and render_prose(action, args) == "Deploy {image} to production"
    assert render_call(action, args) == "Deploy {image} to production"
    assert not is_prose("deploy", {"image": "x"})  # a call, shown as one
    assert render_call("deploy", {"image": "{image}"}) == "deploy(image={image})"


def test_an_empty_text_argument_renders_as_an_empty_string_not_a_missing_value() -> None:
    call = render_call("transfer_to_human_agents", {"summary": "", "priority": None, "to": "ops"})
    assert call == 'transfer_to_human_agents(summary="", priority=null, to=ops)'


def test_a_word_the_task_names_after_a_linking_word_is_a_value_called_as_the_task_calls_it() -> None:
    """Read against its task, a step's plain word that the task names ("to staging") is one
    of the task's values, and a value is named by the word the task puts beside it."""
    task = "Deploy version v2.4.1 to the staging environment"
    named: dict[str, str] = {}
    assert parse_prose("build docker image tag v2.4.1", named, task=task) == (
        "build docker image tag {version}",
        {"version": "v2.4.1"},
    )
    assert parse_prose("deploy v2.4.1 to staging", named, task=task) == (
        "deploy {version} to {environment}",
        {"version": "v2.4.1", "environment": "staging"},
    )
    # The task has no word for it: where the thing goes.
    assert parse_prose("deploy v2.4.1 to staging", task="deploy v2.4.1 to staging") == (
        "deploy {value} to {destination}",
        {"value": "v2.4.1", "destination": "staging"},
    )
    # A word the task does not name stays part of the sentence; without the task, as before.
    assert parse_prose("push the image to the registry", task=task) == ("push the image to the registry", {})
    assert parse_prose("deploy v2.4.1 to staging") == ("deploy {value} to staging", {"value": "v2.4.1"})
