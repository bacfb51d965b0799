"""Pitfalls are where failed runs leave the workflow, clearly more often than successful runs do,
phrased as advice that names actions only."""

from __future__ import annotations

from math import comb

import pytest

from flowmem.induction.failures import (
    Divergence,
    first_divergence,
    one_sided_fisher,
    pitfalls,
    standalone_pitfalls,
)
from flowmem.models import PROCEDURE, Trajectory

WORKFLOW = ["mail.search", "contacts.lookup", "mail.forward"]
NAMES = ["olga", "kofi", "amir", "lena", "raj", "nadia", "sofia", "yuki", "carlos", "aisha", "zed", "ines"]
NOT_AN_ADDRESS = "'{name}' is not an email address"


def run(
    i: int,
    *actions: str,
    success: bool,
    errors: dict[str, str] | None = None,
    task: str | None = None,
) -> Trajectory:
    """Run `i` of a task "forward the email to <name>": the given actions, an error where given."""
    name = NAMES[i % len(NAMES)]
    errors = errors or {}
    steps = [
        {
            "action": a,
            "args": {"to": name},
            "observation": "ok",
            "error": errors.get(a, "").format(name=name) or None,
        }
        for a in actions
    ]
    return Trajectory.model_validate(
        {
            "id": f"run-{i}-{success}-{'-'.join(actions)}",
            "task": task or f"Forward the latest email to {name}",
            "steps": steps,
            "success": success,
        }
    )


def ok(n: int, *actions: str, start: int = 0) -> list[Trajectory]:
    return [run(start + i, *(actions or WORKFLOW), success=True) for i in range(n)]


def failed(
    n: int, *actions: str, start: int = 100, errors: dict[str, str] | None = None, task: str | None = None
) -> list[Trajectory]:
    return [run(start + i, *actions, success=False, errors=errors, task=task) for i in range(n)]


def test_a_step_most_failures_skip_and_no_success_skips_is_advice_to_call_it() -> None:
    failures = failed(4, "mail.search", "mail.forward") + failed(1, *WORKFLOW, start=200)
    assert pitfalls(WORKFLOW, ok(5), failures, set()) == [
        "call contacts.lookup, then mail.forward (4/5 failures)"
    ]


def test_each_kind_of_divergence_is_advice_that_names_actions() -> None:
    def first(*actions: str, errors: dict[str, str] | None = None) -> str | None:
        found = first_divergence(WORKFLOW, run(0, *actions, success=False, errors=errors), {"olga"})
        return found.advice if found else None

    assert first(*WORKFLOW) is None
    assert first("mail.search", "mail.forward") == "call contacts.lookup, then mail.forward"
    assert (
        first("mail.search", "mail.delete", "mail.forward")
        == "do not call mail.delete in place of contacts.lookup"
    )
    assert first("mail.search", "contacts.lookup", "mail.delete", "mail.forward") == (
        "do not call mail.delete ahead of mail.forward"
    )
    assert first(*WORKFLOW, "mail.delete") == "do not call mail.delete at the end"
    assert first(*WORKFLOW, "mail.forward") == "do not call mail.forward again"
    # A later step called too early: the advice is the order, not to avoid the step.
    assert first("mail.search", "mail.forward", "contacts.lookup", "mail.forward") == (
        "call contacts.lookup, then mail.forward"
    )
    assert first("mail.search", "contacts.lookup") == "continue until mail.forward"
    assert first(*WORKFLOW, errors={"mail.forward": NOT_AN_ADDRESS}) == (
        "check the arguments of mail.forward: it can fail with '…' is not an email address"
    )


def test_a_step_that_fails_where_successful_runs_do_not_is_advice_to_check_its_arguments() -> None:
    failures = failed(3, *WORKFLOW, errors={"mail.forward": NOT_AN_ADDRESS})
    assert pitfalls(WORKFLOW, ok(4), failures, set(NAMES)) == [
        "check the arguments of mail.forward: it can fail with '…' is not an email address (3/3 failures)"
    ]


def test_only_the_first_divergence_of_a_run_counts() -> None:
    # Each failure skips the lookup, then its forward fails, then it deletes: one finding each.
    failures = failed(4, "mail.search", "mail.forward", "mail.delete", errors={"mail.forward": "bounced"})
    assert first_divergence(WORKFLOW, failures[0], set()) == Divergence(
        "call contacts.lookup, then mail.forward"
    )
    assert pitfalls(WORKFLOW, ok(6), failures, set(), limit=10) == [
        "call contacts.lookup, then mail.forward (4/4 failures)"
    ]


def test_advice_never_avoids_an_action_most_successful_runs_take() -> None:
    # Failed runs archive too early; successful runs archive at the end, or not at all.
    failures = failed(5, "mail.search", "mail.archive", "contacts.lookup", "mail.forward")
    most_archive = ok(3, *WORKFLOW, "mail.archive") + ok(2, start=10)
    assert pitfalls(WORKFLOW, most_archive, failures, set()) == []
    few_archive = ok(2, *WORKFLOW, "mail.archive") + ok(3, start=10)
    assert pitfalls(WORKFLOW, few_archive, failures, set()) == [
        "do not call mail.archive ahead of contacts.lookup (5/5 failures)"
    ]


def test_two_failed_runs_are_not_enough_nor_three_of_one_task() -> None:
    skip = ("mail.search", "mail.forward")
    assert one_sided_fisher(2, 2, 0, 10) < 0.05  # significant, yet too few runs
    assert pitfalls(WORKFLOW, ok(10), failed(2, *skip), set()) == []
    one_task = failed(3, *skip, task="Forward the latest email to olga")
    assert pitfalls(WORKFLOW, ok(10), one_task, set()) == []
    assert pitfalls(WORKFLOW, ok(10), failed(3, *skip), set()) == [
        "call contacts.lookup, then mail.forward (3/3 failures)"
    ]


def test_a_finding_as_frequent_among_successes_as_among_failures_fails_the_fisher_test() -> None:
    skip = ("mail.search", "mail.forward")
    successes = ok(3, *skip) + ok(3, start=10)
    failures = failed(3, *skip) + failed(3, *WORKFLOW, start=200)
    assert one_sided_fisher(3, 6, 3, 6) > 0.5
    assert pitfalls(WORKFLOW, successes, failures, set()) == []


def test_successful_runs_that_share_a_divergence_count_against_it() -> None:
    # Every failure skips the lookup, and so do half the successful runs: skipping it is how
    # runs go, not why they fail. Without the successes' share, 3/3 failures alone would pass.
    skip = ("mail.search", "mail.forward")
    successes = ok(5, *skip) + ok(5, start=10)
    failures = failed(3, *skip)
    assert one_sided_fisher(3, 3, 5, 10) == pytest.approx(comb(8, 3) / comb(13, 3))  # 0.196
    assert one_sided_fisher(3, 3, 0, 10) < 0.05
    assert pitfalls(WORKFLOW, successes, failures, set()) == []
    # The same failures against successes that never skip it: a pitfall.
    assert pitfalls(WORKFLOW, ok(10), failures, set()) == [
        "call contacts.lookup, then mail.forward (3/3 failures)"
    ]


def test_the_exact_p_value_of_small_tables() -> None:
    # Fisher's tea tasting: 4 of 8 cups have milk first; 3 of the 4 cups picked do.
    assert one_sided_fisher(3, 4, 1, 4) == pytest.approx(17 / 70)
    # 3 of 4 failures and 1 of 6 successes: P(X >= 3), X ~ Hypergeometric(10 runs, 4 with it, 4 drawn).
    assert one_sided_fisher(3, 4, 1, 6) == pytest.approx((comb(4, 3) * comb(6, 1) + 1) / comb(10, 4))
    assert one_sided_fisher(4, 5, 0, 5) == pytest.approx(6 / 252)
    assert one_sided_fisher(0, 5, 2, 5) == 1.0


def test_strongest_first_and_at_most_limit() -> None:
    failures = failed(6, "mail.search", "mail.forward") + failed(
        4, "mail.search", "contacts.lookup", start=200
    )
    found = pitfalls(WORKFLOW, ok(12), failures, set())
    assert found == [
        "call contacts.lookup, then mail.forward (6/10 failures)",
        "continue until mail.forward (4/10 failures)",
    ]
    assert pitfalls(WORKFLOW, ok(12), failures, set(), limit=1) == found[:1]


def test_a_cluster_of_failed_runs_without_errors_gets_advice_not_a_rule() -> None:
    notes = standalone_pitfalls(failed(3, "mail.search", "mail.forward"), set(), limit=1)
    assert notes == ["do not rely on mail.search alone: no run that called it succeeded (3×)"]


def test_a_failure_written_down_by_hand_is_a_pitfall_on_its_own() -> None:
    told = failed(1, "mail.search", "mail.forward")[0].model_copy(update={"source": PROCEDURE})
    assert pitfalls(WORKFLOW, ok(3), [told], set()) == [
        "call contacts.lookup, then mail.forward (1/1 failures)"
    ]
    # Observed, one failure is no evidence; written down, it is unless a success did the same.
    assert pitfalls(WORKFLOW, ok(3), failed(1, "mail.search", "mail.forward"), set()) == []
    assert pitfalls(WORKFLOW, [*ok(3), *ok(1, "mail.search", "mail.forward", start=50)], [told], set()) == []
