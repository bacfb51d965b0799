"""Pitfalls that can be checked: conditions over a run's steps, how they are evaluated step by
step, induced from a cluster's failed and successful runs, stored, scored by `flowmem eval`, and
turned into warnings while an agent works."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from flowmem.agents import WorkflowMemory
from flowmem.agents.recording import Run, RunWarning
from flowmem.induction.base import ClusterInput
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.pitfalls.checked import checked_findings, checked_pitfalls
from flowmem.induction.pitfalls.conditions import Watch, condition_of, holds, key_of, met
from flowmem.induction.render.metrics import contrast_conditions, warning_metrics
from flowmem.induction.render.render import render_workflow
from flowmem.jobs.evaluate import evaluate
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import PROCEDURE, Condition, InductionRun, Pitfall, Trajectory, Workflow, WorkflowStep
from flowmem.settings import Settings
from flowmem.storage import Store
from flowmem.storage.rows import workflow_from_row, workflow_to_row
from tests.factories import NAMES, SUBJECTS, forward, make_workflow


def trajectory(
    steps: list[tuple[str, dict[str, Any], str | None, str | None]],
    *,
    success: bool = True,
    task: str = "do the thing",
    id: str = "r",
    source: str | None = None,
) -> Trajectory:
    """A run of (action, args, observation, error) steps."""
    return Trajectory(
        id=id,
        task=task,
        success=success,
        source=source,
        steps=[{"action": a, "args": args, "observation": obs, "error": err} for a, args, obs, err in steps],
    )


RUN = trajectory(
    [
        ("mail.search", {"query": "budget"}, '[{"id": "e7"}]', None),
        ("contacts.lookup", {"name": "olga"}, None, "not found"),
        ("contacts.lookup", {"name": "Olga"}, "olga@corp.test", None),
        ("mail.forward", {"email_id": "e9", "to": "olga@corp.test"}, "sent", None),
    ],
    task="Forward the budget email to olga",
)


def when(c: Condition, run: Trajectory = RUN) -> list[int]:
    """The steps (1-based; len + 1: the run's end) at which a condition holds, read as the hook reads them."""
    watch = Watch([c], run.task)
    at = [n for n, s in enumerate(run.steps, 1) if watch.step(s.action, s.args, s.observation, s.error)]
    return at + ([len(run.steps) + 1] if watch.end() else [])


# -- the language ---------------------------------------------------------------------------


def test_each_kind_of_condition_holds_at_the_step_that_makes_it_true_and_once() -> None:
    assert when(Condition(kind="does", action="contacts.lookup")) == [2]
    assert when(Condition(kind="does", action="contacts.lookup", times=2)) == [3]
    assert when(Condition(kind="does", action="calendar.cancel")) == []
    # skips X ahead of Y: at Y's first call; without Y: at the run's end
    assert when(Condition(kind="skips", action="contacts.lookup", other="mail.search")) == [1]
    assert when(Condition(kind="skips", action="contacts.lookup", other="mail.forward")) == []
    assert when(Condition(kind="skips", action="mail.archive")) == [5]
    assert when(Condition(kind="skips", action="mail.search")) == []
    assert when(Condition(kind="before", action="mail.search", other="contacts.lookup")) == [2]
    assert when(Condition(kind="before", action="mail.forward", other="contacts.lookup")) == []
    assert when(Condition(kind="fails", action="contacts.lookup")) == [2]
    assert when(Condition(kind="after_failed", action="contacts.lookup", other="contacts.lookup")) == [3]
    assert when(Condition(kind="after_failed", action="mail.forward", other="contacts.lookup")) == []
    assert when(Condition(kind="missing_arg", action="mail.forward", arg="subject")) == [4]
    assert when(Condition(kind="missing_arg", action="mail.forward", arg="to")) == []
    # e9 is in no earlier result nor the task (the search showed e7): a made-up id
    assert when(Condition(kind="unseen_arg", action="mail.forward", arg="email_id")) == [4]
    assert when(Condition(kind="unseen_arg", action="mail.forward", arg="to")) == []
    assert when(Condition(kind="unseen_arg", action="mail.forward", arg="to", other="mail.search")) == [4]
    assert when(Condition(kind="unseen_arg", action="mail.forward", arg="to", other="contacts.lookup")) == []


def test_a_condition_holds_only_within_the_actions_of_its_kind_of_task() -> None:
    scoped = Condition(kind="does", action="mail.forward", within=("mail.search", "mail.forward"))
    assert when(scoped) == []  # the run looked a contact up: another kind of task
    wider = ("mail.search", "contacts.lookup", "mail.forward")
    assert when(scoped.model_copy(update={"within": wider})) == [4]


def test_the_text_is_made_from_the_condition_and_names_no_value() -> None:
    assert Condition(kind="skips", action="tests.run", other="deploy").says() == (
        "called deploy without calling tests.run"
    )
    assert Condition(kind="skips", action="tests.run").says() == "ended without calling tests.run"
    assert Condition(kind="does", action="x", times=2).says() == "called x again"
    assert Condition(kind="after_failed", action="x", other="x").says() == "retried x once it had failed"
    assert Condition(kind="unseen_arg", action="mail.forward", arg="to", other="contacts.lookup").says() == (
        "called mail.forward with argument to not seen in contacts.lookup's results"
    )


def test_a_condition_missing_its_parts_is_refused() -> None:
    for bad in (
        {"kind": "before", "action": "x"},
        {"kind": "missing_arg", "action": "x"},
        {"kind": "skips", "action": "x", "other": "x"},
        {"kind": "skips", "action": "x", "times": 2},
        {"kind": "does", "action": "x", "arg": "a"},
    ):
        with pytest.raises(ValidationError):
            Condition.model_validate(bad)


def test_met_lists_exactly_the_conditions_the_watch_finds() -> None:
    actions = sorted({*RUN.actions, "mail.archive"})
    args = {"mail.forward": ["email_id", "to", "subject"], "contacts.lookup": ["name"]}
    found = met(RUN, actions, args)
    for key in found:
        assert holds(condition_of(key), RUN), key
    tried = [
        Condition(kind="does", action="mail.archive"),
        Condition(kind="does", action="mail.search", times=2),
        Condition(kind="skips", action="mail.search"),
        Condition(kind="skips", action="mail.search", other="contacts.lookup"),
        Condition(kind="before", action="mail.forward", other="mail.search"),
        Condition(kind="fails", action="mail.forward"),
        Condition(kind="after_failed", action="mail.search", other="contacts.lookup"),
        Condition(kind="missing_arg", action="contacts.lookup", arg="name"),
        Condition(kind="unseen_arg", action="contacts.lookup", arg="name"),  # the task says olga
    ]
    for c in tried:
        assert not holds(c, RUN) and key_of(c) not in found, c


# -- induction ------------------------------------------------------------------------------


def lookup_runs(n: int, *, skip: bool, success: bool, start: int = 0) -> list[Trajectory]:
    return [forward(i, skip_lookup=skip, success=success) for i in range(start, start + n)]


def test_an_action_failed_runs_leave_out_becomes_a_condition_that_holds_before_the_end() -> None:
    ok, failed = lookup_runs(8, skip=False, success=True), lookup_runs(3, skip=True, success=False, start=8)
    [c] = checked_findings(ok, failed, set())
    assert condition_of(c.key).says() == "called mail.forward without calling contacts.lookup"
    assert (len(c.failed), len(c.ok)) == (3, 0)


def test_failures_that_differ_in_arguments_not_actions_get_an_argument_condition() -> None:
    def send(i: int, *, made_up: bool) -> Trajectory:
        name = NAMES[i % len(NAMES)]
        to = f"{name}.x{i}@mail.test" if made_up else f"{name}@corp.test"
        return trajectory(
            [
                ("contacts.lookup", {"name": name}, f"{name}@corp.test", None),
                ("mail.send", {"to": to, "body": SUBJECTS[i % len(SUBJECTS)]}, "sent", None),
            ],
            success=not made_up,
            task=f"Send {name} the {SUBJECTS[i % len(SUBJECTS)]}",
            id=f"send-{i}-{made_up}",
        )

    ok = [send(i, made_up=False) for i in range(10)]
    failed = [send(i, made_up=True) for i in range(10, 14)]
    found = checked_pitfalls(ok, failed, set())
    assert [p.text for p in found] == ["called mail.send with argument to not seen earlier (4/4 failures)"]
    assert found[0].condition is not None and found[0].condition.within == ("contacts.lookup", "mail.send")


def test_a_call_that_failed_alike_says_what_the_tool_said_with_its_values_masked() -> None:
    """Failed runs exchanged an order that was still pending: the pitfall says why the tool
    refused, its order ids masked; messages that differ say nothing beyond the failure."""

    def order(
        i: int, *, pending: bool, why: str = "Non-delivered order #W{i} cannot be exchanged"
    ) -> Trajectory:
        exchange = (
            "exchange_items",
            {"order_id": f"#W{i}"},
            None,
            ("Error: " + why.format(i=i)) if pending else None,
        )
        return trajectory(
            [("get_order", {"order_id": f"#W{i}"}, '{"status": "x"}', None), exchange],
            success=not pending,
            task=f"Swap the lamp of order #W{i}",
            id=f"o{i}-{pending}",
        )

    ok = [order(i, pending=False) for i in range(8)]
    failed = [order(i, pending=True) for i in range(8, 11)]
    [p] = checked_pitfalls(ok, failed, {f"#w{i}" for i in range(11)})
    assert p.text == "exchange_items failed: Non-delivered order … cannot be exchanged (3/3 failures)", p.text
    mixed = [
        order(8, pending=True),
        order(9, pending=True, why="timeout"),
        order(10, pending=True, why="busy"),
    ]
    assert [p.text for p in checked_pitfalls(ok, mixed, set())] == ["exchange_items failed (3/3 failures)"]


def test_one_failed_run_or_runs_of_one_task_are_no_pattern_but_a_written_down_failure_is() -> None:
    ok = lookup_runs(8, skip=False, success=True)
    assert checked_findings(ok, lookup_runs(1, skip=True, success=False, start=8), set()) == []
    again = forward(8, skip_lookup=True, success=False)
    one_task = [again.model_copy(update={"id": f"x{i}"}) for i in range(3)]
    assert checked_findings(ok, one_task, set()) == []
    told = forward(8, skip_lookup=True, success=False).model_copy(update={"source": PROCEDURE})
    assert len(checked_findings(ok, [told], set())) == 1


def test_conditions_together_stay_within_the_false_alarm_budget() -> None:
    ok = lookup_runs(19, skip=False, success=True)
    # one successful run also skips the look-up: 1 of 20 successes is within 5%
    ok.append(forward(19, skip_lookup=True, success=True).model_copy(update={"id": "lucky"}))
    failed = lookup_runs(4, skip=True, success=False, start=20)
    found = checked_findings(ok, failed, set())
    alarms = set().union(*(c.ok for c in found))
    assert found and len(alarms) <= 0.05 * len(ok)
    # with a budget of none, no condition that a successful run meets is kept
    assert all(not c.ok for c in checked_findings(ok, failed, set(), false_alarms=0.0))


def test_a_condition_the_workflows_own_runs_meet_is_none_of_its_pitfalls() -> None:
    """One successful run forwards without the look-up (within the false-alarm budget): the
    variant made of it would meet its own warning, the variant of the others keeps it."""
    ok = lookup_runs(19, skip=False, success=True)
    lucky = forward(19, skip_lookup=True, success=True).model_copy(update={"id": "lucky"})
    failed = lookup_runs(4, skip=True, success=False, start=20)
    said = "called mail.forward without calling contacts.lookup (4/4 failures)"
    assert [p.text for p in checked_pitfalls([*ok, lucky], failed, set(), own={t.id for t in ok})] == [said]
    assert checked_pitfalls([*ok, lucky], failed, set(), own={"lucky"}) == []
    index = LiteralIndex.build([*ok, lucky, *failed])
    cluster = ClusterInput("default", "agent", 1, "subtask", [*ok, lucky], failed, index)
    variants = {("contacts.lookup" in w.actions): w for w in RuleInducer().induce(cluster).workflows}
    assert [p.text for p in variants[True].pitfalls] == [said]
    assert variants[False].source_trajectory_ids == ["lucky"] and variants[False].pitfalls == []


def test_no_condition_names_an_example_value() -> None:
    ok, failed = lookup_runs(8, skip=False, success=True), lookup_runs(3, skip=True, success=False, start=8)
    # actions named like example values: every condition names one, so none is kept
    assert checked_findings(ok, failed, {"mail.forward", "contacts.lookup"}) == []


def test_the_rule_inducer_stores_checked_pitfalls_that_render_as_before() -> None:
    ok, failed = lookup_runs(6, skip=False, success=True), lookup_runs(4, skip=True, success=False, start=6)
    index = LiteralIndex.build([*ok, *failed])
    [w] = RuleInducer().induce(ClusterInput("default", "agent", 1, "subtask", ok, failed, index)).workflows
    [p] = w.pitfalls
    assert p.condition is not None and f"Pitfall: {p.text}" in render_workflow(w)


# -- storage: plain strings still load -----------------------------------------------------


def test_a_plain_string_is_a_pitfall_without_a_condition_stored_and_hashed_as_before() -> None:
    w = Workflow(id="a", name="n", steps=[WorkflowStep(action="x")], pitfalls=["skipped x (2/3 failures)"])
    assert w.pitfalls == [Pitfall(text="skipped x (2/3 failures)")]
    assert w.model_dump(mode="json")["pitfalls"] == ["skipped x (2/3 failures)"]
    assert w.content_hash() == "1edab2cc9e47a97d"  # what flowmem computed before pitfalls had a type
    assert str(w.pitfalls[0]) == "skipped x (2/3 failures)"


def test_old_rows_with_string_pitfalls_load_and_checked_ones_round_trip(store: Store) -> None:
    c = Condition(kind="skips", action="contacts.lookup", other="mail.forward")
    w = make_workflow(pitfalls=["look the address up first", Pitfall(text=c.says(), condition=c)])
    row = workflow_to_row(w, np.zeros((1, store.embedder.dim), dtype=np.float32))
    assert json.loads(row["pitfalls"])[0] == "look the address up first"  # as rows were written before
    assert workflow_from_row(row) == w
    old = {**row, "pitfalls": json.dumps(["look the address up first"])}  # a row from before conditions
    assert workflow_from_row(old).pitfalls == [Pitfall(text="look the address up first")]
    store.commit_run(InductionRun(id="r1"), [w])
    [back] = store.list_workflows()
    assert back.pitfalls == w.pitfalls


# -- eval figures --------------------------------------------------------------------------


def test_warning_metrics_are_shares_of_failed_and_of_successful_runs() -> None:
    got = warning_metrics([False, False, True, True, True, None], [True, False, True, False, False, True])
    assert got == {"warned": 0.5, "false_alarms": 0.3333, "failed_test_runs": 2, "successful_test_runs": 3}
    assert warning_metrics([True], [False])["warned"] is None


def test_the_contrast_baseline_warns_of_actions_only_failed_neighbours_take_and_skips() -> None:
    conditions = contrast_conditions([["a", "x"], ["a"]], [["a", "b"], ["a", "b", "c"]])
    assert [(c.kind, c.action) for c in conditions] == [("does", "x"), ("skips", "a"), ("skips", "b")]
    assert contrast_conditions([], [["a"]]) == []


def test_eval_reports_warned_and_false_alarms_next_to_the_contrast_baseline() -> None:
    train = lookup_runs(30, skip=False, success=True) + lookup_runs(10, skip=True, success=False, start=30)
    test = lookup_runs(6, skip=False, success=True, start=40)
    test += lookup_runs(4, skip=True, success=False, start=46)
    report = evaluate(train, test, RuleInducer(), settings=Settings(db="unused"), k=3)
    flow, raw = report.flowmem, report.raw
    assert flow.pitfalls >= 1
    assert (flow.warned, flow.false_alarms) == (1.0, 0.0)  # every failure skips the look-up
    assert (flow.failed_test_runs, flow.successful_test_runs) == (4, 6)
    # the baseline: "skips contacts.lookup" (every successful neighbour takes it)
    assert (flow.contrast_warned, flow.contrast_false_alarms) == (1.0, 0.0)
    assert (raw.warned, raw.false_alarms) == (flow.contrast_warned, flow.contrast_false_alarms)


# -- the induce summary --------------------------------------------------------------------


def test_the_induce_summary_counts_the_workflows_pitfalls_apart_from_notes(
    settings: Settings, store: Store
) -> None:
    runs = lookup_runs(6, skip=False, success=True) + lookup_runs(4, skip=True, success=False, start=6)
    store_trajectories(store, runs, settings.scrub)
    summary = run_induction(store, settings, RuleInducer(), namespace=settings.namespace).summary()
    assert (summary.pitfalls, summary.checkable_pitfalls, summary.pitfall_notes) == (1, 1, 0)


# -- warnings while the agent works --------------------------------------------------------


def test_a_run_that_repeats_a_known_failing_divergence_is_warned_by_run_step(settings: Settings) -> None:
    with WorkflowMemory.open(settings) as memory:
        for i in range(10):
            subject = SUBJECTS[i % len(SUBJECTS)]
            with memory.record(f"Forward the latest email about '{subject}' to {NAMES[i]}") as run:
                run.step("mail.search", args={"query": subject}, observation=f"[e{i}]")
                if i < 6:
                    run.step("contacts.lookup", args={"name": NAMES[i]}, observation=f"{NAMES[i]}@corp.test")
                run.step("mail.forward", args={"email_id": f"e{i}", "to": NAMES[i]}, observation="sent")
                run.finish(success=i < 6)
        memory.flush()
        run_induction(memory.store, settings, RuleInducer(), namespace=settings.namespace)
        heard: list[RunWarning] = []
        with memory.record("Forward the latest email about 'travel' to ana", on_warning=heard.append) as run:
            memory.context(run.task)
            assert run.step("mail.search", args={"query": "travel"}, observation="[e42]") == []
            warnings = run.step("mail.forward", args={"email_id": "e42", "to": "ana"}, observation="sent")
            run.finish(success=False)
        assert [w.pitfall.text for w in warnings] == [
            "called mail.forward without calling contacts.lookup (4/4 failures)"
        ]
        assert heard == warnings and warnings[0].step == 2 and str(warnings[0]).startswith("Pitfall of ")
        # A run that follows the workflow is not warned.
        with memory.record("Forward the latest email about 'travel' to li") as run:
            memory.context(run.task)
            quiet = [
                run.step("mail.search", args={"query": "travel"}, observation="[e43]"),
                run.step("contacts.lookup", args={"name": "li"}, observation="li@corp.test"),
                run.step("mail.forward", args={"email_id": "e43", "to": "li@corp.test"}, observation="sent"),
                run.finish(success=True),
            ]
        assert quiet == [[], [], [], []]


def test_pitfalls_served_late_are_checked_on_the_steps_already_taken(settings: Settings) -> None:
    c = Condition(kind="skips", action="tests.run", other="deploy")
    w = make_workflow(pitfalls=["a text-only pitfall", Pitfall(text=c.says(), condition=c)])
    with WorkflowMemory.open(settings) as memory:
        with memory.record("deploy v2 to staging") as run:
            assert run.step("deploy", args={"version": "v2"}) == []  # nothing served yet
            [late] = run.watch(w)
            assert late.pitfall.condition == c and late.step == 1
            assert run.watch(w) == []  # served again: nothing new
            assert run.step("deploy", args={"version": "v2"}) == []
            run.finish(success=False)


def test_pitfalls_served_between_a_steps_append_and_its_check_see_that_step_once() -> None:
    """`Run.step` appends without a lock: a `watch` that comes right after the append (another
    thread's `memory.context`) replays the step, and the step's own check does not feed it
    again (here a second feed would make one `rm` count as two)."""
    c = Condition(kind="does", action="rm", times=2)
    w = make_workflow(pitfalls=[Pitfall(text=c.says(), condition=c)])
    run = Run(lambda _: None, id="served", task="clean up", agent="a", namespace="default")
    late: list[RunWarning] = []

    class ServeOnAppend(list[Any]):
        def append(self, item: Any) -> None:
            super().append(item)
            late.extend(run.watch(w))

    run._steps = ServeOnAppend()
    assert run.step("rm", args={"path": "/tmp/a"}) == [] and late == []
    run._steps = list(run._steps)
    assert [x.step for x in run.step("rm", args={"path": "/tmp/b"})] == [2]


def test_a_failing_callback_never_breaks_the_run(settings: Settings) -> None:
    def boom(_: RunWarning) -> None:
        raise RuntimeError("callback bug")

    c = Condition(kind="does", action="rm")
    with WorkflowMemory.open(settings) as memory:
        with memory.record("clean up", on_warning=boom) as run:
            run.watch(make_workflow(pitfalls=[Pitfall(text=c.says(), condition=c)]))
            assert [w.pitfall.condition for w in run.step("rm", args={"path": "/"})] == [c]
            run.finish(success=False)
