"""Abstraction: turn aligned example runs into steps with `{placeholders}`.

An argument value that varies across the examples, that is example-specific (rare in the
corpus), or that appears in the task text becomes a named placeholder; a value constant
across the examples and common in the corpus stays literal.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from flowmem.induction.abstract.loops import body_of, is_loop, iterations
from flowmem.induction.abstract.segments import READ_VERBS, is_read
from flowmem.induction.literals import MIN_CHARS, LiteralIndex, canonical, find_literals, in_task, scalars
from flowmem.models import Repeat, Step, Trajectory, WorkflowStep, placeholders_in
from flowmem.policy.scrub import MASKS
from flowmem.retrieval.align import lcs_pairs

__all__ = ["Abstraction", "abstract_runs", "fresh_name"]

_NAME = re.compile(r"[^a-z0-9_]+")
_DATED = re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d{1,2}:\d{2}\b")
"""A calendar date or a time of day: it says when a run happened or what it asked for, so a
routine never calls a tool with one fixed (runs of one day can all share it)."""


@dataclass(frozen=True)
class Abstraction:
    """Abstract steps and what their placeholders stand for."""

    steps: list[WorkflowStep]
    """The steps, with `{placeholders}` for example-specific values."""
    parameters: dict[str, str]
    """Placeholder -> where its value comes from."""
    values: dict[str, dict[int, str]]
    """Placeholder -> example index -> the value it stood for (never rendered)."""
    choices: dict[str, list[str]]
    """Placeholder -> its observed values, when they are a few common ones
    (`LiteralIndex.choices`): rendered with the placeholder."""


def _masked(text: str) -> bool:
    """Whether the scrubber masked part of a value: a mask is never a workflow's constant
    (every run's secret reads `[SECRET]` alike, yet each run had its own)."""
    return any(mask in text for mask in MASKS.values())


def _slug(key: str) -> str:
    name = _NAME.sub("_", key.lower()).strip("_") or "value"
    return name if not name[0].isdigit() else f"v_{name}"


EARLIER = "result of an earlier step"
"""The source of a value no recorded answer shows and the task does not name, in runs that
recorded no answer before it (`_source`)."""

Where = tuple[int, int]
"""An occurrence of a step in the example runs: (run index, iteration of a loop: 0 outside one)."""


@dataclass(frozen=True)
class _Runs:
    """The example runs, folded (`loops.fold`), with each step's raw position."""

    runs: Sequence[Trajectory]
    flat: list[list[Step]]
    """Each run's raw steps (a loop unit's iterations in order)."""
    starts: list[list[list[list[int]]]]
    """Run -> folded position -> iteration -> body position -> its raw position (-1: skipped)."""

    @classmethod
    def of(cls, runs: Sequence[Trajectory]) -> _Runs:
        flat: list[list[Step]] = []
        starts: list[list[list[list[int]]]] = []
        for run in runs:
            raw: list[Step] = []
            at: list[list[list[int]]] = []
            for step in run.steps:
                places: list[list[int]] = []
                for chunk in iterations(step):
                    places.append([])
                    for s in chunk:
                        places[-1].append(-1 if s is None else len(raw))
                        raw += [] if s is None else [s]
                at.append(places)
            flat.append(raw)
            starts.append(at)
        return cls(runs, flat, starts)


def _findable(value: Any) -> list[str]:
    """The scalars of a value to look for in a text: those of `MIN_CHARS` or more, else its
    short ones ("TX"), which `_holds` finds as whole words only."""
    texts = list(scalars(value))
    return [t for t in texts if len(t) >= MIN_CHARS] or [t for t in texts if t]


def _holds(text: str, value: str) -> bool:
    """Whether a text holds a value: anywhere, or as a token of its own for a short one,
    between quotes, spaces, brackets or commas (a state's "TX" in `"state": "TX"`, not in
    "TXN-7"; a duration's 30 in `"duration": 30`, not in "10:30" or "2023-10-30")."""
    if len(value) >= MIN_CHARS:
        return value in text
    return re.search(rf"(?<![^\s\"'\[(,=]){re.escape(value)}(?![^\s\"'\]),;}}])", text) is not None


def _echoes(step: Step, texts: Sequence[str]) -> bool:
    """Whether a step was given these values: its answer repeating them did not find them."""
    given = list(scalars(step.args))
    return all(any(_holds(a, t) for a in given) for t in texts)


_PART = re.compile(r"[^\w.@-]+")


def _part_in_task(value: Any, task: str) -> bool:
    """Whether a part of a value is in the task (`app:v2.3.1` for "Deploy v2.3.1"): the agent
    made it of the task's words."""
    lowered = task.lower()
    parts = (part for t in scalars(value) for part in _PART.split(t.lower()))
    return any(len(part) >= MIN_CHARS and part in lowered for part in parts)


def _source(seen: Mapping[Where, Any], runs: _Runs, raw_at: Mapping[Where, int]) -> str:
    """Say where the value of a placeholder comes from, without naming any value: the task, or
    the nearest earlier answer of a look-up that holds it (`_answered_by`), not counting the
    answer of a call it was passed to (`get_order_details(order_id)` answers with the order id
    it was asked for: the id came from the answer that listed it). An answer is named where
    most of the runs that recorded answers show the value in it: demonstrations that recorded
    none, beside an agent's runs that did, do not make it unknown. A value neither in the task
    nor in an answer is the task's (a date the agent read off "since October 2", an image
    named by the task's version), unless the log recorded no answer before it (the oracle set
    records none) and no part of it is in the task: then it came from `EARLIER`, which one
    unknown."""
    if sum(in_task(v, runs.runs[i].task) for (i, _), v in seen.items()) * 2 >= len(seen):
        return "task"
    hits: Counter[str] = Counter()
    unrecorded = 0
    for where, v in seen.items():
        texts = _findable(v)
        before = runs.flat[where[0]][: raw_at[where]]
        unrecorded += (
            bool(before)
            and all(step.observation is None for step in before)
            and not _part_in_task(v, runs.runs[where[0]].task)
        )
        source = _answered_by(before, texts)
        if source is not None:
            hits[source] += 1
    if hits:
        action, n = hits.most_common(1)[0]
        if n * 2 >= len(seen) - unrecorded:  # of the runs that recorded answers
            return f"result of {action}"
    return EARLIER if unrecorded * 2 > len(seen) else "task"


def _answered_by(before: Sequence[Step], texts: Sequence[str]) -> str | None:
    """The action of the nearest of `before` whose answer holds all of `texts` (not as the
    echo of its own arguments), a look-up's first: a change's answer echoes what a look-up
    gave (`modify_user_address` answers with the user's orders), unless the change made it
    (an id it created)."""
    holding = [
        step
        for step in reversed(before)
        if texts and all(_holds(step.observation or "", t) for t in texts) and not _echoes(step, texts)
    ]
    source = next((step for step in holding if is_read(step.action)), holding[0] if holding else None)
    return source.action if source is not None else None


def _seen_at(
    runs: _Runs, aligned: Sequence[dict[int, int]], pos: int, body: int, key: str
) -> tuple[dict[Where, Any], dict[Where, int]]:
    """The value of argument `key` in each run's step aligned with template position `pos`
    (body step `body` of each iteration, for a loop unit), and that step's raw position."""
    seen: dict[Where, Any] = {}
    raw_at: dict[Where, int] = {}
    for i, (run, pairs) in enumerate(zip(runs.runs, aligned, strict=True)):
        if pos not in pairs:
            continue
        at = pairs[pos]
        for it, chunk in enumerate(iterations(run.steps[at])):
            step = chunk[body] if body < len(chunk) else None
            if step is not None and key in step.args:
                seen[(i, it)] = step.args[key]
                raw_at[(i, it)] = runs.starts[i][at][it][body]
    return seen, raw_at


def _constant(
    seen: Mapping[Where, Any], runs: Sequence[Trajectory], literals: LiteralIndex, forbidden: AbstractSet[str]
) -> bool:
    """Whether an argument stays as written: the same in two occurrences or more, and nothing
    in it specific to a run (a rare literal, a value from the task, a masked secret, or any
    value the workflow must not carry: `forbidden` holds the example values of the whole
    cluster, whose other runs' tasks may name a value these runs took without naming it).
    The runs of one task (agents retrying it, or several agents on it) cannot tell the
    task's value from the procedure's: a constant is seen in runs of two task texts at least,
    unless it names the schema (a field's key passed as a value: `LiteralIndex.vocabulary`)."""
    one_task = len({runs[i].task for i, _ in seen}) < 2
    if one_task and not all(t.lower() in literals.vocabulary for v in seen.values() for t in scalars(v)):
        return False
    distinct = {canonical(v) for v in seen.values()}
    specific = any(
        literals.is_rare(t)
        or in_task(t, runs[i].task)
        or _masked(t)
        or bool(_DATED.search(t))
        or bool(find_literals(t, forbidden))
        for (i, _), v in seen.items()
        for t in scalars(v)
        if t
    )
    return len(distinct) == 1 and len(seen) >= 2 and not specific


def _same_role(a: Mapping[Where, str], b: Mapping[Where, str]) -> bool:
    """Whether two arguments play one role: the same value in every occurrence both have, and
    one's occurrences among the other's (a loop's pass that skipped a step still took the
    item), over two occurrences at least unless each has one."""
    common = a.keys() & b.keys()
    if not common or any(a[w] != b[w] for w in common):
        return False
    nested = common == a.keys() or common == b.keys()
    return nested and (len(common) >= 2 or len(a) == len(b) == 1)


def fresh_name(key: str, action: str, taken: AbstractSet[str], forbidden: AbstractSet[str]) -> str:
    """A parameter name for argument `key` of `action`: its slug; where another role took it,
    the slug after the action's verb (`{return_order_id}` beside `{order_id}`), then either
    as `other_` (a second order returned: `{other_return_order_id}`); a look-up's verb
    (`READ_VERBS`) says no role, so there `other_` comes before it (a second product looked
    up: `{other_product_id}`, a third `{get_product_id}`); a number only where all are taken.
    Never one that reads as a literal."""
    base = _slug(key)
    if find_literals("{" + base + "}", forbidden):  # a name must not read as a value
        base += "_value"
    verb = _slug(action.rsplit(".", 1)[-1]).split("_")[0]
    by_verb = f"{verb}_{base}" if verb and not base.startswith(verb) else base
    # A look-up's verb says no role (`{get_product_id}`): a second product is `other_` first.
    order = (base, f"other_{base}", by_verb) if verb in READ_VERBS else (base, by_verb, f"other_{base}")
    for name in (*order, f"other_{by_verb}"):
        if name not in taken and not find_literals("{" + name + "}", forbidden):
            return name
    name, k = base, 2
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    return name


def _choices(seen: Mapping[Where, Any], literals: LiteralIndex) -> list[str] | None:
    """The values a parameter chooses among (`LiteralIndex.choices`); none for a masked one."""
    masked = any(_masked(t) for v in seen.values() for t in scalars(v))
    return None if masked else literals.choices(seen.values())


class _Abstracting:
    """The placeholders made so far while abstracting one template (see `abstract_runs`)."""

    def __init__(self, runs: _Runs, literals: LiteralIndex, forbidden: AbstractSet[str]) -> None:
        self.runs, self.literals, self.forbidden = runs, literals, forbidden
        self.parameters: dict[str, str] = {}
        self.values: dict[str, dict[Where, str]] = {}
        self.choices: dict[str, list[str]] = {}
        self.seen: dict[str, dict[Where, Any]] = {}
        """Placeholder -> the values it stood for, as the runs had them."""

    def step(self, action: str, template: Mapping[str, Any], seen_of: Any) -> WorkflowStep:
        """One abstract step: each argument kept as written (`_constant`) or a placeholder,
        the same one wherever it took the same values in the same occurrences (one role)."""
        args: dict[str, Any] = {}
        step_choices: dict[str, list[str]] = {}
        for key, template_value in template.items():
            seen, raw_at = seen_of(key)
            if _constant(seen, self.runs.runs, self.literals, self.forbidden):
                args[key] = template_value
                continue
            keyed = {w: canonical(v) for w, v in seen.items()}
            name = next((n for n, vals in self.values.items() if _same_role(vals, keyed)), None)
            if name is None:
                name = fresh_name(key, action, self.values.keys(), self.forbidden)
                self.values[name], self.seen[name] = keyed, seen
                self.parameters[name] = _source(seen, self.runs, raw_at)
                listed = _choices(seen, self.literals)
                if listed is not None:
                    self.choices[name] = listed
            args[key] = "{" + name + "}"
            if name in self.choices:
                step_choices[name] = self.choices[name]
        return WorkflowStep(action=action, args=args, choices=step_choices)

    def loop(self, pos: int, unit: Step, aligned: Sequence[dict[int, int]]) -> list[WorkflowStep]:
        """A loop unit's body as abstract steps carrying one `Repeat` over its first placeholder;
        the body as plain steps where no run repeats it or nothing in it varies."""
        body = body_of(unit.action)
        chunks = iterations(unit)
        steps = []
        for b, action in enumerate(body):
            taken = [step for c in chunks if (step := c[b]) is not None]
            keys = dict.fromkeys(k for step in taken for k in step.args)
            template = {k: next(s.args[k] for s in taken if k in s.args) for k in keys}
            steps.append(
                self.step(action, template, lambda key, b=b: _seen_at(self.runs, aligned, pos, b, key))
            )
        repeated = any(
            len(iterations(run.steps[pairs[pos]])) > 1
            for run, pairs in zip(self.runs.runs, aligned, strict=True)
            if pos in pairs
        )
        names = placeholders_in([s.args for s in steps])
        if not repeated or not names:
            return steps
        # The item is what changes from one pass to the next; where the items come from is
        # said by what the run had before the loop began.
        over = next((n for n in names if self._varies(n)), names[0])
        seen = self.seen[over]
        begins = {w: self._begin(w[0], aligned[w[0]][pos]) for w in seen}
        repeat = Repeat(over=over, source=_source(seen, self.runs, begins))
        return [s.model_copy(update={"repeat": repeat}) for s in steps]

    def _varies(self, name: str) -> bool:
        """Whether a placeholder takes another value in another pass of the same run."""
        by_run: dict[int, set[str]] = {}
        for (i, _), v in self.values[name].items():
            by_run.setdefault(i, set()).add(v)
        return any(len(v) > 1 for v in by_run.values())

    def _begin(self, run: int, at: int) -> int:
        """The raw position where the loop unit at folded position `at` of a run begins."""
        return min(p for places in self.runs.starts[run][at] for p in places if p >= 0)


def abstract_runs(
    template: Trajectory, runs: Sequence[Trajectory], literals: LiteralIndex, forbidden: AbstractSet[str]
) -> Abstraction:
    """Abstract the template run's steps, aligning every example run to it by action LCS.
    The runs may be folded (`loops.fold`): a loop unit becomes its body's steps, repeated."""
    actions = template.actions
    aligned: list[dict[int, int]] = [dict(lcs_pairs(actions, r.actions)) for r in runs]
    state = _Abstracting(_Runs.of(runs), literals, forbidden)
    steps: list[WorkflowStep] = []
    for pos, step in enumerate(template.steps):
        if is_loop(step):
            steps += state.loop(pos, step, aligned)
            continue
        seen_of = lambda key, pos=pos: _seen_at(state.runs, aligned, pos, 0, key)  # noqa: E731
        steps.append(state.step(step.action, step.args, seen_of))
    values = {name: {i: v for (i, it), v in vals.items() if it == 0} for name, vals in state.values.items()}
    return Abstraction(steps=steps, parameters=state.parameters, values=values, choices=state.choices)
