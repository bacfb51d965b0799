"""Pitfalls are true: every failed run a pitfall cites shows the divergence it states, and the
workflow itself does not. Checked by counting calls in the runs' actions, not by aligning them
again as induction does."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence

import pytest

from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.pitfalls.checked import FALSE_ALARMS
from flowmem.induction.pitfalls.conditions import holds
from flowmem.induction.pitfalls.failures import Finding, findings
from flowmem.models import Trajectory
from tests.factories import PITFALL_NAMES as NAMES
from tests.factories import PITFALL_WORKFLOW as WORKFLOW
from tests.factories import WORKBENCH
from tests.factories import pitfall_failed as failed
from tests.factories import pitfall_ok as ok
from tests.inmemory import plan_clusters


def nth(actions: Sequence[str], action: str, n: int) -> int | None:
    """Where the `n`-th call of `action` is in `actions`, if there is one."""
    seen = 0
    for i, a in enumerate(actions):
        seen += a == action
        if seen == n:
            return i
    return None


def shows(
    finding: Finding, actions: Sequence[str], errors: Mapping[str, list[str]], workflow: Sequence[str]
) -> bool:
    """Whether a run with these actions (and these errors per action) did what the finding says
    failed runs did differently from `workflow`."""
    t = finding.times
    if finding.kind == "skipped":  # it reached its t-th Y with fewer calls of X than the workflow
        due, went_to = finding.actions
        q, qw = nth(actions, went_to, t), nth(workflow, went_to, t)
        return q is not None and qw is not None and actions[:q].count(due) < workflow[:qw].count(due)
    if finding.kind in ("replaced", "inserted"):
        # Its t-th E came where the workflow has its next X (replaced: and X does not come
        # next, unless the workflow calls X once more) or ahead of its next Y (inserted: and Y
        # comes later), and the workflow calls E fewer than t times up to there.
        called, other = finding.actions
        q = nth(actions, called, t)
        if q is None:
            return False
        k = actions[:q].count(other)
        qw = nth(workflow, other, k + 1)
        if finding.kind == "replaced":
            went_on = actions[q + 1 : q + 2] != [other] or workflow.count(other) > k + 1
        else:
            went_on = nth(actions, other, k + 1) is not None
        return went_on and qw is not None and workflow[:qw].count(called) < t
    if finding.kind == "appended":  # its t-th E came once it had made every call of Z
        called, final = finding.actions
        q = nth(actions, called, t)
        return (
            q is not None and workflow.count(called) < t and actions[:q].count(final) >= workflow.count(final)
        )
    if finding.kind == "stopped":  # it called X fewer times than the workflow does
        return actions.count(finding.actions[0]) < t <= workflow.count(finding.actions[0])
    assert finding.kind == "error"
    said = finding.statement.partition(": ")[2] if ": " in finding.statement else ""
    kept = [part.strip() for part in said.split("…") if part.strip()]  # the unmasked parts
    return any(all(part in error for part in kept) for error in errors.get(finding.actions[0], []))


def errors_of(run: Trajectory) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for step in run.steps:
        if step.error:
            found.setdefault(step.action, []).append(step.error)
    return found


def assert_true(finding: Finding, runs: Mapping[str, Trajectory], workflow: Sequence[str]) -> None:
    assert finding.runs, finding
    for rid in finding.runs:
        run = runs[rid]
        assert run.success is False, (finding.statement, rid)
        assert shows(finding, run.actions, errors_of(run), workflow), (finding.statement, rid, run.actions)
    assert not shows(finding, workflow, {}, workflow), f"the workflow itself does it: {finding.statement}"


@pytest.mark.parametrize(
    ("failures", "statement"),
    [
        (failed(3, "mail.search", "mail.forward"), "skipped contacts.lookup, then called mail.forward"),
        (
            failed(3, "mail.search", "mail.forward", "contacts.lookup", "mail.forward"),
            "skipped contacts.lookup, then called mail.forward",
        ),
        (
            failed(3, "mail.search", "mail.delete", "mail.forward"),
            "called mail.delete in place of contacts.lookup",
        ),
        (
            failed(3, "mail.search", "mail.search", "contacts.lookup", "mail.forward"),
            "called mail.search again ahead of contacts.lookup",
        ),
        (failed(3, *WORKFLOW, "mail.archive"), "called mail.archive at the end"),
        (failed(3, *WORKFLOW, "mail.forward", "mail.forward"), "called mail.forward again at the end"),
        (failed(3, "mail.search", "contacts.lookup"), "stopped without calling mail.forward"),
        (
            failed(3, *WORKFLOW, errors={"mail.forward": "'{name}' is not an email address"}),
            "mail.forward failed: '…' is not an email address",
        ),
    ],
)
def test_each_kind_of_finding_is_shown_by_the_runs_it_cites_and_not_by_the_workflow(
    failures: list[Trajectory], statement: str
) -> None:
    [finding] = findings(WORKFLOW, ok(6), failures, set(NAMES))
    assert finding.statement == statement
    assert finding.runs == tuple(t.id for t in failures)
    assert_true(finding, {t.id: t for t in failures}, WORKFLOW)


def workbench_training_runs() -> list[Trajectory]:
    with gzip.open(WORKBENCH, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    return [Trajectory.model_validate(r) for r in rows if r["meta"]["instance"] <= 6]


@pytest.mark.skipif(not WORKBENCH.exists(), reason="shared WorkBench data not present")
def test_every_pitfall_induced_on_workbench_holds_on_the_failed_runs_it_counts() -> None:
    """The rule inducer's pitfalls are checked conditions: each holds, read step by step as the
    hook reads it, on as many of its cluster's failed runs as its evidence says, and the
    workflow's pitfalls together on at most `FALSE_ALARMS` of the cluster's successful runs."""
    inducer = RuleInducer()
    plan = plan_clusters(workbench_training_runs())
    checked = 0
    seen: set[str] = set()
    for cluster in plan.clusters:
        for w in inducer.induce(cluster).workflows:
            conditions = [p.condition for p in w.pitfalls if p.condition is not None]
            assert len(conditions) == len(w.pitfalls)  # every induced pitfall can be checked
            for p in w.pitfalls:
                assert p.condition is not None and p.text.startswith(p.condition.says())
                shown = sum(holds(p.condition, t) for t in cluster.failures)
                assert p.text.endswith(f"({shown}/{len(cluster.failures)} failures)"), (w.id, p.text, shown)
                checked += 1
                seen.add(p.condition.kind)
            alarms = sum(any(holds(c, t) for c in conditions) for t in cluster.successes)
            assert alarms <= FALSE_ALARMS * len(cluster.successes), (w.id, alarms)
    # WorkBench's failures skip look-ups, call the wrong tool, stop early and plot too much.
    assert checked >= 50 and len(seen) >= 4, (checked, seen)
