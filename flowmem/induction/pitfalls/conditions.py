"""Checking pitfalls' conditions on a run: step by step as an agent works, or on a whole run.

A `Condition` (flowmem.models) is a pattern over a run's steps: calls X, skips X ahead of Y,
X ahead of Y, a failed X, X after a failed Y, X without an argument, X with an argument value no earlier
result shows. `Watch` checks a set of them as steps arrive, one call per step: each condition
is looked at only on the steps that can make it hold (its trigger action), so a step of an
action no condition names costs a dict look-up; results are kept only when a condition reads
them (`unseen_arg`). `holds` checks one condition on a finished run; `met` lists every
condition of a small vocabulary that a finished run meets, which is what induction contrasts
between failed and successful runs (`induction.pitfalls.checked.checked_pitfalls`).

A step failed when it has an error. An argument value is shown by a text when its text
(lowercased) is in it; values shorter than two characters, booleans and empty values are no
evidence either way and are not checked.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from flowmem.models import Condition, ConditionKind, Step, Trajectory

__all__ = ["Key", "Watch", "any_holds", "arg_values", "condition_of", "holds", "key_of", "met", "observed"]


class Key(NamedTuple):
    """A condition without its scope (`Condition.within`) as a hashable tuple: what induction
    counts (`condition_of` makes the model)."""

    kind: ConditionKind
    action: str
    other: str | None = None
    arg: str | None = None
    times: int = 1


def key_of(c: Condition) -> Key:
    """The tuple of a condition (its scope left out)."""
    return Key(c.kind, c.action, c.other, c.arg, c.times)


def condition_of(k: Key, within: Collection[str] | None = None) -> Condition:
    """The condition of a tuple, within the actions given (None: any run)."""
    scope = None if within is None else tuple(sorted(within))
    return Condition(kind=k.kind, action=k.action, other=k.other, arg=k.arg, times=k.times, within=scope)


def arg_values(value: Any) -> Iterator[str]:
    """The checkable values of an argument, as lowercased text: a string or number itself, each
    item of a list (booleans, None, short values and nested objects are not checked)."""
    items = value if isinstance(value, list | tuple) else [value]
    for v in items:
        if isinstance(v, bool) or v is None or isinstance(v, dict | list | tuple):
            continue
        text = str(v).strip().lower()
        if len(text) >= 2:
            yield text


def _text(observation: Any) -> str:
    if observation is None:
        return ""
    if isinstance(observation, str):
        return observation.lower()
    try:
        return json.dumps(observation, default=str, ensure_ascii=False).lower()
    except (TypeError, ValueError):
        return str(observation).lower()


_Check = Callable[[str, Mapping[str, Any], Any], bool]
"""A compiled condition: (action, args, error) of the call that triggers it -> whether it holds."""


def _trigger(c: Condition) -> str | None:
    """The action whose call can make a condition hold (None: the run's end)."""
    if c.kind in ("skips", "before"):
        return c.other
    return c.action


class Watch:
    """Checks conditions as a run's steps arrive. `step(...)` returns the indices (into the
    conditions given) of those that hold from this step on, each once; `end()` those that
    hold when the run ends (`skips` without a later action)."""

    def __init__(self, conditions: Sequence[Condition], task: str = "") -> None:
        self.conditions = list(conditions)
        self._on: dict[str | None, list[int]] = defaultdict(list)
        for i, c in enumerate(self.conditions):
            self._on[_trigger(c)].append(i)
        self._fired: set[int] = set()
        self._counts: dict[str, int] = {}
        self._failed: dict[str, bool] = {}  # action -> whether its latest call failed
        self._failures = any(c.kind == "after_failed" for c in self.conditions)
        # Results are kept only when a condition reads them.
        self._reads = any(c.kind == "unseen_arg" for c in self.conditions)
        self._shown: list[str] = [task.lower()] if self._reads else []
        self._shown_by: dict[str, list[str]] = defaultdict(list)
        self._results = False  # whether an earlier step recorded a result
        self._scopes = [
            (i, frozenset(c.within)) for i, c in enumerate(self.conditions) if c.within is not None
        ]
        self._left: set[int] = set()  # conditions whose kind of task the run has left
        self._checks = [self._compile(c) for c in conditions]

    def step(self, action: str, args: Mapping[str, Any] | None, observation: Any, error: Any) -> list[int]:
        """Take one step; the conditions that hold now for the first time."""
        n = self._counts[action] = self._counts.get(action, 0) + 1
        if n == 1 and self._scopes:  # a new action: has the run left a condition's kind of task?
            self._left.update(i for i, scope in self._scopes if action not in scope)
        triggered = self._on.get(action)
        found = self._held(triggered, action, args or {}, error) if triggered else []
        if self._failures:
            self._failed[action] = bool(error)
        if self._reads:
            text = _text(observation) + " " + _text(error) if error else _text(observation)
            self._shown.append(text)
            self._shown_by[action].append(text)
            self._results = self._results or observation is not None or bool(error)
        return found

    def _held(self, triggered: list[int], action: str, args: Mapping[str, Any], error: Any) -> list[int]:
        """Of the conditions this call of `action` triggers, those that hold for the first time."""
        found: list[int] = []
        for i in triggered:
            if i not in self._fired and i not in self._left and self._checks[i](action, args, error):
                self._fired.add(i)
                found.append(i)
        return found

    def end(self) -> list[int]:
        """The run ended: the conditions that hold now for the first time."""
        found = [i for i in self._on.get(None, ()) if i not in self._fired and i not in self._left]
        found = [i for i in found if self._counts.get(self.conditions[i].action, 0) == 0]
        self._fired.update(found)
        return found

    @property
    def fired(self) -> frozenset[int]:
        """Every condition that has held so far."""
        return frozenset(self._fired)

    def _compile(self, c: Condition) -> _Check:
        """What checks `c` when its trigger action is called (and counted): a function of the
        call's action, arguments and error, so a step decides without reading the model."""
        done, x = self._counts, c.action
        if c.kind == "does":
            times = c.times
            return lambda action, args, error: done[action] >= times
        if c.kind == "skips":
            return lambda action, args, error: done[action] == 1 and x not in done
        if c.kind == "before":
            return lambda action, args, error: done[action] == 1 and x in done
        if c.kind == "fails":
            return lambda action, args, error: bool(error)
        if c.kind == "after_failed":
            failed, y = self._failed, c.other or ""
            return lambda action, args, error: failed.get(y, False)
        if c.kind == "missing_arg":
            arg = c.arg
            return lambda action, args, error: arg not in args
        return lambda action, args, error: self._unseen(c, args)

    def _unseen(self, c: Condition, args: Mapping[str, Any]) -> bool:
        if c.arg is None or c.arg not in args or not self._results:
            return False  # no result recorded yet: nothing to tell a made-up value by
        texts = self._shown if c.other is None else self._shown_by.get(c.other, [])
        if c.other is not None and not texts:
            return False  # Y was not called: another condition's business (skips)
        return any(not any(v in t for t in texts) for v in arg_values(args[c.arg]))


def _feed(watch: Watch, steps: Iterable[Step]) -> set[int]:
    found: set[int] = set()
    for s in steps:
        found.update(watch.step(s.action, s.args, s.observation, s.error))
    found.update(watch.end())
    return found


def holds(condition: Condition, run: Trajectory) -> bool:
    """Whether a finished run meets a condition."""
    return any_holds([condition], run)


def any_holds(conditions: Sequence[Condition], run: Trajectory) -> bool:
    """Whether a finished run meets any of the conditions, read step by step as the hook does."""
    return bool(conditions) and bool(_feed(Watch(conditions, run.task), run.steps))


def observed(run: Trajectory) -> bool:
    """Whether a run recorded what its steps returned (without, `unseen_arg` never holds: a
    made-up value cannot be told from one the run saw)."""
    return any(s.observation is not None or s.error for s in run.steps)


def met(run: Trajectory, actions: Collection[str], args: Mapping[str, Collection[str]]) -> set[Key]:
    """Every condition over `actions` (the vocabulary: the actions a cluster's runs call) and
    `args` (action -> the argument names it takes) that the finished run meets, as keys:
    what `Watch` would find for each, computed in one pass."""
    found: set[Key] = set()
    called: set[str] = set()
    counts: dict[str, int] = defaultdict(int)
    failed: dict[str, bool] = {}
    results = False  # whether an earlier step recorded a result
    shown: list[str] = [run.task.lower()]
    shown_by: dict[str, list[str]] = defaultdict(list)
    for s in run.steps:
        x = s.action
        counts[x] += 1
        if counts[x] <= 2:
            found.add(Key("does", x, times=counts[x]))
        if counts[x] == 1:
            found.update(Key("skips", a, x) for a in actions if a not in called and a != x)
            found.update(Key("before", a, x) for a in called)
        found.update(Key("after_failed", x, y) for y, bad in failed.items() if bad)
        if s.error:
            found.add(Key("fails", x))
        found.update(Key("missing_arg", x, arg=a) for a in args.get(x, ()) if a not in s.args)
        if results:
            found.update(_unseen_keys(x, s.args, shown, shown_by))
        called.add(x)
        failed[x] = bool(s.error)
        text = _text(s.observation) + " " + _text(s.error) if s.error else _text(s.observation)
        shown.append(text)
        shown_by[x].append(text)
        results = results or s.observation is not None or bool(s.error)
    found.update(Key("skips", a) for a in actions if a not in called)
    return found


def _unseen_keys(
    action: str, args: Mapping[str, Any], shown: Sequence[str], shown_by: Mapping[str, Sequence[str]]
) -> Iterator[Key]:
    for name, value in args.items():
        values = list(arg_values(value))
        if not values:
            continue
        if any(not any(v in t for t in shown) for v in values):
            yield Key("unseen_arg", action, arg=name)
        for y, texts in shown_by.items():
            if any(not any(v in t for t in texts) for v in values):
                yield Key("unseen_arg", action, y, name)
