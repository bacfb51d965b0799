"""The simulated office, its task families and the scripted agent (flowmem.demo)."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from flowmem.demo import (
    FAMILIES,
    MULTI_FAMILIES,
    NOW,
    SINGLE_FAMILIES,
    SOURCE,
    TOOLS,
    ScriptedAgent,
    Task,
    ToolError,
    World,
    make_tasks,
    simulate,
)
from flowmem.demo.listings import LISTINGS, MailHit, listing, listing_of, render
from flowmem.models import Trajectory, placeholders_in


@pytest.fixture(scope="module")
def world() -> World:
    return World.generate(7)


def _task(world: World, family: str, seed: int = 0) -> Task:
    return make_tasks(world, 1, seed=seed, families=[family])[0]


def _top(trajectories: list[Trajectory]) -> list[Trajectory]:
    return [t for t in trajectories if t.parent_id is None]


def _rate(trajectories: list[Trajectory]) -> float:
    top = _top(trajectories)
    return sum(bool(t.success) for t in top) / len(top)


# -- world -----------------------------------------------------------------------------------


def test_generate_is_deterministic_and_seed_dependent() -> None:
    assert World.generate(3) == World.generate(3)
    assert World.generate(3) != World.generate(4)


def test_generated_world_has_the_promised_shape(world: World) -> None:
    assert (len(world.contacts), len(world.mailbox), len(world.calendar)) == (12, 40, 20)
    assert (len(world.customers), len(world.tasks)) == (15, 20)
    assert len({c.name for c in world.contacts}) == 12
    assert all(re.fullmatch(r"[a-z]+\.[a-z]+@[a-z]+\.test", c.email) for c in world.contacts)
    threads = Counter(e.subject.removeprefix("Re: ") for e in world.mailbox.values())
    assert max(threads.values()) >= 3  # several emails share a subject, at distinct dates
    assert len({e.timestamp for e in world.mailbox.values()}) == 40
    assert any(e.start < NOW for e in world.calendar.values())
    assert any(e.start > NOW for e in world.calendar.values())


def test_copy_is_independent(world: World) -> None:
    copy = world.copy()
    copy.call("mail.delete", {"email_id": "em-001"})
    copy.call("mail.send", {"to": "x.y@example.test", "subject": "Hi", "body": "Hello"})
    assert "em-001" not in copy.mailbox and "em-001" in world.mailbox
    assert len(copy.outbox) == 1 and world.outbox == []


def test_search_lists_matches_newest_first(world: World) -> None:
    topic = Counter(e.subject.removeprefix("Re: ") for e in world.mailbox.values()).most_common(1)[0][0]
    hits = json.loads(world.call("mail.search", {"query": topic.lower()}))
    assert len(hits) >= 3 and all(topic in h["subject"] for h in hits)
    assert [h["date"] for h in hits] == sorted((h["date"] for h in hits), reverse=True)
    assert world.call("mail.search", {"query": "no such subject"}).startswith("No emails match")


def test_every_listing_reads_back_as_its_records_and_prints_the_same(world: World) -> None:
    """What a listing tool prints parses into its record type, and those records print the same
    text, so the agents read exactly the fields the tools write (for every listing tool)."""
    assert set(LISTINGS) <= set(TOOLS)
    queries = {"contacts.lookup": {"name": "a"}}
    for action, kind in LISTINGS.items():
        observation = world.call(action, queries.get(action, {"query": "e"}))
        records = listing(observation, kind)
        assert records and all(type(r) is kind for r in records)
        assert render(records) == observation
        assert json.loads(observation)[0] == records[0].model_dump(mode="json", by_alias=True)
    assert listing(world.call("mail.search", {"query": "no such subject"}), MailHit) == []
    assert listing_of("mail.read", world.call("mail.read", {"email_id": "em-001"})) == []


def test_tools_mutate_the_world(world: World) -> None:
    w = world.copy()
    olga = w.contacts[0]
    observation = w.call(
        "calendar.create_event",
        {"title": "Pitch", "participant": olga.email, "start": "2026-03-04 10:30", "duration_minutes": "45"},
    )
    event_id = observation.split()[1]
    assert w.calendar[event_id].duration_minutes == 45 and w.created_events == [event_id]
    w.call("calendar.cancel_event", {"event_id": event_id})
    assert event_id not in w.calendar and w.cancelled[-1].id == event_id
    customer = next(iter(w.customers.values()))
    w.call("crm.update_status", {"customer_id": customer.id, "status": "lost"})
    w.call("crm.assign_rep", {"customer_id": customer.id, "rep": olga.email})
    assert (w.customers[customer.id].status, w.customers[customer.id].rep) == ("lost", olga.email)
    assert set(TOOLS) >= {"contacts.lookup", "mail.forward", "board.create_task", "crm.find_customer"}


@pytest.mark.parametrize(
    ("action", "args", "message"),
    [
        ("mail.explode", {}, "Unknown action"),
        ("mail.read", {}, "missing argument 'email_id'"),
        ("mail.read", {"email_id": "em-001", "extra": 1}, "unexpected argument 'extra'"),
        ("mail.read", {"email_id": "em-999"}, "No email with id 'em-999'"),
        ("mail.forward", {"email_id": "em-001", "to": "Olga Petrova"}, "expected an email address"),
        ("mail.search", {"query": "  "}, "query is empty"),
        ("calendar.cancel_event", {"event_id": "ev-999"}, "No event"),
        ("crm.update_status", {"customer_id": "cu-001", "status": "closed-won"}, "Invalid status"),
        ("crm.assign_rep", {"customer_id": "cu-001", "rep": "a.b@example.test"}, "not a colleague"),
        ("board.create_task", {"title": "T", "assignee": "a@b.test", "due": "03/12/2026", "board": "Hiring"},
         "expected YYYY-MM-DD"),
        ("board.create_task", {"title": "T", "assignee": "a@b.test", "due": "2026-03-12", "board": "Moon"},
         "Unknown board 'Moon'"),
    ],
)  # fmt: skip
def test_bad_calls_raise_tool_errors(world: World, action: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolError, match=re.escape(message)):
        world.copy().call(action, args)


def test_create_event_checks_format_duration_and_participant(world: World) -> None:
    who = world.contacts[1].email
    good = {"title": "Sync", "participant": who, "start": "2026-03-04 10:30", "duration_minutes": 30}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"start": "2026-03-04T10:30:00"}, "expected YYYY-MM-DD HH:MM"),
        ({"start": "2026-02-01 10:30"}, "in the past"),
        ({"duration_minutes": "half an hour"}, "must be int"),
        ({"duration_minutes": 0}, "Invalid duration_minutes"),
        ({"participant": "Olga"}, "Invalid participant 'Olga'"),
    ]
    for bad, message in cases:
        with pytest.raises(ToolError, match=re.escape(message)):
            world.copy().call("calendar.create_event", {**good, **bad})


# -- task families ---------------------------------------------------------------------------


def test_families_cover_the_office_with_paraphrases() -> None:
    assert len(SINGLE_FAMILIES) >= 8 and len(MULTI_FAMILIES) >= 2
    assert {f.agent for f in SINGLE_FAMILIES} == {"email_agent", "calendar_agent", "crm_agent", "board_agent"}
    for family in FAMILIES.values():
        assert len(family.templates) >= 2, family.name
        # Paraphrases of one intent use exactly the same slots.
        assert len({frozenset(placeholders_in(t)) for t in family.templates}) == 1, family.name


def test_make_tasks_is_deterministic_and_slots_appear_in_texts(world: World) -> None:
    tasks = make_tasks(world, 60, seed=1)
    assert tasks == make_tasks(world, 60, seed=1)
    assert tasks != make_tasks(world, 60, seed=2)
    assert {t.family for t in tasks} == set(FAMILIES)
    assert len({t.id for t in tasks}) == 60
    for task in tasks:
        assert task.slots and all(value in task.text for value in task.slots.values()), task.text
        for sub in task.subtasks:
            assert all(value in sub.text for value in sub.slots.values()), sub.text
    texts = {t.text for t in tasks if t.family == "forward_latest"}
    assert len({re.sub(r"'[^']*'|[A-Z][a-z]+ [A-Z][a-z]+", "_", t) for t in texts}) >= 2  # phrasing varies


def test_make_tasks_rejects_unknown_families(world: World) -> None:
    with pytest.raises(ValueError, match="unknown"):
        make_tasks(world, 3, seed=0, families=["forward_latest", "launch_rocket"])


def test_multi_agent_tasks_decompose_into_single_agent_subtasks(world: World) -> None:
    for family in MULTI_FAMILIES:
        task = _task(world, family.name)
        assert task.agent == "orchestrator" and 2 <= len(task.subtasks) <= 3
        assert len({s.agent for s in task.subtasks}) >= 2
        assert [s.id for s in task.subtasks] == [f"{task.id}/{i}" for i in range(1, len(task.subtasks) + 1)]
        assert all(not s.is_multi and s.family in FAMILIES for s in task.subtasks)


# -- goal checks -----------------------------------------------------------------------------


def test_forward_check_wants_the_latest_email(world: World) -> None:
    task = _task(world, "forward_latest")
    to = world.contact(task.slots["name"])
    assert to is not None
    hits = json.loads(world.call("mail.search", {"query": task.slots["subject"]}))
    newest, older = hits[0]["id"], hits[-1]["id"]
    assert newest != older

    wrong = world.copy()
    assert not task.check(wrong)  # nothing done yet
    wrong.call("mail.forward", {"email_id": older, "to": to.email})
    assert not task.check(wrong)
    assert f"latest email about it is {newest}" in (task.diagnose(wrong) or "")

    right = world.copy()
    right.call("mail.forward", {"email_id": newest, "to": to.email})
    assert task.check(right)
    misdirected = world.copy()
    misdirected.call("mail.forward", {"email_id": newest, "to": "someone.else@example.test"})
    assert not task.check(misdirected)


def test_cancel_check_wants_the_next_upcoming_meeting(world: World) -> None:
    task = _task(world, "cancel_next")
    who = world.contact(task.slots["name"])
    assert who is not None
    mine = sorted((e for e in world.calendar.values() if who.email in e.participants), key=lambda e: e.start)
    upcoming = [e for e in mine if e.start > NOW]
    for event in mine:
        w = world.copy()
        w.call("calendar.cancel_event", {"event_id": event.id})
        assert task.check(w) == (event.id == upcoming[0].id)


def test_complete_check_wants_the_right_board(world: World) -> None:
    task = _task(world, "complete_task")
    same_title = [t for t in world.tasks.values() if t.title == task.slots["title"] and t.status == "open"]
    for t in same_title:
        w = world.copy()
        w.call("board.complete_task", {"task_id": t.id})
        assert task.check(w) == (t.board == task.slots["board"])


def test_crm_and_board_checks_compare_the_end_state(world: World) -> None:
    task = _task(world, "update_status")
    customer = world.customer_named(task.slots["customer"])
    assert customer is not None
    w = world.copy()
    w.call("crm.update_status", {"customer_id": customer.id, "status": task.slots["status"]})
    assert task.check(w) and not task.check(world)

    task = _task(world, "create_task")
    who = world.contact(task.slots["name"])
    assert who is not None
    args = {"title": task.slots["title"], "assignee": who.email, "due": task.slots["due"]}
    w = world.copy()
    w.call("board.create_task", {**args, "board": task.slots["board"]})
    assert task.check(w)
    other = next(b for b in world.boards if b != task.slots["board"])
    w = world.copy()
    w.call("board.create_task", {**args, "board": other})
    assert not task.check(w)


# -- scripted agent --------------------------------------------------------------------------


def test_perfect_agent_solves_every_family() -> None:
    trajectories = simulate(40, seed=5, skill=1.0)
    top = _top(trajectories)
    assert {t.group for t in top} == set(FAMILIES)
    assert _rate(trajectories) == 1.0
    assert all(t.success for t in trajectories)
    assert all(s.error is None for t in trajectories for s in t.steps)
    # Even a perfect agent's successful runs of one family vary in length (optional checks).
    lengths: dict[str | None, set[int]] = {}
    for t in trajectories:
        lengths.setdefault(t.group, set()).add(len(t.steps))
    assert any(len(n) > 1 for group, n in lengths.items() if group in {f.name for f in SINGLE_FAMILIES})


def test_lower_skill_means_lower_success_and_visible_errors() -> None:
    runs = {skill: simulate(200, seed=11, skill=skill) for skill in (0.4, 0.7, 1.0)}
    rates = {skill: _rate(r) for skill, r in runs.items()}
    assert rates[0.4] < rates[0.7] < rates[1.0] == 1.0
    assert 0.55 <= rates[0.7] <= 0.8
    failed = [t for t in runs[0.4] if t.success is False]
    assert all(t.feedback for t in failed)  # the goal check says why
    with_errors = [t for t in failed if any(s.error for s in t.steps)]
    assert len(with_errors) >= len(failed) // 3
    # A run that gives up after a tool error stops right at the failing step.
    gave_up = [t for t in with_errors if (t.final_answer or "").startswith("I could not")]
    assert gave_up and any(t.steps[-1].error for t in gave_up)
    assert all(s.error is None for t in runs[1.0] for s in t.steps)


def test_agent_recovers_from_a_bare_name(world: World) -> None:
    recovered = 0
    for seed in range(40):
        task = make_tasks(world, 1, seed=seed, families=["assign_rep"])[0]
        run = ScriptedAgent(seed, skill=0.5).solve(task, world.copy())
        for i, step in enumerate(run.steps[:-2]):
            if step.error and "expected an email address" in step.error:
                # The rejected bare name is looked up, then the same call is retried.
                lookup, retry = run.steps[i + 1], run.steps[i + 2]
                assert (lookup.action, lookup.args) == ("contacts.lookup", {"name": task.slots["name"]})
                assert retry.action == step.action and retry.error is None and run.success
                recovered += 1
    assert recovered > 0


def test_solve_is_deterministic_and_fills_the_trajectory(world: World) -> None:
    task = _task(world, "schedule_meeting", seed=3)
    agent = ScriptedAgent(9, skill=0.6)
    first = agent.solve(task, world.copy())
    assert first == ScriptedAgent(9, skill=0.6).solve(task, world.copy())
    assert first.id == task.id and first.task == task.text and first.agent == "calendar_agent"
    assert first.source == SOURCE and first.group == "schedule_meeting"
    assert (
        first.meta["slots"] == task.slots and first.meta["family"] == task.family and first.meta["seed"] == 9
    )
    assert first.success == task.check(_replay(task, world, agent))
    assert all(s.thought for s in first.steps)
    with pytest.raises(ValueError, match="skill"):
        ScriptedAgent(0, skill=1.5)


def _replay(task: Task, world: World, agent: ScriptedAgent) -> World:
    w = world.copy()
    agent.solve(task, w)
    return w


def test_multi_agent_trajectories_link_to_the_orchestrator(world: World) -> None:
    task = _task(world, "onboard_customer")
    runs = ScriptedAgent(2, skill=1.0).solve_multi(task, world.copy(), trajectory_id="demo-1")
    top, subs = runs[0], runs[1:]
    assert top.agent == "orchestrator" and top.parent_id is None and top.success
    assert [s.action for s in top.steps] == ["delegate"] * len(task.subtasks)
    assert [s.args["agent"] for s in top.steps] == [t.agent for t in task.subtasks]
    assert [s.args["subtask"] for s in top.steps] == [t.text for t in task.subtasks]
    assert [s.id for s in subs] == [f"demo-1/{i}" for i in range(1, len(subs) + 1)]
    assert all(s.parent_id == "demo-1" for s in subs)
    assert [(s.agent, s.task, s.group) for s in subs] == [(t.agent, t.text, t.family) for t in task.subtasks]
    assert ScriptedAgent(2, skill=1.0).solve(task, world.copy(), trajectory_id="demo-1") == top


def test_simulate_is_deterministic_with_stable_ids() -> None:
    runs = simulate(30, seed=4)
    assert runs == simulate(30, seed=4)
    assert runs != simulate(30, seed=5)
    top = _top(runs)
    assert [t.id for t in top] == [f"sim-4-{i:05d}" for i in range(30)]
    assert len({t.id for t in runs}) == len(runs) > 30  # multi-agent tasks add sub-runs
    assert all(t.created_at == NOW + timedelta(seconds=i) for i, t in enumerate(top))
    assert all(t.source == SOURCE and t.meta["seed"] == 4 for t in runs)
    for t in runs:
        if t.parent_id is not None:
            assert t.id.startswith(t.parent_id + "/")
