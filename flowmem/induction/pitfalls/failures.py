"""Learning from failures: where failed runs leave the workflow the successful runs follow.

Each run of the cluster, failed or successful, is aligned to the workflow's actions
(`lcs_pairs`); the point where it first leaves the workflow is its finding, stated as what the
run did differently: it skipped a step and went on to a later one, called an action where the
workflow calls another, called an action the workflow does not have at that point (or again),
went on past the workflow's final step, stopped without calling a step, or a call failed. Later
deviations of the same run are consequences and are not counted. A finding becomes a pitfall
only when it is clearly more frequent among the failed runs than among the successful ones
(one-sided Fisher's exact test), so a step that failed and successful runs take alike is never
blamed. Each pitfall keeps the failed runs that show it (`Finding.runs`), so it can be checked
against them.

A pitfall names actions, never values: error texts are masked with the de-specification check,
and an error that reads like an instruction (`flowmem.induction.injection`) is data, never
advice: only the fact that the tool returned such text is noted. A statement orders actions
with "then", "ahead of", "in place of" and "at the end", never "before" / "after" (values of many
tasks' time slots) or "first" / "last" (values of list positions).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from math import comb
from typing import Literal, NamedTuple

from flowmem.induction.injection import DESTINATION, looks_like_injection
from flowmem.induction.literals import mask
from flowmem.models import PROCEDURE, Trajectory
from flowmem.retrieval.align import lcs_pairs

__all__ = [
    "EVIDENCE",
    "IGNORED",
    "clean_error",
    "Divergence",
    "Finding",
    "Kind",
    "findings",
    "pitfall_statement",
    "first_divergence",
    "one_sided_fisher",
    "pitfalls",
    "standalone_pitfalls",
    "states",
]

IGNORED = "returned instruction-like text (ignored)"
"""What a pitfall says of an error that reads like an instruction, instead of quoting it."""

Kind = Literal["skipped", "replaced", "inserted", "appended", "stopped", "error"]
"""How a run left the workflow, with the actions a statement of that kind names:

- `skipped` (X, Y): X was due, the run went on to the later step Y (`skipped X, then called Y`);
- `replaced` (E, X): the run called E, which the workflow does not have there, and skipped X
  (`called E in place of X`);
- `inserted` (E, Y): the run called E ahead of the workflow's next step Y (`called E ahead of Y`);
- `appended` (E, Z): the run went on past the workflow's final step Z (`called E at the end`,
  `called Z again at the end`);
- `stopped` (X,): the run ended with X still due (`stopped without calling X`);
- `error` (X,): X, a workflow step, returned an error (`X failed: <masked message>`)."""

_AVOIDS: frozenset[str] = frozenset({"replaced", "inserted", "appended"})
"""Kinds whose statement is against calling an action (the first one it names)."""


class Divergence(NamedTuple):
    """Where a run first leaves a workflow, as a statement of what it did differently."""

    kind: Kind
    """How it left the workflow."""
    actions: tuple[str, ...]
    """The actions the statement names, in the order it names them (see `Kind`)."""
    text: str
    """The statement, naming actions only: `skipped contacts.lookup, then called mail.forward`."""
    times: int = 1
    """Which call of an action the statement means (2: `again`, 3: `a 3rd time`): for `skipped`,
    of the step the run went on to; for `stopped`, of the step it did not call; else of the
    first action named."""

    @property
    def avoid(self) -> str | None:
        """The action the run should not have called there, if the statement is against one."""
        return self.actions[0] if self.kind in _AVOIDS else None


class Finding(NamedTuple):
    """A divergence that failed runs share: a pitfall, with the runs it can be checked against."""

    kind: Kind
    """How the failed runs left the workflow."""
    actions: tuple[str, ...]
    """The actions the statement names, in its order (see `Kind`)."""
    times: int
    """Which call of an action the statement means (see `Divergence`)."""
    statement: str
    """What the failed runs did differently."""
    runs: tuple[str, ...]
    """Ids of the failed runs whose first divergence it is."""
    failures: int
    """How many failed runs were looked at (the evidence's denominator)."""

    @property
    def text(self) -> str:
        """The pitfall as a workflow stores it: the statement with its evidence, `(n/m failures)`."""
        return f"{self.statement} ({len(self.runs)}/{self.failures} failures)"


def clean_error(text: str, literals: AbstractSet[str]) -> str:
    """An error message, cut to its first line, with example values masked (and without an
    "Error:" of its own: the statement says the call failed)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = re.sub(r"^error\s*:\s*", "", first, flags=re.IGNORECASE)
    first = mask(first, literals, "…")
    # Addresses, URLs, ids and numbers are example-specific even when no argument used them.
    first = DESTINATION.sub("…", first)
    first = re.sub(r"\b\d[\d\-:./]*\b", "…", first)
    return first[:80]


def _error_note(action: str, error: str, literals: AbstractSet[str]) -> str:
    """`<action> failed: <cleaned error>`, or `<action> returned instruction-like text (ignored)`."""
    if looks_like_injection(error):
        return f"{action} {IGNORED}"
    message = clean_error(error, literals)
    return f"{action} failed" + (f": {message}" if message else "")


def first_divergence(
    actions: Sequence[str], run: Trajectory, literals: AbstractSet[str]
) -> Divergence | None:
    """Where `run` first leaves the workflow `actions`, or None if it follows it to the end.

    The run is aligned to the workflow (longest common subsequence of actions) and walked in
    order; between two aligned steps it may have skipped workflow steps, taken actions the
    workflow does not have there, or both (a substitution); an aligned step may have failed.
    Up to the divergence the run's actions are the workflow's, so each statement can be
    checked by counting calls in the run's actions (see `Kind`).
    """
    pairs = [*lcs_pairs(actions, run.actions), (len(actions), len(run.actions))]
    done = at = 0  # next workflow step, next run step
    for i, j in pairs:
        skipped, extra = actions[done:i], run.actions[at:j]
        if extra:
            return _extra(actions, run.actions, done, i, at, has_skipped=bool(skipped))
        if skipped and i < len(actions):
            return _skipped(actions[done], run.actions, at)
        if skipped:  # it stopped with workflow steps still due
            step, times = actions[done], actions[:done].count(actions[done]) + 1
            return Divergence("stopped", (step,), f"stopped without calling {step}{_again(times)}", times)
        if j < len(run.steps) and run.steps[j].error:
            action = run.steps[j].action
            return Divergence("error", (action,), _error_note(action, run.steps[j].error or "", literals))
        done, at = i + 1, j + 1
    return None


def _again(times: int) -> str:
    """How a statement says which call of an action it means: "", " again", " a 3rd time"."""
    if times <= 2:
        return " again" if times == 2 else ""
    suffix = "th" if times % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(times % 10, "th")
    return f" a {times}{suffix} time"


def _skipped(due: str, taken: Sequence[str], at: int) -> Divergence:
    """`due` was the workflow's next step; the run went on to a later step, `taken[at]`."""
    went_to, times = taken[at], taken[: at + 1].count(taken[at])
    text = f"skipped {due}, then called {went_to}{_again(times)}"
    return Divergence("skipped", (due, went_to), text, times)


def _extra(
    actions: Sequence[str], taken: Sequence[str], done: int, nxt: int, at: int, *, has_skipped: bool
) -> Divergence:
    """The first action a run took that the workflow does not have at that point."""
    action = taken[at]
    if action in actions[done + 1 :]:
        # A later step called too early: the step due was skipped, not the action wrong.
        return _skipped(actions[done], taken, at)
    times = taken[: at + 1].count(action)
    again = _again(times)
    if has_skipped:
        due = actions[done]
        return Divergence("replaced", (action, due), f"called {action}{again} in place of {due}", times)
    if nxt < len(actions):
        ahead = actions[nxt]
        return Divergence("inserted", (action, ahead), f"called {action}{again} ahead of {ahead}", times)
    # The run took every step: it went on past the final one (`again`: it called that once more).
    return Divergence("appended", (action, actions[-1]), f"called {action}{again} at the end", times)


def states(statement: str, divergence: Divergence) -> bool:
    """Whether a pitfall's statement (its evidence cut off) is this divergence: the same text,
    or, for a failed call, the same action (the message is masked with a cluster's example
    values, which a reader of the workflow alone does not have)."""
    if statement == divergence.text:
        return True
    failed = f"{divergence.actions[0]} failed"
    return divergence.kind == "error" and (statement == failed or statement.startswith(f"{failed}: "))


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


def findings(
    actions: Sequence[str],
    successes: Sequence[Trajectory],
    failures: Sequence[Trajectory],
    literals: AbstractSet[str],
    *,
    min_support: int = 3,
    min_tasks: int = 2,
    alpha: float = 0.05,
    limit: int = 3,
) -> list[Finding]:
    """Pitfalls of a workflow, each with the failed runs that show it: where failed runs leave
    it and successful runs do not.

    `successes` should be every successful run of the cluster (runs that solve the task
    another way diverge too, and count against a finding). A first divergence
    (`first_divergence`) is a pitfall when it comes from at least `min_support` distinct failed
    runs of at least `min_tasks` distinct tasks, and one-sided Fisher's exact test of failed vs
    successful runs having it gives p < `alpha`; or when a procedure written by hand
    (`add_workflow`, source `PROCEDURE`) that its author marked failed shows it and no
    successful run does: a stated outcome, not an observed one, is a lesson on its own.
    A statement against calling an action (again) is never made when more than half of the
    successful runs call it (as many times). Strongest (lowest p) first, at most `limit`.
    """
    failed_runs = list({t.id: t for t in failures}.values())
    ok_runs = list({t.id: t for t in successes}.values())
    found: dict[str, list[tuple[Divergence, Trajectory]]] = {}
    for run in failed_runs:
        divergence = first_divergence(actions, run, literals)
        if divergence is not None:
            found.setdefault(divergence.text, []).append((divergence, run))
    ok_found = Counter(d.text for d in (first_divergence(actions, run, literals) for run in ok_runs) if d)
    kept: list[tuple[float, int, str, Finding]] = []
    for text, shown in found.items():
        first, runs = shown[0][0], [run for _, run in shown]
        p = _strength(
            first,
            runs,
            ok_runs,
            ok_found[text],
            len(failed_runs),
            min_support=min_support,
            min_tasks=min_tasks,
            alpha=alpha,
        )
        if p is not None:
            times = first.times  # the text says which call it means: the same for every run
            ids = tuple(t.id for t in runs)
            finding = Finding(first.kind, first.actions, times, text, ids, len(failed_runs))
            kept.append((p, -len(runs), text, finding))
    kept.sort(key=lambda k: k[:3])
    return [finding for *_, finding in kept[:limit]]


def _strength(
    first: Divergence,
    runs: Sequence[Trajectory],
    ok_runs: Sequence[Trajectory],
    ok_with: int,
    failed: int,
    *,
    min_support: int,
    min_tasks: int,
    alpha: float,
) -> float | None:
    """How strongly a divergence that the failed `runs` show (`first` of them) is a pitfall:
    its p-value (0 for a failure written down by hand, a lesson in itself), or None when it is
    none (see `findings`). `ok_with` successful runs show it too, of `ok_runs`; `failed` runs
    failed in all."""
    avoid = first.avoid
    if avoid is not None and sum(t.actions.count(avoid) >= first.times for t in ok_runs) > len(ok_runs) / 2:
        return None  # most successful runs call it (as often): never a statement against it
    if any(t.source == PROCEDURE for t in runs) and ok_with == 0:
        return 0.0
    n = len(runs)
    if n < min_support or len({t.task for t in runs}) < min_tasks:
        return None
    p = one_sided_fisher(n, failed, ok_with, len(ok_runs))
    return p if p < alpha else None


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
    """The pitfalls a workflow stores: `findings`' texts, each with its evidence `(n/m failures)`."""
    found = findings(
        actions,
        successes,
        failures,
        literals,
        min_support=min_support,
        min_tasks=min_tasks,
        alpha=alpha,
        limit=limit,
    )
    return [f.text for f in found]


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


EVIDENCE = re.compile(r"\s*\((?:\d+/\d+ failures|\d+×)\)$")
"""The evidence a stored pitfall ends with: `(3/7 failures)` (`Finding.text`) or `(4×)`
(`standalone_pitfalls`)."""


def pitfall_statement(text: str) -> str:
    """A stored pitfall without its evidence: what the failed runs did."""
    return EVIDENCE.sub("", text)
