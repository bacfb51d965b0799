"""Real agents' noise: the steps of a run that do the work (pure).

A real agent's run holds more than its routine: steps another actor took, turns of
conversation, calls that failed, look-ups of the wrong thing. `working_steps` keeps the steps
that do the work; the rule inducer groups runs into variants and builds templates from them,
while pitfalls keep seeing the raw runs (a failure is what they are made of). Each rule reads
what a step did from the step and the run around it, never from a data set's action names;
docs/induction.md ("Real agents' noise") gives the reasons and the measurements, including
why repeated identical look-ups are left to the consensus of a variant's runs instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from flowmem.induction.abstract.segments import is_read
from flowmem.induction.literals import MIN_CHARS, scalars
from flowmem.models import Step, Trajectory

__all__ = [
    "ACTOR_KEYS",
    "MESSAGE_ARGS",
    "SELF_NAMES",
    "corrected_calls",
    "dead_ends",
    "failed_calls",
    "is_message",
    "other_actors",
    "working_steps",
]

_WORD = re.compile(r"[^\W\d_]+")
_NUMBER = re.compile(r"\d+")

ACTOR_KEYS = ("actor", "role")
"""Step fields that name who took a step (the interchange keeps them in `Step.meta`)."""
SELF_NAMES = frozenset({"assistant", "agent"})
"""What logs call the agent itself besides the run's `agent`: the chat APIs' role for the
model's own turns, and the default role of flowmem and most interchange formats."""
MESSAGE_ARGS = frozenset({"content"})
"""The only argument of a turn of conversation recorded as a step: chat APIs (and tau-bench's
`respond` action) carry a message's text under `content`; a tool call has its parameters."""


def _actor(step: Step) -> str | None:
    for key in ACTOR_KEYS:
        value = step.meta.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().lower()
    return None


def other_actors(run: Trajectory) -> set[int]:
    """Positions of the steps another actor took (a user, a tool, another agent): steps that
    name an actor other than the run's agent. When no step names the agent itself (the run's
    `agent` or one of `SELF_NAMES`), the log does not say which actor is the agent: none."""
    own = SELF_NAMES | {run.agent.strip().lower()}
    actors = [_actor(s) for s in run.steps]
    if not own.intersection(actors):
        return set()
    return {i for i, actor in enumerate(actors) if actor is not None and actor not in own}


def is_message(step: Step) -> bool:
    """Whether the step is a turn of conversation rather than a tool call: its only argument
    is text under `content` (`MESSAGE_ARGS`)."""
    return set(step.args) == MESSAGE_ARGS and all(isinstance(v, str) for v in step.args.values())


def failed_calls(steps: Sequence[Step]) -> set[int]:
    """Positions of the calls that failed, retried or not: a tool error changes nothing, and
    the routine is the call that worked (the retry after looking an address up) or the other
    way the run took. When every call failed, none: nothing else says what the run did.

    (Dropping searches that found nothing and were retried was tried too: on WorkBench it cost
    utility, 0.914 -> 0.872, as its agents' "nothing found" searches are often informative.)"""
    failed = {i for i, s in enumerate(steps) if s.error is not None}
    return failed if len(failed) < len(steps) else set()


def _values(value: object) -> set[str]:
    return {v.lower() for v in scalars(value) if len(v) >= MIN_CHARS}


def _used(steps: Sequence[Step], i: int) -> bool:
    """Whether a later step passes on a value look-up `i` was given or returned."""
    named, seen = _values(steps[i].args), (steps[i].observation or "").lower()
    return any(named & (wanted := _values(s.args)) or any(v in seen for v in wanted) for s in steps[i + 1 :])


def _offered(steps: Sequence[Step], i: int) -> bool:
    """Whether an earlier answer of the run offered one of look-up `i`'s argument values (it
    checks a candidate the run found, rather than a guess)."""
    named = _values(steps[i].args)
    return any(v in (s.observation or "").lower() for s in steps[:i] for v in named)


def dead_ends(steps: Sequence[Step]) -> set[int]:
    """Positions of look-ups of the wrong thing: a look-up (`segments.is_read`) that answered,
    whose arguments no earlier answer offered (a guess, or a value the user gave wrong), none
    of whose values a later step passes on, and which is followed, before the next change, by
    a call of the same look-up whose values are passed on (the agent looked up the wrong
    thing, then the right one). A look-up of a candidate an earlier answer listed (one order
    of a customer's orders after another) is kept: that it did not match informed the choice,
    which no value shows."""
    out: set[int] = set()
    for i, step in enumerate(steps):
        answered = step.error is None and step.observation is not None
        if not answered or not is_read(step.action) or _offered(steps, i) or _used(steps, i):
            continue
        for later in range(i + 1, len(steps)):
            if not is_read(steps[later].action):
                break
            if steps[later].action == step.action and steps[later].error is None and _used(steps, later):
                out.add(i)
                break
    return out


def _learned(value: object, told: str) -> bool:
    """Whether an argument value is one the run was told: each of its values of at least
    `MIN_CHARS` characters is in `told` (lower-cased answers), and it has one."""
    found = _values(value)
    return bool(found) and all(v in told for v in found)


def _shape(answer: str | None) -> str:
    """What kind of answer a call got, its values left out: a JSON object's keys, a JSON
    list, otherwise the text with every word written `a` and every number `9` (an id, "Email
    sent.", "Assignee email not valid. Please choose from ..." are three shapes; two ids, or
    one message about two things, are one)."""
    text = (answer or "").strip()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return "{" + ",".join(sorted(map(str, value))) + "}"
    if isinstance(value, list):
        return "["
    return _NUMBER.sub("9", _WORD.sub("a", text))


def corrected_calls(steps: Sequence[Step]) -> set[int]:
    """Positions of calls the run made again corrected, where the log does not mark them as
    failed: a call that is not a look-up (`segments.is_read`), whose next call of the same
    action passes the same argument keys, changes fewer of their values than it keeps, each
    changed one a value the run was told since (in the first call's answer, or in an answer
    before the retry: the valid choices an error listed, the address a look-up found), and got
    an answer of another shape (`_shape`: an error's message, then an id). The routine is the
    corrected call. A call made again on another thing (another order, with values an answer
    gave too) changes more, or is answered alike, and is kept."""
    out: set[int] = set()
    for i, step in enumerate(steps):
        if is_read(step.action):
            continue
        j = next((j for j in range(i + 1, len(steps)) if steps[j].action == step.action), None)
        if j is None or set(steps[j].args) != set(step.args):
            continue
        changed = [k for k in step.args if steps[j].args[k] != step.args[k]]
        if not changed or 2 * len(changed) >= len(step.args):
            continue
        if _shape(step.observation) == _shape(steps[j].observation):
            continue
        told = " ".join((s.observation or "").lower() for s in steps[i:j])
        if all(_learned(steps[j].args[k], told) for k in changed):
            out.add(i)
    return out


def working_steps(run: Trajectory) -> Trajectory:
    """The run with only the steps that do the work: without the steps of other actors
    (`other_actors`), turns of conversation (`is_message`), failed calls (`failed_calls`),
    calls made again corrected (`corrected_calls`) and dead-end look-ups (`dead_ends`),
    decided in that order. The run itself when nothing is left out; a run with no step left
    has no steps."""
    others = other_actors(run)
    steps = [s for i, s in enumerate(run.steps) if i not in others and not is_message(s)]
    for rule in (failed_calls, corrected_calls, dead_ends):
        drop = rule(steps)
        steps = [s for i, s in enumerate(steps) if i not in drop]
    return run if len(steps) == len(run.steps) else run.model_copy(update={"steps": steps})
