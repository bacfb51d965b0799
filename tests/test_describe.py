"""Names, descriptions and step intents derived from actions, argument keys and data flow."""

from __future__ import annotations

from typing import Any

from flowmem.induction.base import ClusterInput
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.render.describe import _fitted, describe, name_for, step_intents
from flowmem.induction.render.phrase import Phrase
from flowmem.models import Trajectory, WorkflowStep
from tests.factories import forward, run


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
    assert step_intents(plot, {}, {"time min"}) == ["count total visits by time_min"]
    assert step_intents(plot, {}, {"total visits"}) == ["count total_visits by time min"]


def test_step_intents_do_not_repeat_what_the_action_name_says() -> None:
    lookups = steps(
        ("find_user_id_by_email", {"email": "{email}"}),
        ("find_user_id_by_name_zip", {"first_name": "{first}", "last_name": "{last}", "zip": "{zip}"}),
        ("get_user_details", {"user_id": "{user_id}"}),
        ("email.delete_email", {"email_id": "{email_id}"}),
    )
    assert step_intents(lookups, {}) == [
        "find user id by email",  # not "... by email by email"
        "find user id by name zip",  # the name says what it looks up by
        "get user details by user id",
        "delete email by email id",  # "id" is not in the name: the key still says something
    ]


def test_the_rule_inducer_names_and_describes_from_the_runs() -> None:
    runs = [forward(i) for i in range(6)]
    cluster = ClusterInput("default", "agent", 0, "subtask", runs, [], LiteralIndex.build(runs))
    [w] = RuleInducer().induce(cluster).workflows
    # "Forward the latest email about '...' to olga", ...: what the tasks ask, values left out.
    assert w.name == "forward_latest_email" and name_for(w.steps) == "forward_email_id"
    # The id ("e3", short) is read from the search's answer, not given by the task.
    assert w.description.startswith("Use to forward latest email about {query} to {name}: first search")
    assert w.parameters["email_id"] == "result of mail.search"
    assert len(w.description.split()) >= 4 and "{…}" not in w.description
    assert all(s.note for s in w.steps)


def _cluster(runs: list[Trajectory]) -> ClusterInput:
    return ClusterInput("default", "agent", 0, "subtask", runs, [], LiteralIndex.build(runs))


def exchange(i: int) -> Trajectory:
    """Variants of one customer's request: every task names the same item, the tool its kind."""
    bigger = ["a bigger one", "a larger one", "one that holds more", "the next size up"][i % 4]
    steps: list[tuple[str, dict[str, Any], str | None]] = [
        ("find_user_id_by_email", {"email": f"user{i}@shop.test"}, None),
        ("get_order_details", {"order_id": f"#W{1000 + i}"}, None),
        ("exchange_delivered_order_items", {"order_id": f"#W{1000 + i}", "item_ids": [f"it{i}"]}, None),
    ]
    return run(
        f"You want to exchange the water bottle for {bigger}. Your email is user{i}@shop.test.",
        steps,
        True,
        id=f"x{i}",
    )


def book(i: int) -> Trajectory:
    """A web agent's runs: its tools (click, type) name no thing the tasks act on."""
    city = ["Paris", "Oslo", "Lima", "Kyoto"][i % 4]
    steps: list[tuple[str, dict[str, Any], str | None]] = [
        ("type", {"element": "destination", "text": city}, None),
        ("click", {"element": "search"}, None),
        ("click", {"element": f"result-{i}"}, None),
    ]
    return run(f"Book a flight to {city} for next week", steps, True, id=f"b{i}")


def test_a_task_that_names_a_thing_is_named_for_the_kind_its_tool_acts_on() -> None:
    runs = [exchange(i) for i in range(6)]
    [w] = RuleInducer().induce(_cluster(runs)).workflows
    # The tasks all say "exchange the water bottle": one item, not what the procedure is for.
    assert w.name == "exchange_order_items"  # a participle ("delivered") is no name word
    assert w.description.startswith("Use to exchange delivered order items")
    assert "water" not in w.name and "bottle" not in w.description


def test_a_verb_no_tool_has_keeps_the_tasks_words() -> None:
    runs = [book(i) for i in range(6)]
    [w] = RuleInducer().induce(_cluster(runs)).workflows
    assert w.name.startswith("book_flight"), w.name


def meeting(i: int) -> Trajectory:
    """Tasks that book a meeting, one run searching its calendar for "meeting": the tasks'
    word is no example's value for having been passed once."""
    name = ["nadia", "luis", "akira", "olga", "raj", "yuki"][i]
    steps: list[tuple[str, dict[str, Any], str | None]] = [
        ("company_directory.find_email_address", {"name": name}, None),
        ("calendar.search_events", {"query": "meeting" if i == 0 else f"{name}@atlas.test"}, None),
        (
            "calendar.create_event",
            {
                "event_name": f"Sync with {name}",
                "participant_email": f"{name}@atlas.test",
                "time_min": f"2026-12-0{i + 1}",
            },
            None,
        ),
    ]
    task = f"Book a half hour meeting with them called 'Sync with {name}' at the earliest time I'm free"
    return run(f"I need to catch up with {name}. {task}", steps, True, id=f"m{i}")


def test_a_meeting_is_what_is_booked() -> None:
    runs = [meeting(i) for i in range(6)]
    [w] = RuleInducer().induce(_cluster(runs)).workflows
    # An -ing word before a preposition names the thing; "them" ends the phrase "with" opens.
    assert w.name == "book_half_hour_meeting", w.name
    assert w.description.startswith("Use to book half hour meeting called {event_name} at earliest time"), (
        w.description
    )
    assert Phrase("modify", (("", "pending"), ("", "order"))).words() == ["modify", "order"]
    assert Phrase("send", (("", "email"), ("", "saying"), ("", "{body}"))).words() == ["send", "email"]


def test_a_long_phrase_keeps_the_words_its_tools_use() -> None:
    steps_ = steps(
        ("get_account", {"account_id": "{account_id}"}), ("close_account", {"account_id": "{account_id}"})
    )
    phrase = Phrase("close", (("", "old light blue checking account"),))
    assert phrase.words() == ["close", "old", "light", "blue", "checking", "account"]
    assert _fitted(phrase, steps_, None) == ["close", "account"]
    short = Phrase("close", (("", "old account"),))
    assert _fitted(short, steps_, None) == ["close", "old", "account"]  # within five words: as asked
    # A preposition goes with the word after it: kept where that word is kept.
    cheapest = Phrase("exchange", (("to", "cheapest"), ("from", "recent order"), ("to", "{account_id}")))
    orders = steps(("exchange_order", {"order_id": "{order_id}"}))
    assert _fitted(cheapest, orders, None) == ["exchange", "order"]
    # A last word no tool uses ("tomorrow"): the name is cut as before, no tool word picked out.
    slot = Phrase("book", (("", "half hour"), ("at", "earliest time tomorrow")))
    timed = steps(("calendar.create_event", {"time_min": "{time}"}))
    assert _fitted(slot, timed, None) == slot.words()
    # A tool's preposition ("transfer_to_human_agents") is no word of what it acts on.
    transfer = steps(
        ("transfer_to_human_agents", {"summary": "{summary}"}), ("exchange_order", {"order_id": "{order_id}"})
    )
    assert _fitted(cheapest, transfer, None) == ["exchange", "order"]
    # What it acts on ("half hour meeting") has no tool's word: a tool's word in what qualifies
    # it ("at the earliest time") does not replace it.
    booked = Phrase("book", (("", "half hour meeting"), ("at", "earliest time")))
    assert _fitted(booked, timed, None) == ["book", "half", "hour", "meeting"]


def crm(i: int) -> Trajectory:
    """Tasks that name the app ("the CRM") where the tool names what it changes (a customer)."""
    name = ["Ada Park", "Bo Chen", "Cy Diaz", "Di Evans"][i % 4]
    steps: list[tuple[str, dict[str, Any], str | None]] = [
        ("crm.search_customers", {"customer_name": name}, None),
        ("crm.update_customer", {"customer_id": f"c{i}", "field": "status", "new_value": "won"}, None),
    ]
    return run(f"Update the CRM: {name} is now a won deal", steps, True, id=f"crm{i}")


def test_a_task_that_names_the_app_is_named_for_what_its_tool_changes() -> None:
    [w] = RuleInducer().induce(_cluster([crm(i) for i in range(6)])).workflows
    assert w.name == "update_customer" and w.description.startswith("Use to update customer")


RETURN = steps(
    ("find_user_id_by_email", {"email": "{email}"}),
    ("get_user_details", {"user_id": "{user_id}"}),
    ("get_order_details", {"order_id": "{order_id}"}),
    ("get_product_details", {"product_id": "{product_id}"}),
    ("modify_pending_order_address", {"order_id": "{order_id}", "city": "{city}"}),
    ("modify_pending_order_items", {"order_id": "{order_id}", "item_ids": "{item_ids}"}),
    ("cancel_pending_order", {"order_id": "{order_id}", "reason": "{reason}"}),
)


def test_the_description_says_the_changes_before_the_goal_not_only_the_first_look_ups() -> None:
    text = describe(RETURN, {"email": "task", "reason": "task"})
    assert text == (
        "Use to cancel pending order given {email} and {reason}: first find user id by email, "
        "then more look-ups, then modify pending order address, then modify pending order items."
    )
    # Three steps or fewer before the goal: each said, as before.
    assert describe(RETURN[3:], {}) == (
        "Use to cancel pending order: first get product details, then modify pending order address, "
        "then modify pending order items."
    )
    short = describe([RETURN[1], RETURN[4], RETURN[6]], {})
    assert short == "Use to cancel pending order: first get user details, then modify pending order address."


def test_a_look_ups_verb_in_the_tasks_does_not_name_a_workflow_that_changes_things() -> None:
    """The tasks "get the refund" of a return: not `get_product_details`, its last look-up."""
    calls = [RETURN[0], RETURN[1], RETURN[3], *steps(("return_delivered_order_items", {"order_id": "{o}"}))]
    runs = [
        run(
            f"You want to return the desk lamp of order #W{i}07 and get the refund to your card. "
            f"Your email is user{i}@shop.test.",
            [(s.action, {k: f"v{i}" for k in s.args}, None) for s in calls],
            True,
            id=f"g{i}",
        )
        for i in range(4)
    ]
    assert not name_for(calls, runs).startswith("get_")
    # A workflow that only looks things up is still named by its look-up's verb.
    reads = calls[:3]
    assert name_for(reads, [r.model_copy(update={"steps": r.steps[:3]}) for r in runs]).startswith("get_")


def test_a_phrase_without_its_thing_takes_the_thing_of_the_step_with_its_verb() -> None:
    """Two tasks are too few to tell their words from their kind's ("send an email to olga
    ..."): the phrase keeps "send to {name}", and `send_email` says what is sent."""
    names = ["olga", "raj"]
    calls = steps(
        ("company_directory.find_email_address", {"name": "{name}"}),
        ("email.send_email", {"recipient": "{recipient}", "subject": "{subject}"}),
    )
    runs = [
        run(
            f"Please send an email to {n} about the week {i} report",
            [
                ("company_directory.find_email_address", {"name": n}, f"{n}@atlas.test"),
                ("email.send_email", {"recipient": f"{n}@atlas.test", "subject": f"Week {i}"}, None),
            ],
            True,
            id=f"s{i}",
        )
        for i, n in enumerate(names)
    ]
    assert name_for(calls, runs, names) == "send_email"
    said = describe(calls, {"name": "task", "subject": "task"}, names, runs)
    assert said.startswith("Use to send email to {name}"), said
    # A verb no step has takes the thing of the goal, a change ("mail email to {name}")...
    mailed = [r.model_copy(update={"task": r.task.replace("send an email", "mail it")}) for r in runs]
    assert name_for(calls, mailed, names) == "mail_email", name_for(calls, mailed, names)
    # ... not a place it goes to, nor what a look-up gets.
    handed = steps(("transfer_to_human_agents", {"summary": "{summary}"}))
    moved = [
        run(
            f"Please refund to {n} the week {i} order",
            [("transfer_to_human_agents", {"summary": n}, None)],
            True,
        )
        for i, n in enumerate(names)
    ]
    assert name_for(handed, moved, names) == "refund_to_summary"  # not "refund agents to ..."
    looked = [r.model_copy(update={"steps": r.steps[:1]}) for r in mailed]
    assert name_for(calls[:1], looked, names) == "mail_to_name", name_for(calls[:1], looked, names)


def test_a_workflow_that_only_looks_up_what_decides_a_change_it_did_not_make_is_a_check() -> None:
    """Conditional tasks ("if X, send ...") whose runs found nothing to send: the workflow
    searches events, so it is not "Use to send email" (an agent would stop before sending)."""
    calls = steps(("calendar.search_events", {"query": "{query}"}))
    runs = [
        run(
            f"If I have a meeting about {topic} this week, send an email to the attendees",
            [("calendar.search_events", {"query": topic}, None)],
            True,
            id=f"c{i}",
        )
        for i, topic in enumerate(["budget", "hiring", "roadmap", "offsite"])
    ]
    assert name_for(calls, runs) == "check_before_send_email"
    assert describe(calls, {"query": "task"}, runs=runs) == (
        "Use to check whether to send email to attendees given {query}: search events."
    )
    # With the send among its steps it is the send.
    sends = [*calls, *steps(("email.send_email", {"recipient": "{recipient}"}))]
    sent = [run(r.task, [(s.action, {"x": "v"}, None) for s in sends], True, id=f"s{r.id}") for r in runs]
    assert name_for(sends, sent) == "send_email_to_attendees"
    # A verb of the tasks that looks up ("show") is what the look-ups do: no check.
    shown = [r.model_copy(update={"task": r.task.replace("send an email to", "show me")}) for r in runs]
    assert not name_for(calls, shown).startswith("check_before")


def test_a_phrase_whose_object_opens_with_a_value_takes_the_thing_after_it() -> None:
    """ "change {order_id} to {address2}": the tasks name the order by its id, the thing the
    goal changes (an address) goes right after it, and the name is that thing's."""
    calls = steps(
        ("get_order_details", {"order_id": "{order_id}"}),
        ("modify_pending_order_address", {"order_id": "{order_id}", "address2": "{address2}"}),
    )
    streets = ["Suite 641", "Apt 12", "Unit 9", "Floor 3"]
    runs = [
        run(
            f"Please change #W{i}07 to {street}, it is urgent",
            [
                ("get_order_details", {"order_id": f"#W{i}07"}, None),
                ("modify_pending_order_address", {"order_id": f"#W{i}07", "address2": street}, None),
            ],
            True,
            id=f"a{i}",
        )
        for i, street in enumerate(streets)
    ]
    assert name_for(calls, runs) == "change_address"
    text = describe(calls, {"order_id": "task", "address2": "task"}, runs=runs)
    assert text.startswith("Use to change {order_id} address to {address2}")
