"""Sub-routines: segments of one shape recurring across different tasks become workflows of
kind `subroutine`, served only when they add what the memories ranked above them lack."""

from __future__ import annotations

from typing import Any

from flowmem.induction.abstract.subroutines import compose_workflows, subroutine_inputs, subroutine_key
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.render.render import render_block
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory, Workflow, WorkflowStep
from flowmem.retrieval.serving import compose
from flowmem.settings import Settings

NAMES = ["Ada", "Bo", "Cy", "Di", "Ed", "Flo"]


def run(i: int, intents: list[str], *, success: bool = True) -> Trajectory:
    """A customer-service run: identify the customer, then one segment per intent."""
    name = NAMES[i % len(NAMES)]
    steps: list[dict[str, Any]] = [
        {"action": "find_user_id", "args": {"name": name}},
        {"action": "get_user_details", "args": {"user_id": f"u-{name.lower()}"}},
    ]
    for j, intent in enumerate(intents):  # one order per intent
        order = f"#W{1000 + 10 * i + j}"
        steps.append({"action": "get_order_details", "args": {"order_id": order}})
        steps.append({"action": f"{intent}_order", "args": {"order_id": order, "reason": f"r{i}"}})
    task = f"{name} wants to {' and '.join(intents)} two orders (case {i})"
    data = {"id": f"{'-'.join(intents)}-{i}", "task": task, "steps": steps, "success": success}
    return Trajectory.model_validate(data)


CORPUS = [run(i, ["cancel", "return"]) for i in range(3)] + [
    run(i, ["return", "exchange"]) for i in range(3, 6)
]


def test_segments_of_one_shape_from_several_tasks_become_one_input() -> None:
    inputs = subroutine_inputs(
        CORPUS, namespace="default", agent="agent", literals=LiteralIndex.build(CORPUS), min_tasks=3
    )
    goals = sorted(c.successes[0].actions[-1] for c in inputs)
    assert goals == ["cancel_order", "exchange_order", "get_user_details", "return_order"]
    returns = next(c for c in inputs if c.successes[0].actions[-1] == "return_order")
    assert returns.kind == "subroutine" and len({t.task for t in returns.successes}) == 6
    assert all("#" in t.id for t in returns.successes)  # run id # goal position
    assert returns.key == subroutine_key("agent", ("return_order", ("get_order_details", "return_order")))
    assert returns.key.startswith("agent-s-return_order-h")


def test_a_shape_of_one_action_is_no_sub_routine_once_or_in_a_loop() -> None:
    def lone(i: int, calls: int) -> Trajectory:
        steps = [{"action": "get_order_details", "args": {"order_id": f"#W{i}{j}"}} for j in range(calls)]
        steps += [{"action": "refund_order", "args": {"order_id": f"#W{i}{j}"}} for j in range(calls)]
        steps += [{"action": "notify", "args": {"text": f"done {i}"}}]
        return Trajectory.model_validate(
            {"id": f"lone-{i}", "task": f"refund case {i}", "steps": steps, "success": True}
        )

    runs = [lone(i, 1 + i % 3) for i in range(6)]
    inputs = subroutine_inputs(
        runs, namespace="default", agent="agent", literals=LiteralIndex.build(runs), min_tasks=3
    )
    shapes = sorted(tuple(dict.fromkeys(c.successes[0].actions)) for c in inputs)
    # The look-up and the refund (once per order) are a routine; `notify` alone, after the
    # last change, is one tool call in every run, and never a sub-routine.
    assert shapes == [("get_order_details", "refund_order")]


def test_a_shape_seen_in_one_task_cluster_only_is_left_to_its_workflow() -> None:
    literals = LiteralIndex.build(CORPUS)

    def goals(cluster_of: dict[str, int]) -> list[str]:
        inputs = subroutine_inputs(
            CORPUS, namespace="default", agent="agent", literals=literals, min_tasks=3, cluster_of=cluster_of
        )
        return sorted(c.successes[0].actions[-1] for c in inputs)

    assert goals(dict.fromkeys((t.task for t in CORPUS), 0)) == []
    by_intents = {t.task: int("exchange" in t.task) for t in CORPUS}
    assert goals(by_intents) == ["get_user_details", "return_order"]


def test_a_shape_that_is_mostly_a_whole_run_is_left_to_the_task_level_workflow() -> None:
    single = [run(i, ["cancel"]) for i in range(6)]
    single = [t.model_copy(update={"steps": t.steps[1:]}) for t in single]  # no identification
    inputs = subroutine_inputs(
        single, namespace="default", agent="agent", literals=LiteralIndex.build(single), min_tasks=3
    )
    assert inputs == []


def test_induction_stores_subroutines_with_stable_ids_when_asked(tmp_path: Any) -> None:
    settings = Settings(db=str(tmp_path / "db"), subroutines=True)
    store = store_from(settings)
    store_trajectories(store, CORPUS, settings.scrub)
    first = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    subs = [w for w in first.versions if w.kind == "subroutine"]
    # Cancelling and exchanging each occur in one kind of task only (one task cluster): that
    # cluster's workflow holds them. Identifying the customer and returning span both.
    # A sub-routine is named by what it does (its runs are segments of larger tasks); the task
    # workflows by what their tasks ask, so the two that return an order are named apart.
    assert {w.name for w in subs} == {"get_user_details", "return_order"}
    assert "return_order" not in {w.name for w in first.versions if w.kind == "task"}
    assert {w.kind for w in first.versions if "cancel_order" in w.actions} == {"task"}
    assert all(w.cluster_id is None and w.id.startswith("agent-s-") for w in subs)
    returns = next(w for w in subs if w.name == "return_order")
    assert returns.steps[1].args == {"order_id": "{order_id}", "reason": "{reason}"}
    assert [s.action for s in returns.steps] == ["get_order_details", "return_order"]
    stored = {w.id: w for w in store.list_workflows()}
    assert {stored[w.id].kind for w in subs} == {"subroutine"}
    # Composition: the task-level workflows name the sub-routines their steps are, stored so.
    for w in first.versions:
        if w.kind == "task":
            assert f"subroutine:{returns.id}" in stored[w.id].composed_actions
            assert "return_order" not in stored[w.id].composed_actions
    store_trajectories(store, [run(9, ["cancel", "return"])], settings.scrub)
    second = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert {w.id for w in second.versions if w.kind == "subroutine"} <= {w.id for w in subs}
    # Off, the same runs give task-level workflows only.
    plain = Settings(db=str(tmp_path / "plain"), subroutines=False)
    other = store_from(plain)
    store_trajectories(other, CORPUS, settings.scrub)
    assert {w.kind for w in run_induction(other, plain, RuleInducer(), namespace="default").versions} == {
        "task"
    }


def workflow(wid: str, actions: list[str], kind: str = "task") -> Workflow:
    steps = [WorkflowStep(action=a) for a in actions]
    return Workflow.model_validate({"id": wid, "name": wid, "steps": steps, "kind": kind})


def test_compose_serves_a_subroutine_only_for_what_the_others_lack() -> None:
    ranked = [
        workflow("whole", ["find_user_id", "get_order_details", "cancel_order"]),
        workflow("same", ["get_order_details", "cancel_order"], "subroutine"),  # adds nothing
        workflow("other-task", ["find_user_id", "get_order_details"]),  # task-level: kept by rank
        workflow("return", ["get_order_details", "return_order"], "subroutine"),
    ]
    assert compose(ranked, 3) == [0, 2, 3]
    assert compose(ranked, 2) == [0, 2]
    assert compose(ranked[1:2], 3) == [0]  # nothing above it: it adds its actions
    assert compose([], 3) == []


def test_a_task_level_workflow_is_composed_of_the_subroutines_its_steps_are() -> None:
    task = workflow(
        "agent-c0",
        ["find_user_id", "get_order_details", "return_order", "get_order_details", "cancel_order", "done"],
    )
    subs = [
        workflow("s-return", ["get_order_details", "return_order"], "subroutine"),
        workflow("s-cancel", ["get_order_details", "cancel_order"], "subroutine"),
        workflow("s-find", ["find_user_id"], "subroutine"),  # one step: nothing to refer to
    ]
    composed = compose_workflows([task, *subs])
    assert composed[1:] == subs  # sub-routines unchanged
    marked = composed[0]
    assert [s.subroutine for s in marked.steps] == [
        None,
        "s-return",
        "s-return",
        "s-cancel",
        "s-cancel",
        None,
    ]
    assert marked.composed_actions == ["find_user_id", "subroutine:s-return", "subroutine:s-cancel", "done"]
    assert marked.actions == task.actions and marked.content_hash() != task.content_hash()
    assert compose_workflows(composed) == composed  # the same marks again
    assert compose_workflows([marked, subs[0]])[0].composed_actions == [
        "find_user_id",
        "subroutine:s-return",
        "get_order_details",
        "cancel_order",
        "done",
    ]  # a sub-routine no longer there leaves no mark
    assert compose_workflows([marked])[0] == task.model_copy(update={"steps": task.steps})
    # Two occurrences in a row stay two: the second is left as steps.
    twice = compose_workflows(
        [workflow("agent-c1", ["a", "b", "a", "b"]), workflow("s-ab", ["a", "b"], "subroutine")]
    )
    assert twice[0].composed_actions == ["subroutine:s-ab", "a", "b"]


def test_a_prompt_showing_a_subroutine_refers_to_it_instead_of_repeating_its_steps() -> None:
    task, sub = compose_workflows(
        [
            workflow("agent-c0", ["find_user_id", "get_order_details", "return_order"]),
            workflow("s-return", ["get_order_details", "return_order"], "subroutine"),
        ]
    )
    alone = render_block([task])
    assert "2. get_order_details()\n3. return_order()" in alone
    together = render_block([sub, task])
    own = together.split("Workflow agent-c0", 1)[1]
    assert "2. Follow workflow s-return (shown here)" in own and "return_order" not in own
    assert "1. get_order_details()\n2. return_order()" in together  # the sub-routine itself


def test_an_incremental_run_keeps_the_subroutines_and_composes_what_it_induces(tmp_path: Any) -> None:
    settings = Settings(db=str(tmp_path / "db"), subroutines=True)
    store = store_from(settings)
    store_trajectories(store, [run(i, ["cancel", "return"]) for i in range(12)], settings.scrub)
    store_trajectories(store, [run(i, ["return", "exchange"]) for i in range(12, 24)], settings.scrub)
    first = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    subs = {w.id for w in first.versions if w.kind == "subroutine"}
    returns = next(
        w.id for w in first.versions if w.kind == "subroutine" and w.name.startswith("return_order")
    )
    assert first.plan.refit == "the first run" and returns in subs
    assert first.run.state.subroutines == tuple(sorted(subs))
    store_trajectories(store, [run(30, ["cancel", "return"])], settings.scrub)
    second = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    assert second.plan.refit is None  # placed in the stored clusters, not refit
    # Its cluster was induced again, composed with the kept sub-routines, and came out the
    # same as stored, marks included: no new version (without the marks it would differ).
    assert second.summary().clusters_changed == 1 and not second.versions
    assert not second.retired and second.run.state.subroutines == tuple(sorted(subs))
    served = {w.id: w for w in store.list_workflows()}
    assert subs <= served.keys() and all(served[s].status != "retired" for s in subs)
    tasks = [w for w in served.values() if w.kind == "task" and "return_order" in w.actions]
    assert tasks and all(f"subroutine:{returns}" in w.composed_actions for w in tasks)
    # Turning sub-routines off changes the clustering settings: the next run refits.
    plain = settings.model_copy(update={"subroutines": False})
    store_trajectories(store, [run(31, ["return", "exchange"])], settings.scrub)
    assert (
        run_induction(store, plain, RuleInducer(), namespace=plain.namespace).plan.refit
        == "the clustering settings changed"
    )


def test_the_dashboard_shows_which_steps_are_a_subroutine(tmp_path: Any) -> None:
    from fastapi.testclient import TestClient

    from flowmem.server.api import create_app

    settings = Settings(db=str(tmp_path / "db"))
    store = store_from(settings)
    store_trajectories(store, CORPUS, settings.scrub)
    report = run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    returns = next(w for w in report.versions if w.kind == "subroutine" and w.name.startswith("return_order"))
    task = next(
        w for w in report.versions if w.kind == "task" and f"subroutine:{returns.id}" in w.composed_actions
    )
    page = TestClient(create_app(settings)).get(f"/workflows/{task.id}").text
    link = f'sub-routine <a href="/workflows/{returns.id}">{returns.id}</a>:'
    assert page.count(link) == task.composed_actions.count(f"subroutine:{returns.id}")
