"""Pitfalls are where failed runs leave the workflow, clearly more often than successful runs do,
stated as what those runs did differently, naming actions only."""

from __future__ import annotations

from math import comb

import pytest

from flowmem.induction.pitfalls.failures import (
    Divergence,
    findings,
    first_divergence,
    one_sided_fisher,
    pitfalls,
    standalone_pitfalls,
    states,
)
from flowmem.models import PROCEDURE
from tests.factories import PITFALL_NAMES as NAMES
from tests.factories import PITFALL_WORKFLOW as WORKFLOW
from tests.factories import pitfall_failed as failed
from tests.factories import pitfall_ok as ok
from tests.factories import pitfall_run as run

NOT_AN_ADDRESS = "'{name}' is not an email address"


def test_a_step_most_failures_skip_and_no_success_skips_is_a_pitfall_that_says_so() -> None:
    failures = failed(4, "mail.search", "mail.forward") + failed(1, *WORKFLOW, start=200)
    assert pitfalls(WORKFLOW, ok(5), failures, set()) == [
        "skipped contacts.lookup, then called mail.forward (4/5 failures)"
    ]


def test_each_kind_of_divergence_states_what_the_run_did_differently() -> None:
    def first(
        *actions: str, errors: dict[str, str] | None = None
    ) -> tuple[str, tuple[str, ...], str, int] | None:
        found = first_divergence(WORKFLOW, run(0, *actions, success=False, errors=errors), {"olga"})
        return (found.kind, found.actions, found.text, found.times) if found else None

    assert first(*WORKFLOW) is None
    # Never the workflow's own sequence ("call contacts.lookup, then mail.forward"): the step skipped.
    assert first("mail.search", "mail.forward") == (
        "skipped",
        ("contacts.lookup", "mail.forward"),
        "skipped contacts.lookup, then called mail.forward",
        1,
    )
    # A later step called too early is the same finding: the step due was skipped.
    assert first("mail.search", "mail.forward", "contacts.lookup", "mail.forward") == first(
        "mail.search", "mail.forward"
    )
    assert first("mail.search", "mail.delete", "mail.forward") == (
        "replaced",
        ("mail.delete", "contacts.lookup"),
        "called mail.delete in place of contacts.lookup",
        1,
    )
    assert first("mail.search", "contacts.lookup", "mail.delete", "mail.forward") == (
        "inserted",
        ("mail.delete", "mail.forward"),
        "called mail.delete ahead of mail.forward",
        1,
    )
    assert first("mail.search", "mail.search", "contacts.lookup", "mail.forward") == (
        "inserted",
        ("mail.search", "contacts.lookup"),
        "called mail.search again ahead of contacts.lookup",
        2,
    )
    assert first(*WORKFLOW, "mail.delete") == (
        "appended",
        ("mail.delete", "mail.forward"),
        "called mail.delete at the end",
        1,
    )
    assert first(*WORKFLOW, "mail.forward") == (
        "appended",
        ("mail.forward", "mail.forward"),
        "called mail.forward again at the end",
        2,
    )
    assert first("mail.search", "contacts.lookup") == (
        "stopped",
        ("mail.forward",),
        "stopped without calling mail.forward",
        1,
    )
    assert first(*WORKFLOW, errors={"mail.forward": NOT_AN_ADDRESS}) == (
        "error",
        ("mail.forward",),
        "mail.forward failed: '…' is not an email address",
        1,
    )


def test_which_call_a_statement_means_is_said_in_words() -> None:
    loop = ["mail.search", "mail.forward", "mail.search", "mail.forward"]

    def text(workflow: list[str], *actions: str) -> str | None:
        found = first_divergence(workflow, run(0, *actions, success=False), set())
        return found.text if found else None

    assert text(WORKFLOW, *WORKFLOW, "mail.forward", "mail.forward") == "called mail.forward again at the end"
    assert text(loop, *loop, "mail.forward") == "called mail.forward a 3rd time at the end"
    assert text(loop, "mail.search", "mail.forward", "mail.forward") == (
        "skipped mail.search, then called mail.forward again"
    )
    assert (
        text(loop, "mail.search", "mail.forward", "mail.search")
        == "stopped without calling mail.forward again"
    )


def test_a_pitfall_keeps_the_failed_runs_that_show_it() -> None:
    skipping = failed(4, "mail.search", "mail.forward")
    stopping = failed(4, "mail.search", "contacts.lookup", start=200)
    [skipped, stopped] = findings(
        WORKFLOW, ok(10), [*skipping, *stopping, *failed(1, *WORKFLOW, start=300)], set()
    )
    assert (skipped.kind, skipped.actions, skipped.runs) == (
        "skipped",
        ("contacts.lookup", "mail.forward"),
        tuple(t.id for t in skipping),
    )
    assert skipped.text == "skipped contacts.lookup, then called mail.forward (4/9 failures)"
    assert (stopped.kind, stopped.runs, stopped.failures) == ("stopped", tuple(t.id for t in stopping), 9)


def test_a_pitfall_about_a_failed_call_is_linked_to_runs_whatever_example_values_masked() -> None:
    failing = run(0, *WORKFLOW, success=False, errors={"mail.forward": NOT_AN_ADDRESS})
    divergence = first_divergence(WORKFLOW, failing, set())
    assert divergence is not None and divergence.text == "mail.forward failed: 'olga' is not an email address"
    assert states("mail.forward failed: '…' is not an email address", divergence)
    assert not states("mail.search failed: '…' is not an email address", divergence)
    skipping = first_divergence(WORKFLOW, run(0, "mail.search", "mail.forward", success=False), set())
    assert skipping is not None and states("skipped contacts.lookup, then called mail.forward", skipping)
    assert not states("skipped mail.search, then called mail.forward", skipping)


def test_a_step_that_fails_where_successful_runs_do_not_is_a_pitfall_with_its_masked_error() -> None:
    failures = failed(3, *WORKFLOW, errors={"mail.forward": NOT_AN_ADDRESS})
    assert pitfalls(WORKFLOW, ok(4), failures, set(NAMES)) == [
        "mail.forward failed: '…' is not an email address (3/3 failures)"
    ]


def test_only_the_first_divergence_of_a_run_counts() -> None:
    # Each failure skips the lookup, then its forward fails, then it deletes: one finding each.
    failures = failed(4, "mail.search", "mail.forward", "mail.delete", errors={"mail.forward": "bounced"})
    assert first_divergence(WORKFLOW, failures[0], set()) == Divergence(
        "skipped", ("contacts.lookup", "mail.forward"), "skipped contacts.lookup, then called mail.forward"
    )
    assert pitfalls(WORKFLOW, ok(6), failures, set(), limit=10) == [
        "skipped contacts.lookup, then called mail.forward (4/4 failures)"
    ]


def test_no_pitfall_is_against_an_action_most_successful_runs_take() -> None:
    # Failed runs archive too early; successful runs archive at the end, or not at all.
    failures = failed(5, "mail.search", "mail.archive", "contacts.lookup", "mail.forward")
    most_archive = ok(3, *WORKFLOW, "mail.archive") + ok(2, start=10)
    assert pitfalls(WORKFLOW, most_archive, failures, set()) == []
    few_archive = ok(2, *WORKFLOW, "mail.archive") + ok(3, start=10)
    assert pitfalls(WORKFLOW, few_archive, failures, set()) == [
        "called mail.archive ahead of contacts.lookup (5/5 failures)"
    ]


def test_two_failed_runs_are_not_enough_nor_three_of_one_task() -> None:
    skip = ("mail.search", "mail.forward")
    assert one_sided_fisher(2, 2, 0, 10) < 0.05  # significant, yet too few runs
    assert pitfalls(WORKFLOW, ok(10), failed(2, *skip), set()) == []
    one_task = failed(3, *skip, task="Forward the latest email to olga")
    assert pitfalls(WORKFLOW, ok(10), one_task, set()) == []
    assert pitfalls(WORKFLOW, ok(10), failed(3, *skip), set()) == [
        "skipped contacts.lookup, then called mail.forward (3/3 failures)"
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
        "skipped contacts.lookup, then called mail.forward (3/3 failures)"
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
        "skipped contacts.lookup, then called mail.forward (6/10 failures)",
        "stopped without calling mail.forward (4/10 failures)",
    ]
    assert pitfalls(WORKFLOW, ok(12), failures, set(), limit=1) == found[:1]


def test_a_cluster_of_failed_runs_without_errors_gets_notes_not_a_rule() -> None:
    notes = standalone_pitfalls(failed(3, "mail.search", "mail.forward"), set(), limit=1)
    assert notes == ["do not rely on mail.search alone: no run that called it succeeded (3×)"]


def test_a_failure_written_down_by_hand_is_a_pitfall_on_its_own() -> None:
    told = failed(1, "mail.search", "mail.forward")[0].model_copy(update={"source": PROCEDURE})
    assert pitfalls(WORKFLOW, ok(3), [told], set()) == [
        "skipped contacts.lookup, then called mail.forward (1/1 failures)"
    ]
    # Observed, one failure is no evidence; written down, it is unless a success did the same.
    assert pitfalls(WORKFLOW, ok(3), failed(1, "mail.search", "mail.forward"), set()) == []
    assert pitfalls(WORKFLOW, [*ok(3), *ok(1, "mail.search", "mail.forward", start=50)], [told], set()) == []
