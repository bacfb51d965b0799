"""Learning from failures: where failed runs leave the workflow the successful runs follow.

Each run of the cluster, failed or successful, is aligned to the workflow's actions
(`lcs_pairs`); the point where it first leaves the workflow is its finding: a step it skipped,
an action the workflow does not have at that point, a step whose call returned an error, or
stopping before the end. Later deviations of the same run are consequences and are not
counted. A finding becomes a pitfall only when it is clearly more frequent among the failed
runs than among the successful ones (one-sided Fisher's exact test), so a step that failed and
successful runs take alike is never blamed.

A pitfall is advice that names actions, never values: error texts are masked with the
de-specification check, and an error that reads like an instruction
(`flowmem.induction.injection`) is data, never advice: only the fact that the tool returned
such text is noted.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from math import comb
from typing import NamedTuple

from flowmem.induction.align import lcs_pairs
from flowmem.induction.injection import DESTINATION, looks_like_injection
from flowmem.induction.literals import mask
from flowmem.models import PROCEDURE, Trajectory

__all__ = ["IGNORED", "Divergence", "first_divergence", "one_sided_fisher", "pitfalls", "standalone_pitfalls"]

IGNORED = "returned instruction-like text (ignored)"
"""What a pitfall says of an error that reads like an instruction, instead of quoting it."""


class Divergence(NamedTuple):
    """Where a run first leaves a workflow, as advice."""

    advice: str
    """What to do instead, naming actions only: `call contacts.lookup, then mail.forward`
    (word order, not "before" / "after": those are values of many tasks' time slots)."""
    avoid: str | None = None
    """The action the advice says not to call, if it says so."""
    times: int = 1
    """How many times the run had called `avoid` by then (2: it called it again)."""


def _clean_error(text: str, literals: AbstractSet[str]) -> str:
    """An error message, cut to its first line, with example values masked."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = mask(first, literals, "…")
    # Addresses, URLs, ids and numbers are example-specific even when no argument used them.
    first = DESTINATION.sub("…", first)
    first = re.sub(r"\b\d[\d\-:./]*\b", "…", first)
    return first[:80]


def _error_note(action: str, error: str, literals: AbstractSet[str]) -> str:
    """`<action> failed: <cleaned error>`, or `<action> returned instruction-like text (ignored)`."""
    if looks_like_injection(error):
        return f"{action} {IGNORED}"
    message = _clean_error(error, literals)
    return f"{action} failed" + (f": {message}" if message else "")


def _error_advice(action: str, error: str, literals: AbstractSet[str]) -> str:
    """`check the arguments of <action>: it can fail with <cleaned error>` (or the injection note)."""
    if looks_like_injection(error):
        return f"{action} {IGNORED}"
    message = _clean_error(error, literals)
    return f"check the arguments of {action}: it can fail" + (f" with {message}" if message else "")


def first_divergence(
    actions: Sequence[str], run: Trajectory, literals: AbstractSet[str]
) -> Divergence | None:
    """Where `run` first leaves the workflow `actions`, or None if it follows it to the end.

    The run is aligned to the workflow (longest common subsequence of actions) and walked in
    order; between two aligned steps it may have skipped workflow steps, taken actions the
    workflow does not have there, or both (a substitution); an aligned step may have failed.
    """
    pairs = [*lcs_pairs(actions, run.actions), (len(actions), len(run.actions))]
    done = at = 0  # next workflow step, next run step
    for i, j in pairs:
        skipped, extra = actions[done:i], run.actions[at:j]
        if extra:
            return _extra(actions, run.actions, done, i, at, has_skipped=bool(skipped))
        if skipped and i < len(actions):
            return Divergence(f"call {skipped[0]}, then {actions[i]}")
        if skipped:  # it stopped before the workflow's end
            return Divergence(f"continue until {actions[-1]}")
        if j < len(run.steps) and run.steps[j].error:
            return Divergence(_error_advice(run.steps[j].action, run.steps[j].error or "", literals))
        done, at = i + 1, j + 1
    return None


def _extra(
    actions: Sequence[str], taken: Sequence[str], done: int, nxt: int, at: int, *, has_skipped: bool
) -> Divergence:
    """The first action a run took that the workflow does not have at that point."""
    action = taken[at]
    if action in actions[done + 1 :]:
        # A later step called too early: the advice is the order, not to avoid the action.
        return Divergence(f"call {actions[done]}, then {action}")
    times = taken[: at + 1].count(action)
    call = f"call {action} again" if times > 1 else f"call {action}"
    if has_skipped:
        where = f" in place of {actions[done]}"
    elif nxt < len(actions):
        where = f" ahead of {actions[nxt]}"
    elif actions and actions[-1] != action:
        where = " at the end"
    else:  # "do not call X again", not "... again after X"
        where = ""
    return Divergence(f"do not {call}{where}", action, times)


def one_sided_fisher(failed_with: int, failed: int, ok_with: int, ok: int) -> float:
    """P-value of one-sided Fisher's exact test that a finding is more frequent among the
    `failed` runs (`failed_with` of them have it) than among the `ok` ones (`ok_with`).

    The hypergeometric upper tail: of the `failed_with + ok_with` runs with the finding, at
    least `failed_with` fall among the failures when `failed` of all runs are drawn.
    """
    total, having = failed + ok, failed_with + ok_with
    most = min(having, failed)
    tail = sum(comb(having, x) * comb(total - having, failed - x) for x in range(failed_with, most + 1))
    return tail / comb(total, failed)


def pitfalls(
    actions: Sequence[str],
    successes: Sequence[Trajectory],
    failures: Sequence[Trajectory],
    literals: AbstractSet[str],
    *,
    min_support: int = 3,
    min_tasks: int = 2,
    alpha: float = 0.05,
    limit: int = 3,
) -> list[str]:
    """Pitfalls of a workflow: where failed runs leave it and successful runs do not.

    `successes` should be every successful run of the cluster (runs that solve the task
    another way diverge too, and count against a finding). A first divergence
    (`first_divergence`) is a pitfall when it comes from at least `min_support` distinct failed
    runs of at least `min_tasks` distinct tasks, and one-sided Fisher's exact test of failed vs
    successful runs having it gives p < `alpha`; or when a procedure written by hand
    (`add_workflow`, source `PROCEDURE`) that its author marked failed shows it and no
    successful run does: a stated outcome, not an observed one, is a lesson on its own.
    Advice not to call an action (again) is never given when more than half of the
    successful runs call it (as many times). Strongest
    (lowest p) first, at most `limit`, each with its evidence: `(n/m failures)`.
    """
    failed_runs = list({t.id: t for t in failures}.values())
    ok_runs = list({t.id: t for t in successes}.values())
    found: dict[str, list[Divergence]] = {}
    tasks: dict[str, set[str]] = {}
    stated: Counter[str] = Counter()
    for run in failed_runs:
        divergence = first_divergence(actions, run, literals)
        if divergence is not None:
            found.setdefault(divergence.advice, []).append(divergence)
            tasks.setdefault(divergence.advice, set()).add(run.task)
            stated[divergence.advice] += run.source == PROCEDURE
    ok_found = Counter(d.advice for d in (first_divergence(actions, run, literals) for run in ok_runs) if d)
    kept: list[tuple[float, int, str]] = []
    for advice, divergences in found.items():
        n = len(divergences)
        avoid, times = divergences[0].avoid, min(d.times for d in divergences)
        if avoid is not None and sum(t.actions.count(avoid) >= times for t in ok_runs) > len(ok_runs) / 2:
            continue  # most successful runs call it (as often): never advice against it
        if stated[advice] and ok_found[advice] == 0:
            kept.append((0.0, -n, advice))  # a failure written down by hand is a lesson in itself
            continue
        if n < min_support or len(tasks[advice]) < min_tasks:
            continue
        p = one_sided_fisher(n, len(failed_runs), ok_found[advice], len(ok_runs))
        if p < alpha:
            kept.append((p, -n, advice))
    kept.sort()
    return [f"{advice} ({-n}/{len(failed_runs)} failures)" for _, n, advice in kept[:limit]]


def standalone_pitfalls(
    failures: Sequence[Trajectory], literals: AbstractSet[str], *, limit: int = 3
) -> list[str]:
    """Notes for a cluster with failed runs only: the errors its runs hit (never steps to follow)."""
    found: Counter[str] = Counter()
    for run in failures:
        for step in run.steps:
            if step.error:
                found[_error_note(step.action, step.error, literals)] += 1
    if not found and failures:
        # dict.fromkeys, not set: ties go to the earlier action in every process.
        common = Counter(a for run in failures for a in dict.fromkeys(run.actions)).most_common(2)
        found.update({f"do not rely on {a} alone: no run that called it succeeded": n for a, n in common})
    return [f"{f} ({n}×)" for f, n in found.most_common(limit)]
