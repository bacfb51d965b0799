"""Names and descriptions a reader can tell apart (`induction/render/naming.py`, `describe.verb_phrase`),
and names made from what the tasks ask (`induction/render/phrase.py`)."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from flowmem.induction.base import ClusterInput
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex, find_literals
from flowmem.induction.render.describe import MAX_NAME_WORDS, describe, name_for, phrase_for, verb_phrase
from flowmem.induction.render.naming import distinct
from flowmem.induction.render.phrase import COUNTING_WORDS
from flowmem.interchange.skills import skill_names
from flowmem.jobs.evaluate import load
from flowmem.models import Step, Trajectory, Workflow, WorkflowStep
from flowmem.settings import Settings
from tests.factories import WORKBENCH
from tests.inmemory import induce_drafts


def flow(wid: str, *calls: tuple[str, dict[str, str]], agent: str = "agent", **kw: object) -> Workflow:
    steps = [WorkflowStep(action=a, args=args) for a, args in calls]
    given = {p.strip("{}") for _, args in calls for p in args.values()}
    parameters = {p: "task" for p in sorted(given)}
    fields = {"name": name_for(steps), "description": describe(steps, parameters), **kw}
    return Workflow(id=wid, steps=steps, parameters=parameters, agent=agent, **fields)


SEARCH = ("calendar.search_events", {"query": "{query}"})
DELETE = ("calendar.delete_event", {"event_id": "{event_id}"})
ADDRESS = ("directory.find_email_address", {"name": "{name}"})
VARIANTS = [
    flow("agent-c12", SEARCH, DELETE),  # the plain way
    flow("agent-c12-2", SEARCH, DELETE, DELETE, DELETE),  # one call per event
    flow("agent-c12-3", SEARCH, DELETE, SEARCH),  # checks afterwards
    flow("agent-c40", ADDRESS, SEARCH, DELETE),  # another cluster: looks the person up first
]


def test_a_noun_phrase_tool_reads_verb_first() -> None:
    assert verb_phrase("analytics.engaged_users_count").words == ["count", "engaged", "users"]
    assert verb_phrase("analytics.traffic_source_count").words == ["count", "traffic", "sources"]
    assert verb_phrase("orders.order_details", ["order_id"]) == ("get", ("order", "details"), True)
    assert verb_phrase("weather").verb == "get"  # a single noun
    assert verb_phrase("upcoming_events").verb == "get"  # no imperative is an -ing form
    assert verb_phrase("email.forward_email").words == ["forward", "email"]
    assert verb_phrase("exchange_delivered_order_items").verb == "exchange"
    assert verb_phrase("calculate").words == ["calculate"]
    count = [WorkflowStep(action="analytics.engaged_users_count", args={"time_min": "{since}"})]
    assert name_for(count) == "count_engaged_users"
    text = describe(count, {"since": "task"})
    assert text == "Use to count engaged users given {since}."
    traffic = [WorkflowStep(action="analytics.traffic_source_count", args={"traffic_source": "{source}"})]
    assert describe(traffic, {"source": "task"}).startswith("Use to count traffic sources given")


def test_variants_and_clusters_with_one_goal_get_names_and_descriptions_of_what_differs() -> None:
    assert len({w.name for w in VARIANTS}) == 1 and len({w.description for w in VARIANTS}) > 1
    named = {w.id: w for w in distinct(VARIANTS)}
    assert len({w.name for w in named.values()}) == 4
    assert len({w.description for w in named.values()}) == 4
    for w in named.values():
        assert w.name.startswith("delete_event_") and not re.search(r"c\d|\d", w.name), w.name
        assert _short_and_uncounted(w.name), w.name
        assert w.description.startswith("Use to delete event")
    assert named["agent-c12-2"].name == "delete_event_repeatedly"  # the extra calls, not counted
    assert named["agent-c12-3"].name == "delete_event_then_search_events"  # the extra step
    assert named["agent-c40"].name == "delete_event_by_name"  # the value it takes from the task
    assert "calls delete_event three times" in named["agent-c12-2"].description
    assert "then calls search_events" in named["agent-c12-3"].description


def test_an_argument_from_the_task_and_the_scope_tell_workflows_apart() -> None:
    by_date = flow("a-c1", ("calendar.search_events", {"query": "{query}", "time_min": "{time_min}"}), DELETE)
    plain = flow("a-c2", ("calendar.search_events", {"query": "{query}"}), DELETE)
    plan = flow("a-c3", SEARCH, DELETE, scope="task")
    named = {w.id: w for w in distinct([by_date, plain, plan])}
    assert "by_time_min" in named["a-c1"].name and "plan" in named["a-c3"].name
    assert len({w.name for w in named.values()}) == 3


def test_distinct_is_deterministic_idempotent_and_independent_of_order() -> None:
    first = sorted(distinct(VARIANTS), key=lambda w: w.id)
    shuffled = list(VARIANTS)
    random.Random(3).shuffle(shuffled)
    assert sorted(distinct(shuffled), key=lambda w: w.id) == first
    assert distinct(first) == first
    # Workflows that share nothing, and those of another namespace, are left as they are.
    elsewhere = flow("b-c1", SEARCH, DELETE, agent="b", namespace="other")
    assert distinct([*VARIANTS[:1], elsewhere]) == [VARIANTS[0], elsewhere]
    # Two agents of one namespace: one name each, told apart by the agent.
    other = flow("b-c1", SEARCH, DELETE, agent="b")
    names = [w.name for w in distinct([VARIANTS[0], other])]
    assert names == ["delete_event_for_agent", "delete_event_for_b"]


def test_a_workflow_told_apart_before_keeps_its_name_and_fixed_ones_keep_theirs() -> None:
    named = {w.id: w for w in distinct(VARIANTS)}
    # Induced again on its own (its variants not in this run): it keeps the served name.
    again = distinct([VARIANTS[1]], served=named)
    assert again[0].name == named["agent-c12-2"].name
    # A workflow put by hand with the same name keeps it; the induced one is told apart.
    by_hand = VARIANTS[0].model_copy(update={"id": "mine"})
    [induced] = distinct([VARIANTS[1]], fixed=[by_hand])
    assert induced.name != by_hand.name and induced.name.startswith(by_hand.name)
    # Alike in every step: told apart by a letter, by content, not by id nor by a count.
    twins = [VARIANTS[0], VARIANTS[0].model_copy(update={"id": "agent-c99"})]
    assert sorted(w.name for w in distinct(twins)) == ["delete_event", "delete_event_variant_b"]


def test_workflows_that_each_left_a_difference_to_the_others_say_one_of_their_own() -> None:
    """The first lacks the second's repeat, the third lacks the first two's check afterwards:
    each leaves the other to say it, and both would be `delete_event`. The first by content
    keeps the name; the other says a difference of its own, not a letter."""
    workflows = [
        flow("agent-c5", SEARCH, DELETE, SEARCH),
        flow("agent-c5-2", SEARCH, DELETE, DELETE, SEARCH),
        flow("agent-c5-3", ADDRESS, SEARCH, DELETE, DELETE),
    ]
    names = [w.name for w in distinct(workflows)]
    assert names == ["delete_event", "delete_event_repeatedly_without_name", "delete_event_by_name"]
    assert not any("variant" in n for n in names)


def test_skill_folder_names_carry_no_cluster_ids() -> None:
    named = distinct(VARIANTS)
    assert sorted(skill_names(named).values()) == sorted(w.name.replace("_", "-") for w in named)
    # Two agents with one name: each folder takes its agent's name, never an id.
    other = VARIANTS[0].model_copy(update={"id": "mailer-c3", "agent": "mailer"})
    names = skill_names([VARIANTS[0], other])
    assert names == {"agent-c12": "delete-event-agent", "mailer-c3": "delete-event-mailer"}


@pytest.mark.skipif(not WORKBENCH.exists(), reason="needs ../shared/data")
def test_workbench_workflows_have_distinct_grammatical_names_and_descriptions() -> None:
    runs = [t for t in load(WORKBENCH, Settings()) if t.meta["instance"] <= 6]
    workflows = induce_drafts(runs, RuleInducer()).workflows
    assert len(workflows) > 80  # repeats folded into loops merge drafts that differed in a count
    assert Counter(w.name for w in workflows).most_common(1)[0][1] == 1  # one namespace
    for agent in {w.agent for w in workflows}:
        own = [w for w in workflows if w.agent == agent]
        assert Counter(w.description for w in own).most_common(1)[0][1] == 1
    for w in workflows:
        assert _short_and_uncounted(w.name), w.name
        # Name and description start with one verb: the tasks' or the goal tool's (or, where
        # the tool's words read as an example's value, the description says get or call).
        said = w.description.removeprefix("Use to ").split()[0]
        assert w.description.startswith("Use to ") and said in {w.name.split("_")[0], "get", "call"}, (
            w.description
        )
        assert len(w.description.split()) >= 4 and "…" not in w.description
    folders = skill_names(workflows).values()
    assert len(set(folders)) == len(workflows) and not any(re.search(r"-c\d", f) for f in folders)
    # What the tasks ask, in their words: "Cancel all future meetings with anaya", ...
    assert "cancel_future_meetings" in {w.name for w in workflows}


def _short_and_uncounted(name: str) -> bool:
    words = name.split("_")
    return len(words) <= MAX_NAME_WORDS and not set(words) & COUNTING_WORDS and not re.search(r"\d", name)


def _deploy(i: int, version: str, env: str, *, ok: bool = True) -> Trajectory:
    steps = [Step(action="run_tests")] if ok else []
    steps += [
        Step(action="docker.build", args={"tag": version}),
        Step(action="registry.push", args={"image": f"app:{version}", "environment": env}),
    ]
    return Trajectory(id=f"deploy-{i}", task=f"Deploy {version} to {env}", steps=steps, success=ok)


DEPLOYS = [
    _deploy(i, v, e)
    for i, (v, e) in enumerate(
        [("v2.3.1", "staging"), ("v2.3.2", "staging"), ("v2.4.0", "production"), ("v2.4.1", "staging")]
    )
]


def test_the_name_says_what_the_tasks_ask_without_their_values() -> None:
    literals = LiteralIndex.build(DEPLOYS)
    cluster = ClusterInput("default", "agent", 0, "subtask", DEPLOYS, [], literals)
    [w] = RuleInducer().induce(cluster).workflows
    # "Deploy v2.3.1 to staging", ...: the values are the workflow's placeholders.
    assert w.name == "deploy_tag_to_environment"
    assert w.description.startswith("Use to deploy {tag} to {environment} given {image}: first run tests")
    assert not find_literals(f"{w.name} {w.description}", cluster.example_literals)
    assert not re.search(r"\d|staging|production", w.name + w.description)


def test_task_words_of_one_example_and_values_stay_out_of_the_phrase() -> None:
    tasks = [
        "Delete all emails from jonas@x.com",
        "Please delete the emails from ana@y.org",
        "Delete emails from li@z.net today",
    ]
    runs = [
        Trajectory(
            id=f"d{i}",
            task=t,
            steps=[
                Step(
                    action="email.delete_email",
                    args={"sender": t.split()[-1] if "today" not in t else "li@z.net"},
                )
            ],
            success=True,
        )
        for i, t in enumerate(tasks)
    ]
    steps = [WorkflowStep(action="email.delete_email", args={"sender": "{sender}"})]
    phrase = phrase_for(steps, runs, LiteralIndex.build(runs).example_literals(runs))
    assert phrase is not None and phrase.text() == "delete emails from {sender}"
    assert name_for(steps, runs) == "delete_emails"  # an object of its own: no placeholder
    # Tasks that share no requested verb: the goal's action names it.
    narrative = [
        r.model_copy(update={"task": f"You are customer {i}. Your order arrived late."})
        for i, r in enumerate(runs)
    ]
    assert phrase_for(steps, narrative) is None and name_for(steps, narrative) == "delete_email"


def test_names_are_short_uncounted_and_distinct_within_a_namespace() -> None:
    # Workflows that would all be "delete_event": plain, repeated, with a later check, by
    # two agents, and twins — each gets at most five words, none of them a count.
    clash = [
        *VARIANTS,
        flow("b-c1", SEARCH, DELETE, agent="b"),
        flow("b-c2", SEARCH, DELETE, DELETE, agent="b"),
        VARIANTS[0].model_copy(update={"id": "agent-c99"}),
    ]
    named = distinct(clash)
    assert len({w.name for w in named}) == len(clash)
    assert all(_short_and_uncounted(w.name) for w in named), [w.name for w in named]


def test_an_llm_name_too_long_or_counted_is_cut() -> None:
    long = VARIANTS[0].model_copy(
        update={"name": "search_events_then_delete_event_three_times_after_lookup_2", "id": "llm-c1"}
    )
    [w] = distinct([long])
    assert w.name == "search_events_then_delete_event"
    counted = VARIANTS[0].model_copy(update={"name": "delete_event_twice", "id": "llm-c2"})
    assert distinct([counted])[0].name == "delete_event"


def test_an_llm_s_bare_from_the_task_counts_as_the_rule_inducer_s_task() -> None:
    # Alike but for where {query} comes from: the task, or a look-up's result.
    typed = flow("a-c1", SEARCH, DELETE)
    looked_up = typed.model_copy(
        update={"id": "a-c2", "parameters": {**typed.parameters, "query": "result of contacts.lookup"}}
    )
    rule = [typed, looked_up]
    worded = [
        w.model_copy(
            update={
                "parameters": {k: v if v != "task" else "From the task." for k, v in w.parameters.items()}
            }
        )
        for w in rule
    ]
    assert [w.name for w in distinct(worded)] == [w.name for w in distinct(rule)]
    assert distinct(worded)[0].name.endswith("_by_query")
