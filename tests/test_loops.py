"""Loops: repeated work folded into one step that says it repeats (induction/abstract/loops.py), through
abstraction, the rule inducer, rendering, the stored pattern and the metrics."""

from __future__ import annotations

from typing import Any

from flowmem.induction.abstract.loops import (
    decoded,
    encoded,
    fold,
    folded,
    is_loop,
    iterations,
    repeated_bodies,
)
from flowmem.induction.base import ClusterInput
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.render.metrics import LeakChecker, Retrieval, memory_metrics
from flowmem.induction.render.render import render_workflow
from flowmem.models import Repeat, Trajectory, Workflow, WorkflowStep
from flowmem.retrieval.align import flat_pattern, pattern_pairs
from tests.factories import NAMES, run

Steps = list[tuple[str, dict[str, Any], str | None]]


def cancel_many(i: int, n: int) -> Trajectory:
    """A customer's n reservations cancelled: look the customer up, then read and cancel each."""
    name = NAMES[i % len(NAMES)]
    ids = [f"r{i}x{j}" for j in range(n)]
    steps: Steps = [("get_user_details", {"user_id": f"{name}_{i}"}, None)]
    for rid in ids:
        steps += [
            ("get_reservation", {"reservation_id": rid}, None),
            ("cancel_reservation", {"reservation_id": rid}, None),
        ]
    seen = {"get_user_details": f"reservations: {', '.join(ids)}"}
    return run(f"Cancel every reservation of {name}_{i}", steps, True, id=f"c{i}", observations=seen)


def cluster_of(runs: list[Trajectory]) -> ClusterInput:
    literals = LiteralIndex.build(runs, max_share=0.5)
    return ClusterInput("default", "agent", 1, "subtask", runs, [], literals)


def test_fold_makes_a_repeated_body_one_loop_unit_and_a_retry_one_step() -> None:
    t = cancel_many(0, 3)
    [head, loop] = fold(t).steps
    assert head.action == "get_user_details" and is_loop(loop)
    assert len(iterations(loop)) == 3
    retry = run("Find budget mail", [("mail.search", {"q": "budget"}, None)] * 3, True)
    assert [s.action for s in fold(retry).steps] == ["mail.search"]  # alike in every argument: a retry


def test_a_body_one_run_repeats_is_a_loop_where_another_run_takes_it_once() -> None:
    runs = [cancel_many(0, 1), cancel_many(1, 3)]
    assert repeated_bodies(runs) == {("get_reservation", "cancel_reservation")}
    once, thrice = folded(runs)
    assert [s.action for s in once.steps] == [s.action for s in thrice.steps]
    assert len(iterations(once.steps[1])) == 1


def test_the_rule_inducer_makes_one_loop_over_the_collection_with_one_placeholder_per_role() -> None:
    runs = [cancel_many(i, n) for i, n in enumerate([2, 3, 5, 1, 4, 2])]
    [w] = RuleInducer().induce(cluster_of(runs)).workflows
    assert [s.action for s in w.steps] == ["get_user_details", "get_reservation", "cancel_reservation"]
    loop = Repeat(over="reservation_id", source="result of get_user_details")
    assert [s.repeat for s in w.steps] == [None, loop, loop]
    assert w.steps[1].args == w.steps[2].args == {"reservation_id": "{reservation_id}"}
    assert sorted(w.placeholders) == ["reservation_id", "user_id"]
    text = render_workflow(w)
    assert "2. For each {reservation_id} from get_user_details:" in text
    assert "   2a. get_reservation(reservation_id={reservation_id})" in text
    assert "   2b. cancel_reservation(reservation_id={reservation_id})" in text
    assert w.pattern == ["get_user_details", ("get_reservation", "cancel_reservation")]


def test_the_store_keeps_a_loop_in_the_actions_and_reads_it_back() -> None:
    pattern: list[str | tuple[str, ...]] = ["a", ("b", "c"), "d"]
    assert decoded(encoded(pattern)) == pattern


def _looped() -> Workflow:
    loop = Repeat(over="rid", source="task")
    steps = [
        WorkflowStep(action="lookup", args={"user": "{user}"}),
        WorkflowStep(action="read", args={"id": "{rid}"}, repeat=loop),
        WorkflowStep(action="cancel", args={"id": "{rid}"}, repeat=loop),
    ]
    return Workflow(id="w", name="cancel_reservations", steps=steps)


def test_a_loop_counts_as_its_body_in_the_metrics() -> None:
    """A run that repeats the body four times is covered by the loop whole; the workflow's
    own steps count once each, so its precision stays within 1."""
    w = _looped()
    test = ["lookup", *["read", "cancel"] * 4]
    pairs = pattern_pairs(test, w.pattern)
    assert len(pairs) == len(test) and {j for _, j in pairs} == {0, 1, 2}
    assert flat_pattern(w.pattern) == ["lookup", "read", "cancel"]
    found = memory_metrics(
        [Retrieval(test, True, [("w", w.pattern, render_workflow(w))])], LeakChecker(set()), None, 1
    )
    assert found["coverage"] == 1.0 and found["step_precision"] == 1.0 and found["joint_precision"] == 1.0
    unrolled = ["lookup", "read", "cancel"]  # the same workflow without its loop covers 3 of 9
    found = memory_metrics([Retrieval(test, True, [("u", unrolled, "")])], LeakChecker(set()), None, 1)
    assert found["coverage"] == round(3 / 9, 4)


def test_a_variant_that_cannot_be_repaired_is_left_out_alone() -> None:
    """Two ways of solving one kind of task: one variant whose text would name an example's
    value is dropped; the cluster keeps the other."""
    import flowmem.induction.inducers.rule as rule

    good = [cancel_many(i, 2) for i in range(4)]
    other = [
        run(f"Cancel every reservation of {n}", [("cancel_all", {"user": n}, None)], True, id=f"o{n}")
        for n in ["olga_9", "kofi_9", "amir_9"]
    ]
    cluster = cluster_of([*good, *other])
    real = rule.abstract_runs  # type: ignore[attr-defined]
    calls: list[int] = []

    def leaky_second(*args: Any, **kwargs: Any) -> Any:
        done = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 2:
            return type(done)(
                done.steps, {**done.parameters, "x": "result of olga_9"}, done.values, done.choices
            )
        return done

    import pytest

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rule, "abstract_runs", leaky_second)
        kept = RuleInducer().induce(cluster).workflows
    assert len(calls) == 2 and len(kept) == 1
    assert any(s.repeat is not None for s in kept[0].steps)


def test_the_llm_inducers_repeated_steps_become_a_loop() -> None:
    """An LLM that writes a step once with `for_each` gives a workflow whose step repeats;
    one whose loop names a placeholder no argument uses is sent back."""
    from flowmem.induction.inducers.llm import LLMInducer
    from flowmem.induction.inducers.testing import FakeLLM
    from flowmem.induction.inducers.validate import (
        Arg,
        InducedSet,
        InducedStep,
        InducedWorkflow,
        Parameter,
        check,
    )

    runs = [cancel_many(i, n) for i, n in enumerate([2, 3, 4])]
    cluster = cluster_of(runs)
    loop_steps = [
        InducedStep(
            action=a,
            args=[Arg(key="reservation_id", value="{reservation_id}")],
            note="",
            for_each="reservation_id",
            items_from="get_user_details",
        )
        for a in ("get_reservation", "cancel_reservation")
    ]
    steps = [
        InducedStep(action="get_user_details", args=[Arg(key="user_id", value="{user_id}")], note=""),
        *loop_steps,
    ]
    params = [
        Parameter(name="user_id", description="the task's user"),
        Parameter(name="reservation_id", description="each reservation"),
    ]
    induced = InducedWorkflow(
        name="cancel_reservations",
        description="Cancel every reservation of a user.",
        steps=steps,
        parameters=params,
        pitfalls=[],
    )
    assert check(induced, cluster) == []
    [w] = LLMInducer(FakeLLM(InducedSet(workflows=[induced]))).induce(cluster).workflows
    loop = Repeat(over="reservation_id", source="result of get_user_details")
    assert [s.repeat for s in w.steps] == [None, loop, loop]
    wrong = induced.model_copy(
        update={"steps": [steps[0].model_copy(update={"for_each": "order_id"}), *loop_steps]}
    )
    assert [reason for reason, _ in check(wrong, cluster)] == ["undeclared"]


def test_a_search_refined_until_it_found_is_one_step_not_a_loop() -> None:
    """Look-ups repeated with another query, whose earlier answers nothing after them uses while
    the last one feeds what follows, are one search refined: kept once, the last try."""
    steps: Steps = [
        ("board.find_tasks", {"query": "quarterly report"}, None),
        ("board.find_tasks", {"query": "report Q3"}, None),
        ("board.complete_task", {"task_id": "t-4471"}, None),
    ]
    seen = {"board.find_tasks": "[]"}
    refined = run("Mark the Q3 report done", steps, True, observations=seen)
    refined = refined.model_copy(
        update={
            "steps": [
                refined.steps[0],
                refined.steps[1].model_copy(update={"observation": '[{"id": "t-4471"}]'}),
                refined.steps[2],
            ]
        }
    )
    assert [(s.action, s.args) for s in fold(refined).steps] == [
        ("board.find_tasks", {"query": "report Q3"}),
        ("board.complete_task", {"task_id": "t-4471"}),
    ]
    assert repeated_bodies([refined]) == set()
    # Reads whose every answer feeds what follows are a pass per item.
    per_item = cancel_many(3, 3)
    assert repeated_bodies([per_item]) == {("get_reservation", "cancel_reservation")}
