"""Loops: repeated work in a run folded into one step that says it repeats (pure).

An agent that cancels three reservations calls `cancel_reservation` three times; one that
checks each of a customer's orders reads, then updates, once per order. What it did is one
step (or one short body of steps) done once per item: the count is the example's, not the
routine's. `fold` turns every such repeat of a run into one *loop unit*, a single `Step`
whose action is the body's signature (`signature`) and whose `meta` holds the iterations, so
that the inducer's alignment, variants, medoid and consensus treat "did it three times" and
"did it five times" as the same thing done. `abstract.abstract_runs` then abstracts a loop
unit's iterations into body steps carrying one `Repeat`, one placeholder per role.

Why these rules hold for any agent's runs (docs/induction.md, "Loops"):
- A body is at most `MAX_BODY` steps: per item a look-up and a change, or a change and a
  check. A longer period is a repeated task, not a loop within one.
- Two consecutive occurrences make a repeat: a count of two is already a count the next task
  need not share.
- Iterations whose arguments are all alike are one step done again (a retry), kept once; so
  are look-ups whose earlier passes nothing after them uses while the last one feeds what
  follows (a search refined until it found: `_refined`).
- A body one run repeats is a loop wherever the cluster's runs take it, once or more: the run
  that did it once did it for one item (`fold` with the cluster's `bodies`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence

from flowmem.induction.abstract.segments import is_read
from flowmem.induction.literals import MIN_CHARS, scalars
from flowmem.models import Step, Trajectory

__all__ = [
    "ITERATIONS",
    "LOOP_MARK",
    "MAX_BODY",
    "body_of",
    "decoded",
    "encoded",
    "flat_steps",
    "fold",
    "folded",
    "is_loop",
    "iterations",
    "repeated_bodies",
    "signature",
    "unfolded_actions",
]

MAX_BODY = 3
"""The longest body a loop is found with (see the module docstring)."""

LOOP_MARK = "\u21bb "
"""What a loop unit's action starts with (no tool name does: it is not a word character)."""

ITERATIONS = "flowmem_iterations"
"""The `Step.meta` key of a loop unit holding its iterations, each a tuple of body steps (one
per body position; None where that iteration skipped the position)."""

Iteration = tuple[Step | None, ...]
"""One pass through a loop's body: its step at each body position, or None where skipped."""

_SEP = " + "


def signature(body: Sequence[str]) -> str:
    """The action of a loop unit whose body calls these actions."""
    return LOOP_MARK + _SEP.join(body)


def is_loop(step: Step) -> bool:
    """Whether a (folded) step is a loop unit."""
    return step.action.startswith(LOOP_MARK)


def body_of(action: str) -> tuple[str, ...]:
    """A loop unit's body actions from its action (`signature`'s inverse); a plain action is
    its own one-step body."""
    if not action.startswith(LOOP_MARK):
        return (action,)
    return tuple(action[len(LOOP_MARK) :].split(_SEP))


def iterations(step: Step) -> list[Iteration]:
    """A loop unit's iterations; a plain step is one iteration of itself."""
    found = step.meta.get(ITERATIONS)
    return list(found) if found is not None else [(step,)]


def _period(actions: Sequence[str], i: int, p: int) -> int:
    """How many times `actions[i:i+p]` occurs back to back from `i`."""
    body = list(actions[i : i + p])
    k = 1
    while actions[i + k * p : i + (k + 1) * p] == body:
        k += 1
    return k


def _repeat_at(actions: Sequence[str], i: int) -> tuple[int, int] | None:
    """The body length and count of the longest repeat starting at `i` (two or more
    occurrences; on a tie of steps covered the shorter body), if any."""
    best: tuple[int, int] | None = None
    for p in range(1, MAX_BODY + 1):
        if i + 2 * p > len(actions):
            break
        k = _period(actions, i, p)
        if k >= 2 and (best is None or k * p > best[0] * best[1]):
            best = (p, k)
    return best


def _canon(step: Step) -> str:
    return json.dumps(step.args, sort_keys=True, ensure_ascii=False, default=str)


def repeated_bodies(runs: Iterable[Trajectory]) -> set[tuple[str, ...]]:
    """The bodies some run repeats with arguments that vary, not as a search refined (a
    loop there)."""
    found: set[tuple[str, ...]] = set()
    for run in runs:
        actions = run.actions
        i = 0
        while i < len(actions):
            hit = _repeat_at(actions, i)
            if hit is None:
                i += 1
                continue
            p, k = hit
            chunks = [run.steps[i + j * p : i + (j + 1) * p] for j in range(k)]
            alike = len({tuple(_canon(s) for s in c) for c in chunks}) == 1
            if not alike and not _refined(chunks, run.steps[i + p * k :]):
                found.add(tuple(actions[i : i + p]))
            i += p * k
    return found


def _known_at(actions: Sequence[str], i: int, bodies: Iterable[tuple[str, ...]]) -> tuple[int, int] | None:
    """The longest known body occurring at `i` (once or more), with its count."""
    best: tuple[int, int] | None = None
    for body in bodies:
        p = len(body)
        if tuple(actions[i : i + p]) == body:
            k = _period(actions, i, p)
            if best is None or k * p > best[0] * best[1]:
                best = (p, k)
    return best


def _values(step: Step) -> set[str]:
    return {v.lower() for v in scalars(step.args) if len(v) >= MIN_CHARS}


def _feeds(chunk: Sequence[Step], later: Sequence[Step]) -> bool:
    """Whether a later step passes on a value a pass of a body was given or returned."""
    given = set().union(*(_values(s) for s in chunk))
    seen = " ".join((s.observation or "") for s in chunk).lower()
    return any(given & (wanted := _values(s)) or any(v in seen for v in wanted) for s in later)


def _refined(chunks: Sequence[Sequence[Step]], later: Sequence[Step]) -> bool:
    """Whether repeated look-ups are one search refined rather than a pass per item: a body
    that only looks things up (`segments.is_read`), whose earlier passes nothing after the
    repeat uses while the last one feeds what follows (the query reworded until it found)."""
    if not all(is_read(s.action) for s in chunks[0]):
        return False
    return _feeds(chunks[-1], later) and not any(_feeds(c, later) for c in chunks[:-1])


def _unit(steps: Sequence[Step], p: int, k: int, later: Sequence[Step] = ()) -> list[Step]:
    """`k` iterations of a `p`-step body as one loop unit; iterations alike in every argument
    (a call done again), or look-ups refined until one answered (`_refined`), as the body
    once: the last try, the one the run went on from."""
    chunks: list[Iteration] = [tuple(steps[j * p : (j + 1) * p]) for j in range(k)]
    distinct = {tuple(_canon(s) for s in chunk if s is not None) for chunk in chunks}
    done = [[s for s in chunk if s is not None] for chunk in chunks]
    if k > 1 and (len(distinct) == 1 or _refined(done, later)):
        return done[-1]
    action = signature([s.action for s in steps[:p]])
    return [Step(action=action, meta={ITERATIONS: chunks})]


def _split(body: Sequence[str], steps: Sequence[Step]) -> list[Iteration] | None:
    """Steps that only call actions of a loop's body, as iterations of it: a new one starts
    where a step cannot follow the last in the body's order. None if a step is not of it."""
    out: list[list[Step | None]] = []
    last = len(body)
    for step in steps:
        if step.action not in body:
            return None
        b = body.index(step.action)
        if not out or b <= last:
            out.append([None] * len(body))
        out[-1][b], last = step, b
    return [tuple(chunk) for chunk in out]


def _absorbed(units: list[Step]) -> list[Step]:
    """Each loop unit with the units right after it that only call its body's actions (an
    iteration that skipped a step, another loop over part of the body) as more iterations:
    one loop, not a loop and its remainders unrolled beside it."""
    out: list[Step] = []
    for unit in units:
        prev = out[-1] if out else None
        if prev is not None and is_loop(prev):
            body = body_of(prev.action)
            more = _split(body, list(flat_steps([unit])))
            if more is not None:
                out[-1] = prev.model_copy(update={"meta": {ITERATIONS: [*iterations(prev), *more]}})
                continue
        out.append(unit)
    return out


def fold(run: Trajectory, bodies: Iterable[tuple[str, ...]] = ()) -> Trajectory:
    """The run with each repeat of a step or short body (`MAX_BODY`) as one loop unit, and
    each occurrence of one of `bodies` too, even once (see the module docstring)."""
    known = sorted(set(bodies), key=lambda b: (-len(b), b))
    actions = run.actions
    out: list[Step] = []
    i = 0
    while i < len(actions):
        hits = [h for h in (_known_at(actions, i, known), _repeat_at(actions, i)) if h is not None]
        hit = max(hits, key=lambda h: h[0] * h[1]) if hits else None
        if hit is None:
            out.append(run.steps[i])
            i += 1
            continue
        p, k = hit
        out += _unit(run.steps[i : i + p * k], p, k, run.steps[i + p * k :])
        i += p * k
    out = _absorbed(out)
    if len(out) == len(run.steps) and not any(is_loop(s) for s in out):
        return run
    return run.model_copy(update={"steps": out})


def folded(runs: Sequence[Trajectory]) -> list[Trajectory]:
    """Every run folded (`fold`) with the bodies any of them repeats (`repeated_bodies`)."""
    bodies = repeated_bodies(runs)
    return [fold(run, bodies) for run in runs]


def unfolded_actions(actions: Sequence[str]) -> list[str]:
    """Folded actions with each loop unit as its body once."""
    return [a for action in actions for a in body_of(action)]


def flat_steps(steps: Sequence[Step]) -> Iterator[Step]:
    """The raw steps of folded steps, each loop unit's iterations in order."""
    for step in steps:
        for chunk in iterations(step):
            yield from (s for s in chunk if s is not None)


def encoded(pattern: Sequence[str | tuple[str, ...]]) -> list[str]:
    """A pattern (`Workflow.pattern`) as action names, each loop as its unit's action
    (`signature`): how the store keeps a workflow's actions."""
    return [item if isinstance(item, str) else signature(item) for item in pattern]


def decoded(actions: Sequence[str]) -> list[str | tuple[str, ...]]:
    """The pattern `encoded` wrote."""
    return [body_of(a) if a.startswith(LOOP_MARK) else a for a in actions]
