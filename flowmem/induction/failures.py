"""Learning from failures: contrast failed runs with the workflow the successful runs follow.

Each failed run is aligned to the workflow's actions. Where it leaves the workflow — a step it
skipped, an action the successful runs do not take, an error, stopping early — is a finding.
Findings shared by several failed runs become the workflow's pitfalls. Error texts are masked
with the de-specification check, so a pitfall names no example's values; an error that reads
like an instruction (`flowmem.induction.injection`) is data, never advice: only the fact that
the tool returned such text is noted.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from flowmem.induction.align import lcs_pairs
from flowmem.induction.injection import DESTINATION, looks_like_injection
from flowmem.induction.literals import mask
from flowmem.models import Trajectory

__all__ = ["IGNORED", "pitfalls", "standalone_pitfalls"]

IGNORED = "returned instruction-like text (ignored)"
"""What a pitfall says of an error that reads like an instruction, instead of quoting it."""


def _clean_error(text: str, literals: set[str]) -> str:
    """An error message, cut to its first line, with example values masked."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = mask(first, literals, "…")
    # Addresses, URLs, ids and numbers are example-specific even when no argument used them.
    first = DESTINATION.sub("…", first)
    first = re.sub(r"\b\d[\d\-:./]*\b", "…", first)
    return first[:80]


def _error_finding(action: str, error: str, literals: set[str], verb: str) -> str:
    """`<action> can fail: <cleaned error>`, or `<action> returned instruction-like text (ignored)`."""
    if looks_like_injection(error):
        return f"{action} {IGNORED}"
    message = _clean_error(error, literals)
    return f"{action} {verb}" + (f": {message}" if message else "")


def _findings(
    actions: Sequence[str], run: Trajectory, success_actions: set[str], literals: set[str]
) -> set[str]:
    found: set[str] = set()
    pairs = lcs_pairs(actions, run.actions)
    matched = {i for i, _ in pairs}
    for i, action in enumerate(actions):
        if i not in matched:
            if pairs and i > max(matched, default=-1):
                found.add(f"runs that end without {action} fail")
                break
            found.add(f"runs that skip {action} fail")
    for step in run.steps:
        if step.action not in success_actions:
            found.add(f"runs that call {step.action} fail")
        if step.error:
            found.add(_error_finding(step.action, step.error, literals, "can fail"))
    return found


def pitfalls(
    actions: Sequence[str],
    successes: Sequence[Trajectory],
    failures: Sequence[Trajectory],
    literals: set[str],
    *,
    min_support: int = 2,
    limit: int = 3,
) -> list[str]:
    """Pitfalls of a workflow, from the failed runs of its cluster.

    A finding must come from at least `min_support` distinct failed tasks (and from a larger
    share of the failures than of the successes), so a single odd run adds nothing.
    """
    success_actions = {a for t in successes for a in t.actions}
    failed: Counter[str] = Counter()
    for run in failures:
        failed.update(_findings(actions, run, success_actions, literals))
    succeeded: Counter[str] = Counter()
    for run in successes:
        succeeded.update(
            f for f in _findings(actions, run, success_actions, literals) if "can fail" in f or IGNORED in f
        )
    n_fail, n_ok = max(1, len(failures)), max(1, len(successes))
    kept = [(n, f) for f, n in failed.items() if n >= min_support and n / n_fail > succeeded.get(f, 0) / n_ok]
    kept.sort(key=lambda item: (-item[0], item[1]))
    return [f"{f} ({n}/{len(failures)} failures)" for n, f in kept[:limit]]


def standalone_pitfalls(failures: Sequence[Trajectory], literals: set[str], *, limit: int = 3) -> list[str]:
    """Notes for a cluster with failed runs only: the errors its runs hit (never steps to follow)."""
    found: Counter[str] = Counter()
    for run in failures:
        for step in run.steps:
            if step.error:
                found[_error_finding(step.action, step.error, literals, "failed")] += 1
    if not found and failures:
        common = Counter(a for run in failures for a in set(run.actions)).most_common(2)
        found.update({f"runs that used {a} failed": n for a, n in common})
    return [f"{f} ({n}×)" for f, n in found.most_common(limit)]
