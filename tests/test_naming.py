"""Names and descriptions a reader can tell apart (`induction/naming.py`, `describe.verb_phrase`)."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from flowmem.induction.describe import VERBS, describe, name_for, verb_phrase
from flowmem.induction.naming import distinct
from flowmem.induction.orchestrate import induce_drafts
from flowmem.induction.rule import RuleInducer
from flowmem.interchange.skills import skill_names
from flowmem.jobs.evaluate import load
from flowmem.models import Workflow, WorkflowStep
from flowmem.settings import Settings
from tests.factories import WORKBENCH


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
        assert w.description.startswith("Use to delete event")
    assert "three_times" in named["agent-c12-2"].name  # the extra calls
    assert "then_search_events" in named["agent-c12-3"].name  # the extra step
    assert "find_email_address" in named["agent-c40"].name  # the look-up it makes first
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
    # Other agents' workflows, and workflows that share nothing, are left as they are.
    other = flow("b-c1", SEARCH, DELETE, agent="b")
    assert distinct([*VARIANTS[:1], other]) == [VARIANTS[0], other]


def test_a_workflow_told_apart_before_keeps_its_name_and_fixed_ones_keep_theirs() -> None:
    named = {w.id: w for w in distinct(VARIANTS)}
    # Induced again on its own (its variants not in this run): it keeps the served name.
    again = distinct([VARIANTS[1]], served=named)
    assert again[0].name == named["agent-c12-2"].name
    # A workflow put by hand with the same name keeps it; the induced one is told apart.
    by_hand = VARIANTS[0].model_copy(update={"id": "mine"})
    [induced] = distinct([VARIANTS[1]], fixed=[by_hand])
    assert induced.name != by_hand.name and induced.name.startswith(by_hand.name)
    # Alike in every step: told apart by an ordinal word, by content, not by id.
    twins = [VARIANTS[0], VARIANTS[0].model_copy(update={"id": "agent-c99"})]
    assert len({w.name for w in distinct(twins)}) == 2


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
    for agent in {w.agent for w in workflows}:
        own = [w for w in workflows if w.agent == agent]
        assert Counter(w.name for w in own).most_common(1)[0][1] == 1
        assert Counter(w.description for w in own).most_common(1)[0][1] == 1
    for w in workflows:
        goal = w.steps[max(i for i, s in enumerate(w.steps) if s.action == _goal(w))]
        verb = verb_phrase(goal.action, goal.args).verb
        assert w.name.startswith(verb + "_") or w.name == verb, w.name
        # The tool's own verb, or (where its words read as an example's value) get or call.
        said = w.description.removeprefix("Use to ").split()[0]
        assert w.description.startswith("Use to ") and said in {verb, "get", "call"}, w.description
        assert said in VERBS, w.description
    folders = skill_names(workflows).values()
    assert len(set(folders)) == len(workflows) and not any(re.search(r"-c\d", f) for f in folders)
    counts = [w for w in workflows if w.steps[-1].action.endswith("engaged_users_count")]
    assert counts and all(w.name.startswith("count_engaged_users") for w in counts)


def _goal(w: Workflow) -> str:
    from flowmem.induction.describe import goal_index

    return w.steps[goal_index(w.steps)].action
