from __future__ import annotations

from typing import Any

import pytest

from flowmem.models import UsageStats, Workflow
from flowmem.policy.lifecycle import (
    LifecycleParams,
    Transition,
    decide,
    needs_reinduction,
    posterior,
    rank_factor,
    serve_candidate,
)

PARAMS = LifecycleParams()


def version(
    v: int, status: str, ok: int = 0, bad: int = 0, *, parent: int | None = None, wid: str = "wf", **kw: Any
) -> Workflow:
    """Version `v` of workflow `wid` with `ok` successes and `bad` failures (plus two unknown outcomes)."""
    return Workflow.model_validate(
        {
            "id": wid,
            "version": v,
            "parent_version": parent if parent is not None else (v - 1 if v > 1 else None),
            "name": wid,
            "steps": [{"action": "a"}],
            "status": status,
            "stats": {"served": ok + bad + 2, "successes": ok, "failures": bad},
            **kw,
        }
    )


def test_posterior_counts_outcomes_only() -> None:
    post = posterior(UsageStats(served=10, successes=3, failures=1))
    assert (post.a, post.b) == (4.0, 2.0)
    assert post.mean == pytest.approx(2 / 3)
    assert post.variance == pytest.approx(8 / (36 * 7))
    untried = posterior(UsageStats(served=7))
    assert (untried.a, untried.b, untried.mean) == (1.0, 1.0, 0.5)
    skewed = posterior(UsageStats(successes=2), LifecycleParams(prior_successes=3.0, prior_failures=5.0))
    assert (skewed.a, skewed.b) == (5.0, 5.0)


def test_credible_bounds_match_closed_forms() -> None:
    # Beta(11, 1) has CDF x^11 and Beta(1, 11) has CDF 1 - (1 - x)^11.
    assert posterior(UsageStats(successes=10)).lower(0.9) == pytest.approx(0.1 ** (1 / 11))
    assert posterior(UsageStats(failures=10)).upper(0.9) == pytest.approx(1 - 0.1 ** (1 / 11))
    post = posterior(UsageStats(successes=6, failures=4))
    assert post.lower(0.9) < post.mean < post.upper(0.9)
    assert post.lower(0.95) < post.lower(0.9)
    with pytest.raises(ValueError, match="confidence"):
        post.lower(1.0)


def test_rank_factor_is_one_untried_and_grows_with_successes() -> None:
    assert rank_factor(UsageStats()) == 1.0
    assert rank_factor(UsageStats(served=5)) == 1.0
    assert rank_factor(UsageStats(served=5), LifecycleParams(prior_successes=2.0, prior_failures=6.0)) == 1.0
    factors = [rank_factor(UsageStats(successes=k, failures=2)) for k in range(6)]
    assert factors == sorted(factors) and len(set(factors)) == 6
    assert rank_factor(UsageStats(successes=8)) == pytest.approx(0.5 + 9 / 10)
    assert 0.5 < rank_factor(UsageStats(failures=50)) < 1.0


def test_good_candidate_is_promoted_and_supersedes_the_active_version() -> None:
    old, new = version(1, "active", 7, 3), version(2, "candidate", 9, 1)
    transitions = decide([new, old])
    assert [(t.version, t.old, t.new, t.cause) for t in transitions] == [
        (1, "active", "deprecated", "superseded"),
        (2, "candidate", "active", "promoted"),
    ]
    assert transitions[0].reason == "superseded by v2"
    assert transitions[1].reason == "posterior mean 0.83 ≥ parent v1 0.67 − 0.10 after 10 outcomes"
    assert all(t.workflow_id == "wf" for t in transitions)
    assert needs_reinduction(transitions, nothing_served=lambda _: True) == []


def test_candidate_slightly_worse_than_parent_is_still_promoted() -> None:
    # 0.75 is within the 0.10 margin of the parent's 0.80.
    transitions = decide([version(1, "active", 15, 3), version(2, "candidate", 8, 2)])
    assert [(t.version, t.new) for t in transitions] == [(1, "deprecated"), (2, "active")]


def test_candidate_without_parent_is_promoted_on_its_lower_bound() -> None:
    (t,) = decide([version(1, "candidate", 10, 0)])
    assert (t.old, t.new, t.cause) == ("candidate", "active", "promoted")
    assert t.reason == "lower 90% bound 0.81 ≥ 0.35 after 10 outcomes (no parent)"
    # 3 of 6: the lower bound is still below 0.35, so the trial goes on.
    assert decide([version(1, "candidate", 3, 3)]) == []


def test_clearly_worse_candidate_is_deprecated() -> None:
    parent, worse = version(1, "active", 18, 2), version(2, "candidate", 4, 6)
    (t,) = decide([parent, worse])
    assert (t.version, t.old, t.new, t.cause) == (2, "candidate", "deprecated", "worse")
    assert t.reason.startswith("upper 90% bound 0.")
    assert t.reason.endswith("< parent v1 0.86 − 0.10 after 10 outcomes")
    # The worse candidate is a version's own failure, but v1 is still served: nothing to redo.
    assert needs_reinduction([t], nothing_served=lambda _: False) == []
    assert needs_reinduction([t], nothing_served=lambda _: True) == ["wf"]
    (t,) = decide([version(1, "candidate", 1, 7)])
    assert (t.new, t.reason) == ("deprecated", "posterior mean 0.20 < 0.35 after 8 outcomes")


def test_candidate_between_the_bars_stays_on_trial() -> None:
    # Mean 0.62 is below the parent's 0.86 - 0.10, but the upper bound is not yet.
    assert decide([version(1, "active", 18, 2), version(2, "candidate", 4, 2)]) == []


def test_failing_active_version_is_deprecated_and_queued_for_reinduction() -> None:
    (t,) = decide([version(1, "active", 1, 7)])
    assert (t.version, t.old, t.new, t.cause) == (1, "active", "deprecated", "failing")
    assert t.reason == "posterior mean 0.20 < 0.35 after 8 outcomes; no other version"
    assert needs_reinduction([t], nothing_served=lambda _: True) == ["wf"]

    (t,) = decide([version(1, "active", 1, 7), version(2, "candidate", 1, 0)])
    assert t.reason == "posterior mean 0.20 < 0.35 after 8 outcomes"
    # v2 is still on trial: the workflow is left to it rather than re-induced.
    assert needs_reinduction([t], nothing_served=lambda _: False) == []


def test_not_enough_trials_changes_nothing() -> None:
    assert decide([version(1, "active", 0, 4)]) == []
    assert decide([version(1, "active", 3, 1), version(2, "candidate", 4, 0)]) == []
    assert decide([version(1, "candidate", 0, 4)]) == []
    strict = LifecycleParams(min_trials=20)
    assert decide([version(1, "active", 5, 5), version(2, "candidate", 15, 0)], strict) == []
    assert decide([]) == []


def test_deprecated_versions_never_change() -> None:
    assert decide([version(1, "deprecated", 20, 0)]) == []
    assert decide([version(1, "deprecated", 0, 20), version(2, "deprecated", 0, 9)]) == []
    # A deprecated parent is still the yardstick, and it is not "superseded" again.
    transitions = decide([version(1, "deprecated", 2, 8), version(2, "candidate", 8, 2)])
    assert [(t.version, t.new) for t in transitions] == [(2, "active")]


def test_one_promotion_per_decision_the_best_candidate_wins() -> None:
    versions = [
        version(1, "active", 5, 5),
        version(2, "candidate", 7, 3, parent=1),
        version(3, "candidate", 9, 1, parent=1),
    ]
    transitions = decide(versions)
    assert [(t.version, t.new, t.reason) for t in transitions] == [
        (1, "deprecated", "superseded by v3"),
        (2, "deprecated", "superseded by v3"),
        (3, "active", transitions[2].reason),
    ]
    assert transitions == decide(list(reversed(versions)))


def test_decide_rejects_mixed_workflows() -> None:
    with pytest.raises(ValueError, match="one workflow"):
        decide([version(1, "active"), version(1, "active", wid="other")])
    with pytest.raises(ValueError, match="repeated"):
        decide([version(1, "active"), version(1, "candidate")])


def test_needs_reinduction_takes_own_failures_of_workflows_nothing_serves() -> None:
    transitions = [
        Transition("a", 1, "active", "deprecated", "superseded by v2", "superseded"),
        Transition("b", 2, "candidate", "deprecated", "worse", "worse"),
        Transition("c", 1, "active", "deprecated", "failing", "failing"),
        Transition("d", 1, "active", "deprecated", "by hand"),
    ]
    assert needs_reinduction(transitions, nothing_served=lambda _: True) == ["b", "c"]
    assert needs_reinduction(transitions, nothing_served=lambda wid: wid != "b") == ["c"]


def test_serve_candidate_is_deterministic_with_the_configured_share() -> None:
    keys = [f"request-{i}" for i in range(10_000)]
    picks = [serve_candidate(k, "wf", 2, 0.2) for k in keys]
    assert picks == [serve_candidate(k, "wf", 2, 0.2) for k in keys]
    assert abs(sum(picks) / len(keys) - 0.2) <= 0.02
    # Another candidate gets a different sample of requests.
    assert picks != [serve_candidate(k, "wf", 3, 0.2) for k in keys]
    assert not any(serve_candidate(k, "wf", 2, 0.0) for k in keys[:100])
    assert all(serve_candidate(k, "wf", 2, 1.0) for k in keys[:100])
    with pytest.raises(ValueError, match="share"):
        serve_candidate("k", "wf", 2, 1.5)


def test_params_are_validated() -> None:
    with pytest.raises(ValueError, match="prior"):
        LifecycleParams(prior_failures=0.0)
    with pytest.raises(ValueError, match="confidence"):
        LifecycleParams(confidence=1.0)
    assert PARAMS.candidate_share == 0.2 and PARAMS.min_trials == 5
