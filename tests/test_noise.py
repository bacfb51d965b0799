"""Real agents' noise (`induction/abstract/noise.py`): each kind of step that does no work, on hand-built
runs, and a noisy cluster that induces the same workflow as its clean twin."""

from __future__ import annotations

from typing import Any

from flowmem.induction.abstract.noise import working_steps
from flowmem.induction.base import ClusterInput
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex
from flowmem.models import Step, Trajectory, Workflow

CUSTOMERS = [
    ("Ana", "Silva", "10001"),
    ("Ben", "Okafor", "20002"),
    ("Chen", "Wei", "30003"),
    ("Dora", "Lind", "40004"),
]


def step(action: str, observation: str | None = "ok", **kw: Any) -> Step:
    meta = kw.pop("meta", {})
    return Step(action=action, args=kw.pop("args", {}), observation=observation, meta=meta, **kw)


def clean_steps(i: int) -> list[Step]:
    """Identify the customer, look the order up, return its item."""
    first, last, zip_code = CUSTOMERS[i]
    user, order, item = f"{first.lower()}_{i}7", f"#W{i}0{i}1", f"it{i}9{i}8"
    return [
        step(
            "find_user_id_by_name_zip", user, args={"first_name": first, "last_name": last, "zip": zip_code}
        ),
        step("get_user_details", f'{{"user_id": "{user}", "orders": ["{order}"]}}', args={"user_id": user}),
        step(
            "get_order_details", f'{{"order_id": "{order}", "items": ["{item}"]}}', args={"order_id": order}
        ),
        step("return_delivered_order_items", "returned", args={"order_id": order, "item_ids": [item]}),
    ]


def trajectory(i: int, steps: list[Step], **kw: Any) -> Trajectory:
    first, last, zip_code = CUSTOMERS[i]
    task = f"Return the item of my last order. I am {first} {last}, zip {zip_code}."
    return Trajectory(id=f"ret-{i}", task=task, steps=steps, success=True, **kw)


def actions(run: Trajectory) -> list[str]:
    return [s.action for s in working_steps(run).steps]


def induce(runs: list[Trajectory]) -> Workflow:
    cluster = ClusterInput("default", "agent", 1, "subtask", runs, [], LiteralIndex.build(runs))
    [workflow] = RuleInducer().induce(cluster).workflows
    return workflow


def test_steps_of_another_actor_are_left_out() -> None:
    """A log that tells the agent's steps by an actor field: the user's are not the routine."""
    steps = clean_steps(0)
    by_user = step("share_receipt", args={"order_id": "#W0001"}, meta={"actor": "user"})
    noisy = [*(s.model_copy(update={"meta": {"actor": "agent"}}) for s in steps[:3]), by_user, steps[3]]
    assert actions(trajectory(0, noisy)) == [s.action for s in steps]
    # `role` names the actor too, and the run's own agent name counts as the agent.
    roles = [s.model_copy(update={"meta": {"role": "support-bot"}}) for s in steps]
    run = trajectory(
        0, [*roles, by_user.model_copy(update={"meta": {"role": "customer"}})], agent="support-bot"
    )
    assert actions(run) == [s.action for s in steps]

    # Every run of a kind with the user's step: consensus alone would keep it.
    def marked(i: int) -> Trajectory:
        own = [s.model_copy(update={"meta": {"actor": "assistant"}}) for s in clean_steps(i)]
        return trajectory(i, [*own[:3], by_user, own[3]])

    assert "share_receipt" not in [s.action for s in induce([marked(i) for i in range(4)]).steps]


def test_a_log_that_never_names_the_agent_keeps_every_step() -> None:
    """Actors named only `gpt-4` and `user`: which one is the agent the log does not say."""
    steps = [s.model_copy(update={"meta": {"actor": "gpt-4"}}) for s in clean_steps(0)]
    by_user = step("share_receipt", meta={"actor": "user"})
    assert actions(trajectory(0, [*steps, by_user])) == [*(s.action for s in steps), "share_receipt"]


def test_turns_of_conversation_are_left_out() -> None:
    """A message to the user (text under `content`, tau-bench's `respond`) does no work; a
    tool call with other arguments, or with non-text content, is kept."""
    steps = clean_steps(1)
    ask = step("respond", "my zip is 20002", args={"content": "Could you give me your zip code?"})
    confirm = step("respond", "yes", args={"content": "Shall I return it? Please confirm."})
    run = trajectory(1, [ask, *steps[:3], confirm, steps[3]])
    assert actions(run) == [s.action for s in steps]
    post = step("post_note", args={"content": "returned", "order_id": "#W1011"})
    upload = step("upload", args={"content": {"bytes": 12}})
    assert actions(trajectory(1, [*steps, post, upload])) == [
        *(s.action for s in steps),
        "post_note",
        "upload",
    ]
    runs = [trajectory(i, [ask, *clean_steps(i)[:3], confirm, clean_steps(i)[3]]) for i in range(4)]
    assert "respond" not in [s.action for s in induce(runs).steps]


def test_failed_calls_are_left_out_retried_or_not_unless_every_call_failed() -> None:
    steps = clean_steps(2)
    missing = step(
        "get_order_details", "Error: Order not found", args={"order_id": "#W999"}, error="Order not found"
    )
    wrong_way = step("exchange_delivered_order_items", "Error: not delivered", error="Non-delivered order")
    run = trajectory(2, [*steps[:2], missing, steps[2], wrong_way, steps[3]])
    assert actions(run) == [s.action for s in steps]
    only_failures = trajectory(2, [missing, wrong_way])
    assert working_steps(only_failures) == only_failures


def _create(email: str, board: str, answer: str) -> Step:
    args = {
        "task_name": "Fix login bug",
        "assigned_to_email": email,
        "board": board,
        "due_date": "2023-12-05",
    }
    return step("project_management.create_task", answer, args=args)


def test_a_call_made_again_corrected_after_an_unmarked_error_is_left_out() -> None:
    """A log that writes a tool's error as its answer only: the call made again with the
    address a look-up found, then with a board the error listed, is the routine; the two
    calls before it changed nothing."""
    guess = _create("kofi@example.com", "Back end", "Assignee email not valid. Please choose a team member.")
    found = step("company_directory.find_email_address", "['kofi.mensah@atlas.com']", args={"name": "Kofi"})
    board = _create(
        "kofi.mensah@atlas.com", "Back end", "Board not valid. Please choose from: 'Backend', 'Design'"
    )
    done = _create("kofi.mensah@atlas.com", "Backend", "00000300")
    run = Trajectory(id="wb-1", task="Add a task Fix login bug for Kofi", steps=[guess, found, board, done])
    assert working_steps(run).steps == [found, done]


def test_calls_made_again_on_other_things_are_kept() -> None:
    """Another task's name (from the task, not from an answer), another order changed the
    same way (answered alike: a second change, not a retry), another order with other items
    (more values changed than kept), or an unrecorded answer: each is its own call."""
    first = _create("kofi.mensah@atlas.com", "Backend", "00000300")
    other = first.model_copy(
        update={"args": {**first.args, "task_name": "Write docs"}, "observation": "00000301"}
    )
    found = step("company_directory.find_email_address", "['kofi.mensah@atlas.com']", args={"name": "Kofi"})
    for steps in ([first, other], [found, first, other]):
        run = Trajectory(id="wb-2", task="Add two tasks for Kofi", steps=steps)
        assert working_steps(run) == run
    address = {"address1": "445 Maple Drive", "city": "Fort Worth", "zip": "76165"}
    orders = step("get_user_details", '{"orders": ["#W9583042", "#W4082615"]}', args={"user_id": "mei_7"})
    moved = [
        step(
            "modify_pending_order_address",
            f'{{"order_id": "{o}", "status": "pending"}}',
            args={"order_id": o, **address},
        )
        for o in ("#W9583042", "#W4082615")
    ]
    run = trajectory(0, [orders, *moved])
    assert working_steps(run) == run
    items = step(
        "get_order_details", '{"items": ["1355937109", "9949163720"]}', args={"order_id": "#W9810810"}
    )
    changed = step(
        "modify_pending_order_items",
        "Error: item not available",
        args={"order_id": "#W3730488", "item_ids": ["2913673670"], "new_item_ids": ["9844888101"]},
    )
    again = step(
        "modify_pending_order_items",
        '{"order_id": "#W9810810"}',
        args={"order_id": "#W9810810", "item_ids": ["1355937109"], "new_item_ids": ["9949163720"]},
    )
    run = trajectory(0, [changed, items, again])
    assert working_steps(run) == run
    guess = _create("kofi@example.com", "Backend", "")
    unrecorded = [s.model_copy(update={"observation": None}) for s in (guess, found, first)]
    run = trajectory(0, unrecorded)
    assert working_steps(run) == run


def test_a_guessed_look_up_of_the_wrong_thing_is_left_out() -> None:
    """The agent looked an order up by an id nothing offered (the user misread it), nothing
    used its answer, then looked the right one up: the first call is a dead end."""
    steps = clean_steps(3)
    guessed = step(
        "get_order_details", '{"order_id": "#W7777", "items": ["it5555"]}', args={"order_id": "#W7777"}
    )
    run = trajectory(3, [*steps[:2], guessed, *steps[2:]])
    assert actions(run) == [s.action for s in steps]
    assert working_steps(run).steps[2].args == {"order_id": "#W3031"}


def test_look_ups_that_may_have_informed_a_choice_are_kept() -> None:
    """A candidate an earlier answer listed (one of the customer's orders), a look-up whose
    answer a later step uses, one not followed by the same look-up, or one without a recorded
    answer: none can be told from a look-up that informed a decision, so all stay."""
    steps = clean_steps(3)
    listed = steps[1].model_copy(update={"observation": '{"orders": ["#W8888", "#W3031"]}'})
    candidate = step(
        "get_order_details", '{"order_id": "#W8888", "items": ["it6666"]}', args={"order_id": "#W8888"}
    )
    scan = trajectory(3, [steps[0], listed, candidate, *steps[2:]])
    assert len(working_steps(scan).steps) == 5
    guessed = step("get_order_details", '{"order_id": "#W7777"}', args={"order_id": "#W7777"})
    last = trajectory(3, [*steps, guessed])  # no later call of the same look-up
    assert len(working_steps(last).steps) == 5
    unknown = trajectory(3, [*steps[:2], guessed.model_copy(update={"observation": None}), *steps[2:]])
    assert len(working_steps(unknown).steps) == 5


def test_a_noisy_cluster_induces_the_clean_twins_workflow() -> None:
    """All five kinds of noise, spread over the runs of one kind, leave the workflow as the
    clean runs give it: a failed call then retried, a repeated identical read, a dead-end
    look-up, a step by the user, turns of conversation."""
    clean = [trajectory(i, clean_steps(i)) for i in range(4)]
    noisy_steps = [clean_steps(i) for i in range(4)]
    s0 = noisy_steps[0]
    failed = s0[2].model_copy(
        update={"args": {"order_id": "#W0"}, "error": "Order not found", "observation": "Error"}
    )
    noisy_steps[0] = [s0[0], s0[1], failed, s0[2], s0[2], s0[3]]  # retried; then read twice
    s1 = noisy_steps[1]
    ask = step("respond", "20002", args={"content": "What is your zip code?"}, meta={"actor": "agent"})
    by_user = step("share_receipt", args={"order_id": "#W1011"}, meta={"actor": "user"})
    noisy_steps[1] = [ask, s1[0], s1[1], s1[2], by_user, s1[3]]
    s2 = noisy_steps[2]
    guessed = step(
        "get_order_details", '{"order_id": "#W7777", "items": ["it5555"]}', args={"order_id": "#W7777"}
    )
    noisy_steps[2] = [s2[0], s2[1], guessed, s2[2], s2[3]]
    noisy = [trajectory(i, steps) for i, steps in enumerate(noisy_steps)]

    def shown(w: Workflow) -> dict[str, Any]:
        return w.model_dump(
            include={"name", "description", "steps", "parameters", "pitfalls", "source_trajectory_ids"}
        )

    assert shown(induce(noisy)) == shown(induce(clean))
    assert [s.action for s in induce(noisy).steps] == [s.action for s in clean_steps(0)]
