"""Intent segments: a run cut into the sub-routines it is made of."""

from __future__ import annotations

from typing import Any

from flowmem.induction.abstract.segments import is_read, segment, shape_of
from flowmem.models import Trajectory


def run(*calls: tuple[str, dict[str, Any]], observations: dict[int, str] | None = None) -> Trajectory:
    seen = observations or {}
    steps = [{"action": a, "args": args, "observation": seen.get(i)} for i, (a, args) in enumerate(calls)]
    return Trajectory.model_validate({"id": "r", "task": "t", "steps": steps, "success": True})


def test_reads_are_recognised_by_the_verb_of_the_action_name() -> None:
    assert is_read("get_order_details") and is_read("email.search_emails") and is_read("calendar.findEvents")
    assert not is_read("exchange_delivered_order_items") and not is_read("email.forward_email")


def test_each_change_is_a_segment_with_the_reads_that_serve_it() -> None:
    t = run(
        ("find_user_id_by_name_zip", {"zip": "19122"}),  # serves both changes: shared
        ("get_order_details", {"order_id": "#W1"}),
        ("cancel_pending_order", {"order_id": "#W1"}),
        ("get_order_details", {"order_id": "#W2"}),
        ("return_delivered_order_items", {"order_id": "#W2", "item_ids": ["9"]}),
    )
    cut = segment(t)
    assert [(s.actions, s.shared) for s in cut] == [
        (["find_user_id_by_name_zip"], True),
        (["get_order_details", "cancel_pending_order"], False),
        (["get_order_details", "return_delivered_order_items"], False),
    ]
    assert [s.goal for s in cut] == [0, 2, 4]
    assert cut[2].as_trajectory().id == "r#4" and cut[2].as_trajectory().actions == cut[2].actions


def test_an_earlier_lookup_of_the_same_thing_feeds_a_later_change() -> None:
    t = run(
        ("get_order_details", {"order_id": "#W1"}),
        ("get_order_details", {"order_id": "#W2"}),
        ("cancel_pending_order", {"order_id": "#W2"}),
        ("modify_pending_order_address", {"order_id": "#W1", "zip": "10001"}),
    )
    cut = segment(t)
    # #W1 was looked up before the cancel, but it is the address change that uses it.
    assert [s.positions for s in cut] == [(0, 3), (1, 2)]
    assert {s.goal_action for s in cut} == {"cancel_pending_order", "modify_pending_order_address"}


def test_a_value_seen_in_an_observation_links_a_read_to_its_change() -> None:
    t = run(
        ("email.search_emails", {"query": "budget"}),
        ("contacts.lookup", {"name": "olga"}),
        ("email.send_email", {"to": "x@y.z"}),
        ("email.forward_email", {"email_id": "e42", "to": "olga@corp.test"}),
        observations={0: "[e42]", 1: "olga@corp.test"},
    )
    # The search and the lookup returned what the forward uses, not what the send uses.
    assert [s.actions for s in segment(t)] == [
        ["email.search_emails", "contacts.lookup", "email.forward_email"],
        ["email.send_email"],
    ]


def test_a_loop_of_one_change_is_one_segment_and_a_read_only_run_is_one() -> None:
    t = run(
        ("unlock_tool", {"name": "refund"}),
        ("call_tool", {"id": "1"}),
        ("call_tool", {"id": "2"}),
        ("call_tool", {"id": "3"}),
    )
    assert [s.actions for s in segment(t)] == [["unlock_tool"], ["call_tool"] * 3]
    reads = run(("get_product_details", {"id": "1"}), ("list_items", {}))
    [only] = segment(reads)
    assert only.positions == (0, 1) and only.goal == 1


def test_the_shape_ignores_repeated_lookups() -> None:
    t = run(
        ("get_order_details", {"order_id": "#W1"}),
        ("get_order_details", {"order_id": "#W2"}),
        ("exchange_delivered_order_items", {"order_id": "#W2"}),
    )
    [s] = segment(t)
    assert shape_of(s) == (
        "exchange_delivered_order_items",
        ("get_order_details", "exchange_delivered_order_items"),
    )
