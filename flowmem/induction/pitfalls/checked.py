"""Pitfalls that can be checked: conditions over a run's steps (`pitfalls.conditions`) that a
cluster's failed runs meet and its successful runs rarely do, found by contrasting whole runs
(not their alignment to one workflow, `pitfalls.failures`), chosen within a false-alarm
budget, and stored with the workflow as `Pitfall`s whose condition warns an agent while it
works.

A cluster's candidates are worked out once (`Contrast`, `ClusterPitfalls`) for all its
variants, each of which chooses among them (a condition that half of its own runs meet is
none of its pitfalls).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import NamedTuple

from flowmem.induction.injection import looks_like_injection
from flowmem.induction.literals import find_literals
from flowmem.induction.pitfalls.conditions import Key, arg_values, condition_of, met, observed
from flowmem.induction.pitfalls.failures import clean_error, one_sided_fisher
from flowmem.models import PROCEDURE, Pitfall, Trajectory

__all__ = [
    "FALSE_ALARMS",
    "Checked",
    "ClusterPitfalls",
    "Contrast",
    "checked_findings",
    "checked_pitfalls",
]


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
    """The error message (`clean_error`: first line, example values masked) that the first
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
        messages[clean_error(error, literals)] += 1
    if not messages:
        return ""
    message, n = messages.most_common(1)[0]
    return (
        message if message and n >= 2 and n * 2 >= len(runs) and not find_literals(message, literals) else ""
    )
