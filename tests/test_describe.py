"""Names, descriptions and step intents derived from actions, argument keys and data flow."""

from __future__ import annotations

from flowmem.induction.base import ClusterInput
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.render.describe import describe, name_for, step_intents
from flowmem.models import WorkflowStep
from tests.factories import forward


def steps(*calls: tuple[str, dict[str, str]]) -> list[WorkflowStep]:
    return [WorkflowStep(action=a, args=args) for a, args in calls]


FORWARD = steps(
    ("email.search_emails", {"query": "{subject}"}),
    ("company_directory.find_email_address", {"name": "{recipient_name}"}),
    ("email.forward_email", {"email_id": "{email_id}", "recipient": "{recipient_email}"}),
)
SOURCES = {
    "subject": "task",
    "recipient_name": "task",
    "email_id": "result of email.search_emails",
    "recipient_email": "result of company_directory.find_email_address",
}


def test_the_name_is_the_goals_verb_and_object() -> None:
    assert name_for(FORWARD) == "forward_email"
    assert name_for(steps(("get_order_details", {"order_id": "{o}"}))) == "get_order_details"
    assert name_for(steps(("calculate", {"expression": "{e}"}))) == "calculate_expression"
    # The goal is the last change, not the last step: a check after it does not name it.
    assert (
        name_for([*FORWARD, *steps(("email.get_email_information_by_id", {"id": "{x}"}))]) == "forward_email"
    )


def test_the_description_is_one_sentence_with_named_placeholders() -> None:
    text = describe(FORWARD, SOURCES)
    assert text == (
        "Use to forward email given {subject} and {recipient_name}: "
        "first search emails, then find email address."
    )
    assert "{…}" not in text and "…" not in text


def test_step_intents_say_what_each_step_gives() -> None:
    assert step_intents(FORWARD, SOURCES) == [
        "search emails by query; gives {email_id}",
        "find email address by name; gives {recipient_email}",
        "forward email by email id, recipient",
    ]


def test_words_that_read_as_an_example_value_stay_as_written() -> None:
    plot = steps(("analytics.total_visits_count", {"time_min": "{since}"}))
    assert describe(plot, {"since": "task"}) == "Use to count total visits given {since}."
    assert describe(plot, {"since": "task"}, {"total visits"}) == "Use to count total_visits given {since}."
    # Where the object as one word reads as a value too, the tool is named as it is.
    both = {"total visits", "total_visits"}
    assert describe(plot, {"since": "task"}, both) == "Use to get total_visits_count given {since}."
    assert step_intents(plot, {}, {"time min"}) == ["total visits count by time_min"]


def test_the_rule_inducer_names_and_describes_from_the_runs() -> None:
    runs = [forward(i) for i in range(6)]
    cluster = ClusterInput("default", "agent", 0, "subtask", runs, [], LiteralIndex.build(runs))
    [w] = RuleInducer().induce(cluster).workflows
    # "Forward the latest email about '...' to olga", ...: what the tasks ask, values left out.
    assert w.name == "forward_latest_email" and name_for(w.steps) == "forward_email_id"
    assert w.description.startswith(
        "Use to forward latest email about {query} to {name} given {email_id}: first search"
    )
    assert len(w.description.split()) >= 4 and "{…}" not in w.description
    assert all(s.note for s in w.steps)
