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
from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from math import comb
from typing import Literal, NamedTuple

from flowmem.induction.injection import DESTINATION, looks_like_injection
from flowmem.induction.literals import find_literals, mask
from flowmem.induction.pitfalls.conditions import Key, arg_values, condition_of, met, observed
from flowmem.models import PROCEDURE, Pitfall, Trajectory
from flowmem.retrieval.align import lcs_pairs

__all__ = [
    "EVIDENCE",
    "FALSE_ALARMS",
    "Checked",
    "ClusterPitfalls",
    "Contrast",
    "checked_findings",
    "checked_pitfalls",
    "IGNORED",
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


def _clean_error(text: str, literals: AbstractSet[str]) -> str:
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
    message = _clean_error(error, literals)
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


# Pitfalls that can be checked: conditions over a run's steps that failed runs meet and
# successful runs rarely do (`induction.pitfalls.conditions`).

FALSE_ALARMS = 0.05
"""The share of a cluster's successful runs on which a workflow's checked pitfalls, together,
may hold: a warning says "this run is going the way failed runs went", and is allowed to be
wrong about one good run in twenty, the error rate a test of significance conventionally
allows (an agent warned on more of its good runs learns to ignore the warnings)."""

_SIMPLER: dict[str, int] = {
    "does": 0,
    "skips": 1,
    "missing_arg": 2,
    "fails": 3,
    "before": 4,
    "after_failed": 5,
    "unseen_arg": 6,
}
"""Among conditions that separate the runs equally well, the simpler kind first (a condition
that names fewer things holds on new runs for the reason it held on the old ones)."""


class Checked(NamedTuple):
    """A condition that failed runs of a cluster meet, with its evidence."""

    key: Key
    """The condition (`conditions.Key`)."""
    failed: frozenset[int]
    """The failed runs (positions) that meet it."""
    ok: frozenset[int]
    """The successful runs (positions) that meet it."""
    p: float
    """One-sided Fisher's exact test of failed vs successful runs meeting it (a tie-break)."""

    def order(self) -> tuple[int, int, float, tuple[str, str, str, str, int]]:
        """Its place among candidates that meet as many new failed runs: fewer successful runs
        first, then the simpler kind (a `skips` that holds before the run ends ahead of one
        that holds at its end), the lower p-value, and the condition itself (a total order)."""
        k = self.key
        end_only = k.kind == "skips" and k.other is None
        simple = _SIMPLER[k.kind] + (len(_SIMPLER) if end_only else 0)
        return len(self.ok), simple, self.p, (k.kind, k.action, k.other or "", k.arg or "", k.times)


def _vocabulary(runs: Sequence[Trajectory]) -> tuple[list[str], dict[str, list[str]]]:
    """The actions the runs call, and the argument names each takes in them (sorted)."""
    actions = sorted({s.action for t in runs for s in t.steps})
    args: dict[str, set[str]] = {}
    for t in runs:
        for s in t.steps:
            args.setdefault(s.action, set()).update(s.args)
    return actions, {a: sorted(names) for a, names in args.items()}


def _sources(successes: Sequence[Trajectory]) -> set[tuple[str, str, str]]:
    """(X, argument, Y): where the successful runs take an argument of X from, the action Y
    whose earlier results show its value in more than half of the successful runs that call X
    with it. `unseen_arg` over Y's results is a pitfall only there: a value that is not in
    the results of an action it never comes from says nothing."""
    calls: Counter[tuple[str, str]] = Counter()
    shown: Counter[tuple[str, str, str]] = Counter()
    for run in successes:
        if not observed(run):
            continue
        texts: dict[str, list[str]] = {}
        seen_calls: set[tuple[str, str]] = set()
        seen_shown: set[tuple[str, str, str]] = set()
        for s in run.steps:
            for name, value in s.args.items():
                values = list(arg_values(value))
                if not values:
                    continue
                seen_calls.add((s.action, name))
                for y, ys in texts.items():
                    if all(any(v in t for t in ys) for v in values):
                        seen_shown.add((s.action, name, y))
            texts.setdefault(s.action, []).append((s.observation or "").lower())
        calls.update(seen_calls)
        shown.update(seen_shown)
    return {k for k, n in shown.items() if n > calls[k[:2]] / 2}


def _met_by(
    successes: Sequence[Trajectory], failures: Sequence[Trajectory]
) -> tuple[dict[Key, set[int]], dict[Key, set[int]]]:
    """Each condition the failed runs meet, with the failed runs (positions) that meet it, and
    the successful runs that meet each of those. An `unseen_arg` over one action's results
    counts only where the successful runs take the value from there (`_sources`)."""
    actions, args = _vocabulary([*successes, *failures])
    sources = _sources(successes)
    by_key: dict[Key, set[int]] = {}
    for i, t in enumerate(failures):
        for k in met(t, actions, args):
            if k.kind != "unseen_arg" or k.other is None or (k.action, k.arg, k.other) in sources:
                by_key.setdefault(k, set()).add(i)
    ok_by_key: dict[Key, set[int]] = {}
    for i, t in enumerate(successes):
        for k in met(t, actions, args) & by_key.keys():
            ok_by_key.setdefault(k, set()).add(i)
    return by_key, ok_by_key


def _candidates(
    successes: Sequence[Trajectory],
    failures: Sequence[Trajectory],
    *,
    min_support: int,
    min_tasks: int,
    false_alarms: float,
) -> list[Checked]:
    """Every condition that at least `min_support` failed runs of `min_tasks` tasks meet (or a
    failure written down by hand that no successful run meets), that more of the failed runs
    than of the successful ones meet, and no more than `false_alarms` of the successful runs.
    `unseen_arg` is counted among the runs that recorded results only (`conditions.observed`),
    and over one action's results only where successful runs take the value from there."""
    by_key, ok_by_key = _met_by(successes, failures)
    seen_ok = sum(observed(t) for t in successes)
    seen_failed = sum(observed(t) for t in failures)
    out: list[Checked] = []
    for k, runs in by_key.items():
        ok = ok_by_key.get(k, set())
        n_ok, n_failed = (seen_ok, seen_failed) if k.kind == "unseen_arg" else (len(successes), len(failures))
        if len(ok) > false_alarms * n_ok or len(runs) * n_ok <= len(ok) * n_failed:
            continue
        told = any(failures[i].source == PROCEDURE for i in runs) and not ok
        shown = len(runs) >= min_support and len({failures[i].task for i in runs}) >= min_tasks
        if told or shown:
            out.append(
                Checked(
                    k, frozenset(runs), frozenset(ok), one_sided_fisher(len(runs), n_failed, len(ok), n_ok)
                )
            )
    return out


def checked_findings(
    successes: Sequence[Trajectory],
    failures: Sequence[Trajectory],
    literals: AbstractSet[str],
    *,
    min_support: int = 2,
    min_tasks: int = 2,
    false_alarms: float = FALSE_ALARMS,
    limit: int = 3,
    own: Collection[str] = (),
) -> list[Checked]:
    """The conditions that tell a cluster's failed runs from its successful ones, chosen to
    meet as many failed runs as possible while, together, they hold on at most
    `false_alarms` of the successful runs: each next one the candidate (`_candidates`) that
    meets the most failed runs not met yet, then `Checked.order`; at most `limit`, none whose
    text names an example's value.

    Contrasted are whole runs, not their alignment to one workflow: what only failed runs do
    (`does`, `fails`, `after_failed`), what they leave out or do too early (`skips`,
    `before`), and how they call an action the successful runs call too (`missing_arg`,
    `unseen_arg`: many failures call the right actions with the wrong arguments).
    `successes` should be every successful run of the cluster. Two failed runs of two tasks
    are the least that is a pattern rather than one run's accident; a failure written down
    by hand (`add_workflow`, source `PROCEDURE`) is a lesson on its own (see `findings`).
    No test of significance: a cluster with one successful run and forty failed ones can pass
    none, yet it is where a warning is most often right; the false-alarm budget bounds the
    harm instead. `own`: the ids of the successful runs the workflow was made of (a
    variant's); a condition that holds on half of them or more is none of its pitfalls: its
    own steps would meet it ("called create_event without calling total_visits_count" of a
    variant that creates the event without that count)."""
    contrast = Contrast.of(
        successes, failures, literals, min_support=min_support, min_tasks=min_tasks, false_alarms=false_alarms
    )
    return contrast.chosen(limit=limit, own=own)


@dataclass(frozen=True)
class Contrast:
    """A cluster's candidate conditions (`_candidates`, none that names an example value),
    worked out once for all its variants; each variant chooses among them (`chosen`)."""

    ok_runs: list[Trajectory]
    """The successful runs, once each."""
    failed_runs: list[Trajectory]
    """The failed runs, once each."""
    found: list[Checked]
    """The candidates."""
    false_alarms: float
    """The share of `ok_runs` the chosen conditions may hold on, together."""

    @classmethod
    def of(
        cls,
        successes: Sequence[Trajectory],
        failures: Sequence[Trajectory],
        literals: AbstractSet[str],
        *,
        min_support: int = 2,
        min_tasks: int = 2,
        false_alarms: float = FALSE_ALARMS,
    ) -> Contrast:
        failed_runs = list({t.id: t for t in failures}.values())
        ok_runs = list({t.id: t for t in successes}.values())
        found: list[Checked] = []
        if failed_runs:
            found = _candidates(
                ok_runs, failed_runs, min_support=min_support, min_tasks=min_tasks, false_alarms=false_alarms
            )
            found = [c for c in found if not find_literals(condition_of(c.key).says(), literals)]
        return cls(ok_runs, failed_runs, found, false_alarms)

    def chosen(self, *, limit: int = 3, own: Collection[str] = ()) -> list[Checked]:
        """The conditions `checked_findings` chooses, for the variant made of the runs `own`."""
        found = self.found
        mine = frozenset(i for i, t in enumerate(self.ok_runs) if t.id in own)
        if mine:
            found = [c for c in found if len(c.ok & mine) * 2 < len(mine)]
        chosen: list[Checked] = []
        covered: set[int] = set()
        alarms: set[int] = set()
        budget = self.false_alarms * len(self.ok_runs)
        while len(chosen) < limit:
            fits = [c for c in found if c.failed - covered and len(alarms | c.ok) <= budget]
            if not fits:
                break
            best = min(fits, key=lambda c: (-len(c.failed - covered), c.order()))
            chosen.append(best)
            covered |= best.failed
            alarms |= best.ok
        return chosen


@dataclass(frozen=True)
class ClusterPitfalls:
    """A cluster's contrast as `checked_pitfalls` reads it, worked out once for all its
    variants (`of`); each variant's pitfalls are `pitfalls(own=...)`."""

    contrast: Contrast
    within: frozenset[str]
    """The actions the cluster's runs call (`Condition.within`)."""
    literals: AbstractSet[str]
    """The cluster's example values."""

    @classmethod
    def of(
        cls,
        successes: Sequence[Trajectory],
        failures: Sequence[Trajectory],
        literals: AbstractSet[str],
        *,
        false_alarms: float = FALSE_ALARMS,
        served_to: Sequence[Trajectory] = (),
    ) -> ClusterPitfalls:
        within = frozenset(s.action for t in [*successes, *failures] for s in t.steps)
        others = [t for t in served_to if t.steps and {s.action for s in t.steps} <= within]
        contrast = Contrast.of([*successes, *others], failures, literals, false_alarms=false_alarms)
        return cls(contrast, within, literals)

    def pitfalls(self, *, limit: int = 3, own: Collection[str] = ()) -> list[Pitfall]:
        """The pitfalls of the variant made of the runs `own` (see `checked_pitfalls`)."""
        failed_runs = self.contrast.failed_runs
        out = []
        for c in self.contrast.chosen(limit=limit, own=own):
            condition = condition_of(c.key, self.within)
            said = condition.says()
            if c.key.kind == "fails":
                message = _shared_error(
                    c.key.action, [failed_runs[i] for i in sorted(c.failed)], self.literals
                )
                said += f": {message}" if message else ""
            out.append(
                Pitfall(text=f"{said} ({len(c.failed)}/{len(failed_runs)} failures)", condition=condition)
            )
        return out


def checked_pitfalls(
    successes: Sequence[Trajectory],
    failures: Sequence[Trajectory],
    literals: AbstractSet[str],
    *,
    limit: int = 3,
    false_alarms: float = FALSE_ALARMS,
    served_to: Sequence[Trajectory] = (),
    own: Collection[str] = (),
) -> list[Pitfall]:
    """`checked_findings` as the pitfalls a workflow stores: the condition's text with its
    evidence, `(n/m failures)`; each condition holds only for runs that call no action other
    than the cluster's runs call (`Condition.within`): a run that does is doing another kind
    of task, about which the cluster's failures say nothing. `served_to`: successful runs of
    other tasks the workflow is served to; those within that scope count as successful runs
    (a warning that holds on them is a false alarm where it is served). `own`: the ids of
    the successful runs the workflow was made of (`checked_findings`). The variants of one
    cluster share its contrast: `ClusterPitfalls.of` once, then `pitfalls` for each."""
    cluster = ClusterPitfalls.of(
        successes, failures, literals, false_alarms=false_alarms, served_to=served_to
    )
    return cluster.pitfalls(limit=limit, own=own)


def _shared_error(action: str, runs: Sequence[Trajectory], literals: AbstractSet[str]) -> str:
    """The error message (`_clean_error`: first line, example values masked) that the first
    failed call of `action` returned in most of `runs`, two of them at least: what the tool
    said was wrong, as a pitfall tells it ("Non-delivered order cannot be exchanged"); "" when
    they differ, or when any reads like an instruction (data, never advice)."""
    messages: Counter[str] = Counter()
    for run in runs:
        error = next((st.error for st in run.steps if st.action == action and st.error), None)
        if error is None:
            continue
        if looks_like_injection(error):
            return ""
        messages[_clean_error(error, literals)] += 1
    if not messages:
        return ""
    message, n = messages.most_common(1)[0]
    return (
        message if message and n >= 2 and n * 2 >= len(runs) and not find_literals(message, literals) else ""
    )
