"""Whom a cluster's pitfalls are told from (`induction.pitfalls.contrast`): the successful runs of other
tasks its workflow is served to, and the failed runs of tasks nothing succeeded at."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest

from flowmem.induction.base import ClusterInput
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.pitfalls import contrast
from flowmem.induction.pitfalls.checked import checked_pitfalls
from flowmem.induction.pitfalls.conditions import any_holds
from flowmem.induction.pitfalls.contrast import Contrast, Members, contrast_sets, with_contrast
from flowmem.induction.plan.runplan import RunPlan
from flowmem.jobs.induce import with_contrast as with_plan_contrast
from flowmem.models import InductionRun, Trajectory
from flowmem.storage import Store


def _run(rid: str, task: str, actions: list[str], *, success: bool) -> Trajectory:
    steps = [{"action": a, "args": {}, "observation": "ok"} for a in actions]
    return Trajectory(id=rid, task=task, success=success, steps=steps)


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def _embed(vectors: dict[str, np.ndarray]) -> Callable[[Sequence[str]], np.ndarray]:
    """An embedder of the texts given: their vectors, one a row."""
    return lambda texts: np.asarray([vectors[t] for t in texts])


# Three kinds of task on a plane: "report" and "memo" are near each other, "invoice" is not.
VECTORS = {
    "send the report": _unit(1.0, 0.0, 0.0),
    "send the report today": _unit(0.98, 0.2, 0.0),
    "send the memo": _unit(0.9, 0.43, 0.0),
    "pay the invoice": _unit(0.0, 0.0, 1.0),
    "pay the invoice now": _unit(0.0, 0.2, 0.98),
}


def test_a_run_counts_for_each_other_cluster_of_its_k_best_and_failures_with_no_success_go_home() -> None:
    clusters = [
        Members("report", ["r1", "r2"], ["r3"]),
        Members("memo", ["m1"], []),
        Members("invoice", ["i1"], []),
        Members("nothing-succeeded", [], ["x1", "x2"]),
    ]
    task_of = {
        "r1": "send the report",
        "r2": "send the report",
        "r3": "send the report",
        "m1": "send the memo",
        "i1": "pay the invoice",
        "x1": "send the report today",
        "x2": "pay the invoice now",
    }
    found = contrast_sets(clusters, task_of, _embed(VECTORS), k=2)
    # k = 2: each task is served its own cluster's workflow and its nearest other one, never
    # one it shares nothing with (a cosine of 0: the invoice's).
    assert found["report"] == Contrast(successes=("m1",), failures=("x1",))
    assert found["memo"].successes == ("r1", "r2")
    assert found["invoice"].failures == ("x2",)  # the failed run joins its nearest task's cluster
    assert "nothing-succeeded" not in found  # it makes no workflow: nothing to tell apart
    only = contrast_sets(clusters, task_of, _embed(VECTORS), k=1)
    assert not any(c.successes for c in only.values())  # k = 1 serves each task its own only
    assert contrast_sets(clusters, task_of, _embed(VECTORS), k=2, limit=1)["report"] == Contrast((), ("x1",))


def test_the_contrast_scores_a_bounded_sample_a_bounded_chunk_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = {f"r{i}": "send the report" for i in range(40)} | {f"m{i}": "send the memo" for i in range(40)}
    clusters = [
        Members("report", [f"r{i}" for i in range(40)], []),
        Members("memo", [f"m{i}" for i in range(40)], []),
    ]
    embedded: list[str] = []

    def embed(texts: Sequence[str]) -> np.ndarray:
        embedded.extend(texts)
        return np.asarray([VECTORS[t] for t in texts])

    whole = contrast_sets(clusters, runs, embed, k=2)
    assert len(whole["report"].successes) == 40 and len(whole["memo"].successes) == 40
    monkeypatch.setattr(contrast, "CHUNK", 1)  # a task at a time: the same answer
    assert contrast_sets(clusters, runs, embed, k=2) == whole
    embedded.clear()
    part = contrast_sets(clusters, runs, embed, k=2, sample=10)
    served = [*part["report"].successes, *part["memo"].successes]
    assert len(served) == 10 and set(served) <= set(runs)  # 10 runs of the 80 were served
    assert sorted(embedded) == sorted(set(embedded))  # each text embedded once
    assert part == contrast_sets(list(reversed(clusters)), runs, embed, k=2, sample=10)  # whatever the order


def _report(rid: str, actions: list[str], *, success: bool, task: str = "send the report") -> Trajectory:
    return _run(rid, task, actions, success=success)


def test_the_workflow_served_to_tasks_nothing_succeeded_at_warns_of_how_they_failed() -> None:
    ok = [_report(f"ok{i}", ["find", "attach", "send"], success=True) for i in range(4)]
    # A kind of task no run succeeded at, nearest to the report's: it sends without attaching.
    failed = [_report(f"bad{i}", ["find", "send"], success=False, task=f"today {i}") for i in range(3)]
    vectors = {"send the report": VECTORS["send the report"]}
    vectors |= {t.task: VECTORS["send the report today"] for t in failed}
    report = ClusterInput("default", "agent", 0, "subtask", ok, [])
    lost = ClusterInput("default", "agent", 1, "subtask", [], failed)
    assert RuleInducer().induce(report).workflows[0].pitfalls == []  # its own runs never failed
    home, alone = with_contrast([report, lost], _embed(vectors))
    assert [t.id for t in home.homed] == ["bad0", "bad1", "bad2"] and alone.homed == []
    [workflow] = RuleInducer().induce(home).workflows
    conditions = [p.condition for p in workflow.pitfalls if p.condition]
    assert conditions and any_holds(conditions, _report("new", ["find", "send"], success=False))
    assert not any_holds(conditions, _report("good", ["find", "attach", "send"], success=True))


def test_no_warning_is_made_that_would_hold_on_the_successful_runs_a_workflow_is_served_to() -> None:
    ok = [_report(f"ok{i}", ["find", "attach", "send"], success=True) for i in range(6)]
    bad = [_report(f"bad{i}", ["find", "send"], success=False, task=f"send the report {i}") for i in range(3)]
    # The memo's runs succeed without attaching anything, and search serves them the report's workflow.
    memo = [_run(f"memo{i}", "send the memo", ["find", "send"], success=True) for i in range(4)]
    alone = checked_pitfalls(ok, bad, frozenset())
    assert any_holds([p.condition for p in alone if p.condition], memo[0])  # a false alarm on the memo
    served = checked_pitfalls(ok, bad, frozenset(), served_to=memo)
    assert not any(any_holds([p.condition for p in served if p.condition], m) for m in memo)
    # A run of another kind of task (an action the cluster never calls) is out of its scope.
    other = [_run(f"pay{i}", "pay the invoice", ["find", "pay"], success=True) for i in range(4)]
    assert checked_pitfalls(ok, bad, frozenset(), served_to=other) == alone


def test_a_run_that_placed_its_new_runs_contrasts_the_clusters_it_induces(store: Store) -> None:
    ok = [_report(f"ok{i}", ["find", "attach", "send"], success=True) for i in range(3)]
    failed = [
        _report(f"bad{i}", ["find", "send"], success=False, task="send the report today") for i in range(2)
    ]
    invoice = [_run(f"pay{i}", "pay the invoice", ["find", "pay"], success=True) for i in range(3)]
    clusters = (
        ClusterInput("default", "agent", 0, "subtask", ok, []),
        ClusterInput("default", "agent", 1, "subtask", [], failed),
        ClusterInput("default", "agent", 2, "subtask", invoice, []),
    )
    plan = RunPlan(
        run=InductionRun(id="r1", namespace="default"), total=8, new_trajectories=8, changed=clusters
    )
    report, lost, pay = with_plan_contrast(store, plan, cap=10).changed
    assert isinstance(report, ClusterInput) and isinstance(pay, ClusterInput)
    assert [t.id for t in report.homed] == ["bad0", "bad1"] and not pay.homed  # the nearest task's
    assert lost == clusters[1]
