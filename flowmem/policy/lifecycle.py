"""The online loop's promotion and demotion rules (pure: no storage, no flows, no SDKs).

A new version of a workflow starts as a `candidate` and is served to a share of the requests that
match it (`serve_candidate`). Each version's outcomes (`flowmem.policy.usage.usage_from`) give a Beta
posterior over its success rate (`posterior`); search ranks by it (`rank_factor`), and `decide`
turns the posteriors of all versions of one workflow into status transitions: a candidate that
is not worse than the version it revises becomes `active` and supersedes the old active version,
a candidate that is clearly worse is `deprecated`, and an active version that keeps failing is
`deprecated`; `needs_reinduction` says which clusters go back to induction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import ConfigDict

from flowmem.docstrings import attribute_descriptions
from flowmem.models import UsageStats, Workflow

__all__ = [
    "Beta",
    "Cause",
    "FAILING",
    "NOT_SERVED",
    "LifecycleParams",
    "Status",
    "Transition",
    "decide",
    "needs_reinduction",
    "posterior",
    "rank_factor",
    "serve_candidate",
]

Status = Literal["candidate", "active", "deprecated", "retired"]
"""A workflow version's lifecycle status (`Workflow.status`)."""

Cause = Literal["promoted", "superseded", "worse", "failing", "manual", "gone", "replaced"]
"""Why a transition was made: `promoted` (a candidate passed its trial), `superseded` (a newer
version became active), `worse` (a candidate failed its trial), `failing` (an active version's
success rate fell below the bar), `manual` (set by hand, e.g. from the CLI), `gone` (retired:
its cluster no longer exists after a re-clustering), `replaced` (retired: its cluster was
induced again without it)."""

NOT_SERVED: tuple[Status, ...] = ("deprecated", "retired")
"""Statuses a version is never served in (it stays readable)."""


@dataclass(frozen=True)
class LifecycleParams:
    """The knobs of promotion and demotion."""

    prior_successes: float = 1.0
    """Beta prior: pseudo-successes every version starts with."""
    prior_failures: float = 1.0
    """Beta prior: pseudo-failures every version starts with."""
    candidate_share: float = 0.2
    """Share of the matching requests a candidate is served to while on trial."""
    min_trials: int = 5
    """Outcomes needed before a candidate can be promoted or any version demoted."""
    not_worse_margin: float = 0.1
    """How much lower than its parent's posterior mean a candidate's may be and still be promoted."""
    deprecate_below: float = 0.35
    """A version whose posterior mean is below this (after `min_trials`) is deprecated."""
    confidence: float = 0.9
    """Level of the one-sided credible bounds used in the rules."""

    def __post_init__(self) -> None:
        if self.prior_successes <= 0 or self.prior_failures <= 0:
            raise ValueError("the Beta prior needs positive pseudo-counts")
        if not 0.0 <= self.candidate_share <= 1.0:
            raise ValueError("candidate_share must be within [0, 1]")
        if self.min_trials < 0:
            raise ValueError("min_trials must not be negative")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError("confidence must be within (0, 1)")


DEFAULT_PARAMS = LifecycleParams()
"""The parameters used when none are given."""


@dataclass(frozen=True)
class Beta:
    """A Beta(a, b) distribution: the posterior over a version's success rate."""

    a: float
    """Prior pseudo-successes plus observed successes."""
    b: float
    """Prior pseudo-failures plus observed failures."""

    @property
    def mean(self) -> float:
        """The posterior mean success rate, a / (a + b)."""
        return self.a / (self.a + self.b)

    @property
    def variance(self) -> float:
        """The posterior variance, ab / ((a + b)^2 (a + b + 1))."""
        n = self.a + self.b
        return self.a * self.b / (n * n * (n + 1.0))

    def lower(self, confidence: float) -> float:
        """The success rate the true one exceeds with probability `confidence` (one-sided)."""
        return self._quantile(1.0 - _check_confidence(confidence))

    def upper(self, confidence: float) -> float:
        """The success rate the true one stays below with probability `confidence` (one-sided)."""
        return self._quantile(_check_confidence(confidence))

    def _quantile(self, q: float) -> float:
        # Imported here so that importing flowmem does not pay for scipy.
        from scipy.stats import beta  # type: ignore[import-untyped]

        return float(beta.ppf(q, self.a, self.b))


def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be within (0, 1)")
    return confidence


def posterior(stats: UsageStats, params: LifecycleParams = DEFAULT_PARAMS) -> Beta:
    """The Beta posterior over a version's success rate.

    Only outcomes are evidence: runs it was served to whose outcome is unknown do not count.

    Args:
        stats: The version's usage statistics.
        params: The prior.

    Returns:
        Beta(prior_successes + successes, prior_failures + failures).
    """
    return Beta(a=params.prior_successes + stats.successes, b=params.prior_failures + stats.failures)


def rank_factor(stats: UsageStats, params: LifecycleParams = DEFAULT_PARAMS) -> float:
    """The factor search multiplies a version's similarity by.

    It is `1 + mean - prior_mean`: 1.0 for an untried version (whatever the prior), above 1 once
    it has succeeded more often than the prior expects, below 1 once it has failed more often.
    With the default uniform prior it is `0.5 + mean`, within (0.5, 1.5), so outcomes reorder
    close matches but cannot lift a poor match above a good one.

    Args:
        stats: The version's usage statistics.
        params: The prior.

    Returns:
        A positive factor; 1.0 means no evidence either way.
    """
    prior_mean = params.prior_successes / (params.prior_successes + params.prior_failures)
    return 1.0 + posterior(stats, params).mean - prior_mean


@dataclass(frozen=True)
class Transition:
    """A status change of one workflow version, decided by `decide`."""

    workflow_id: str
    """The workflow's stable id."""
    version: int
    """The version whose status changes."""
    old: Status
    """Its status before."""
    new: Status
    """Its status after."""
    reason: str
    """Short text with the figures, e.g. `posterior mean 0.82 ≥ parent v1 0.70 − 0.10 after 12 outcomes`."""
    cause: Cause = "manual"
    """Why, as a value code can branch on (the reason is for people)."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(json_schema_extra=attribute_descriptions)
    """Its fields described in a model's JSON schema that holds it (`RollbackPlan`)."""


_Change = tuple[Status, str, Cause]
"""A decided change of one version: new status, reason, cause."""


def _outcomes(w: Workflow) -> int:
    return w.stats.successes + w.stats.failures


def _judge_candidate(
    w: Workflow, parent: Workflow | None, params: LifecycleParams
) -> tuple[Literal["promote", "worse"], str] | None:
    """Whether a candidate passed its trial, failed it, or (None) needs more outcomes."""
    n = _outcomes(w)
    if n < params.min_trials:
        return None
    post = posterior(w.stats, params)
    pct = f"{params.confidence:.0%}"
    if post.mean < params.deprecate_below:
        return "worse", f"posterior mean {post.mean:.2f} < {params.deprecate_below:.2f} after {n} outcomes"
    if parent is None:
        low = post.lower(params.confidence)
        if low >= params.deprecate_below:
            return "promote", (
                f"lower {pct} bound {low:.2f} ≥ {params.deprecate_below:.2f} after {n} outcomes (no parent)"
            )
        return None
    ref = posterior(parent.stats, params).mean
    bar = ref - params.not_worse_margin
    figures = f"parent v{parent.version} {ref:.2f} − {params.not_worse_margin:.2f} after {n} outcomes"
    if post.mean >= bar:
        return "promote", f"posterior mean {post.mean:.2f} ≥ {figures}"
    high = post.upper(params.confidence)
    if high < bar:
        return "worse", f"upper {pct} bound {high:.2f} < {figures}"
    return None


def decide(versions: Sequence[Workflow], params: LifecycleParams = DEFAULT_PARAMS) -> list[Transition]:
    """Decide the status transitions of one workflow from the outcomes of all its versions.

    The rules, for versions with at least `min_trials` outcomes:

    - A candidate whose posterior mean is below `deprecate_below` is deprecated (`worse`).
    - A candidate with a parent (the version `parent_version`, when it is among `versions`) is
      promoted when its posterior mean is at least the parent's minus `not_worse_margin`, and
      deprecated when even its upper credible bound is below that. Without a parent it is
      promoted when its lower credible bound reaches `deprecate_below`. Otherwise it stays on
      trial.
    - At most one candidate is promoted per call: the one with the highest posterior mean (then
      the newest). The versions that were active, and other candidates that qualified, become
      deprecated as `superseded by vN`.
    - An active version that is not superseded and whose posterior mean is below
      `deprecate_below` is deprecated (`failing`), even when no other version is left to serve
      (a failing workflow must not be served); the reason then says `no other version`.
    - Deprecated versions never change.

    Args:
        versions: All versions of one workflow, with their current status and stats.
        params: The thresholds.

    Returns:
        The transitions, ordered by version; empty when nothing changes.

    Raises:
        ValueError: If the versions belong to different workflows or repeat a version number.
    """
    if not versions:
        return []
    wid = versions[0].id
    if any(w.id != wid for w in versions):
        raise ValueError("decide() takes the versions of one workflow")
    by_version = {w.version: w for w in versions}
    if len(by_version) != len(versions):
        raise ValueError(f"workflow {wid!r} has a repeated version number")
    ordered = sorted(versions, key=lambda w: w.version)

    changes = _candidate_changes(ordered, by_version, params)
    changes.update(_failing_changes(ordered, changes, params))
    transitions: list[Transition] = []
    for w in ordered:
        if w.version in changes:
            new, reason, cause = changes[w.version]
            transitions.append(Transition(wid, w.version, w.status, new, reason, cause))
    return transitions


def _candidate_changes(
    ordered: Sequence[Workflow], by_version: dict[int, Workflow], params: LifecycleParams
) -> dict[int, _Change]:
    """Candidates that passed or failed their trial, and the versions the promoted one supersedes."""
    changes: dict[int, _Change] = {}
    promotable: dict[int, str] = {}
    for w in ordered:
        if w.status != "candidate":
            continue
        parent = by_version.get(w.parent_version) if w.parent_version is not None else None
        verdict = _judge_candidate(w, parent, params)
        if verdict is None:
            continue
        kind, reason = verdict
        if kind == "worse":
            changes[w.version] = ("deprecated", reason, "worse")
        else:
            promotable[w.version] = reason
    if promotable:
        winner = max(promotable, key=lambda v: (posterior(by_version[v].stats, params).mean, v))
        changes[winner] = ("active", promotable[winner], "promoted")
        for w in ordered:
            if w.status == "active" or (w.version in promotable and w.version != winner):
                changes[w.version] = ("deprecated", f"superseded by v{winner}", "superseded")
    return changes


def _failing_changes(
    ordered: Sequence[Workflow], changes: dict[int, _Change], params: LifecycleParams
) -> dict[int, _Change]:
    """Active versions, not already superseded, whose success rate fell below the bar."""
    failing: dict[int, str] = {}
    for w in ordered:
        if w.status != "active" or w.version in changes or _outcomes(w) < params.min_trials:
            continue
        mean = posterior(w.stats, params).mean
        if mean < params.deprecate_below:
            failing[w.version] = (
                f"posterior mean {mean:.2f} < {params.deprecate_below:.2f} after {_outcomes(w)} outcomes"
            )
    gone = {v for v, (new, _, _) in changes.items() if new == "deprecated"} | failing.keys()
    left = {w.version for w in ordered if w.status not in NOT_SERVED} - gone
    suffix = "" if left else "; no other version"
    return {v: ("deprecated", reason + suffix, "failing") for v, reason in failing.items()}


FAILING: tuple[Cause, ...] = ("failing", "worse")
"""Deprecation causes that are a version's own failures (not being superseded)."""


def needs_reinduction(
    transitions: Iterable[Transition], *, nothing_served: Callable[[str], bool]
) -> list[str]:
    """The one re-induction rule: workflows a version of which was deprecated for its own
    failures (`FAILING`), and of which no version is served any more (`nothing_served(id)`).

    The caller sends their clusters back to induction, failed runs included, so a better
    workflow can replace them; a workflow that still has a version on trial or active is
    left to that version.
    """
    ids = {t.workflow_id for t in transitions if t.new == "deprecated" and t.cause in FAILING}
    return sorted(wid for wid in ids if nothing_served(wid))


def serve_candidate(request_key: str, workflow_id: str, version: int, share: float) -> bool:
    """Whether a request gets a candidate version: deterministic hash bucketing.

    The same request, workflow and version always get the same answer, and over many requests
    about `share` of them get the candidate. Including the id and version in the hash gives each
    candidate its own, independent sample of requests.

    Args:
        request_key: What identifies the request (e.g. the task text or a run id).
        workflow_id: The candidate's workflow id.
        version: The candidate's version.
        share: The share of requests to serve it to, within [0, 1].

    Returns:
        True when this request falls in the candidate's share.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError("share must be within [0, 1]")
    digest = hashlib.sha256(f"{request_key}\x1f{workflow_id}\x1f{version}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < share
