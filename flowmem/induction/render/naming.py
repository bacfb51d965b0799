"""Names and descriptions that tell workflows apart (pure).

Two workflows can end up with one name: variants of one cluster (`agent-c12`, `agent-c12-2`),
clusters whose tasks are worded apart but ask alike, or two agents' workflows in one
namespace. `distinct` first makes every name a short one (`describe.name_words`: at most
`MAX_NAME_WORDS` words, no counting word, no digit; an LLM's long name is cut), then gives
each workflow whose name another of its namespace shares the fewest words that say how it
differs from those, and nothing else:

- its agent (`for_mailer`), scope or kind (`as_plan`, `as_step`), the tool it ends with
  (`via_search_emails`), whether it repeats its goal (`repeatedly`), a look-up it makes
  first that the others do not (`after_find_email`, `without_find_email`), a step after its
  goal (`then_search_events`), a value it takes from the task or an argument it passes
  (`by_due_date`, `without_due_date`), its app (`in_calendar`);
- at most three such words (one or two differences), the shared name cut to leave room, so a
  name stays within five words; a difference a workflow lacks costs it no word (the others
  say it), and two that each left theirs to the other say one of their own
  (`_said_apart`); workflows those do not part (alike in all of them) take a letter by
  their content (`delete_event_variant_b`), never a count or an id.

Descriptions are told apart within an agent the same way, as a clause (`; it calls
delete_event three times`), tool names written as identifiers so that no word group of it
can read as an example's value. The result depends on the workflows only, not on their
order.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from flowmem.induction.render.describe import MAX_NAME_WORDS, goal_index, name_words, verb_phrase
from flowmem.induction.render.phrase import PREPOSITIONS
from flowmem.induction.render.render import from_task
from flowmem.models import Workflow

__all__ = ["distinct"]

Dim = tuple[str, ...]
"""What a workflow can differ in: (`kind of difference`, the key it is about, if any)."""

_KINDS = ["scope", "kind", "goal", "read", "reads", "after", "given", "args", "app", "placeholders"]
"""The kinds of difference, in the order a name says them."""

_TIERS = {
    "scope": 1,
    "kind": 1,
    "goal": 1,
    "read": 1,
    "after": 1,
    "given": 1,
    "reads": 2,
    "args": 2,
    "app": 2,
}
"""How well each kind tells a reader what differs: the first tier is tried first, then the
second; the placeholders a workflow fills (3) only when nothing else tells it apart."""

_TIMES = ["no times", "once", "twice", "three times", "four times", "five times", "six times"]
_TIMES += ["seven times", "eight times", "nine times", "ten times", "eleven times", "twelve times"]
_ORDINALS = ["second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"]
_COUNTED = re.compile(r"_\d+$")

Calls = tuple[tuple[str, int], ...]
"""Actions with how often they are called, in order of first call."""


def _tool(action: str) -> str:
    return action.rsplit(".", 1)[-1]


def _snake(action: str) -> str:
    """An action as the snake_case verb phrase a name is made of (`count_engaged_users`)."""
    return "_".join(verb_phrase(action).words)


def _times(n: int) -> str:
    return _TIMES[n] if n < len(_TIMES) else "many times"


def _calls(actions: Iterable[str]) -> Calls:
    counts = Counter(actions)
    return tuple((a, counts[a]) for a in dict.fromkeys(counts))


class _Profile:
    """What a workflow does, as values of the differences `Dim` can name."""

    def __init__(self, w: Workflow) -> None:
        steps = w.steps
        goal = goal_index(steps)
        self.goal = steps[goal].action
        self.reads = _calls(s.action for s in steps[:goal] if s.action != self.goal)
        self.after = _calls(s.action for s in steps[goal + 1 :])
        self.calls = sum(s.action == self.goal for s in steps[: goal + 1])
        self.given = {_COUNTED.sub("", p) for p, source in w.parameters.items() if from_task(source)}
        self.args: dict[str, frozenset[str]] = defaultdict(frozenset)
        for s in steps:
            self.args[s.action] |= frozenset(s.args)
        self.placeholders = tuple(sorted(set(w.placeholders)))
        self.w = w

    def dims(self) -> set[Dim]:
        out: set[Dim] = {
            ("scope",),
            ("kind",),
            ("app",),
            ("reads",),
            ("goal",),
            ("after",),
            ("placeholders",),
        }
        out |= {("read", a) for a, _ in self.reads}
        return out | {("given", k) for k in self.given} | {("args", a) for a in self.args}

    def value(self, dim: Dim) -> Hashable:
        kind = dim[0]
        if kind == "given":
            return dim[1] in self.given
        if kind == "args":
            return self.args.get(dim[1])
        if kind == "read":  # how often it looks this up before its goal
            return dict(self.reads).get(dim[1], 0)
        if kind in {"reads", "after"}:  # which, how often, in which order
            return self.reads if kind == "reads" else self.after
        return {
            "scope": self.w.scope,
            "kind": self.w.kind,
            "app": self.goal,
            "goal": self.calls,
            "placeholders": self.placeholders,
        }[kind]

    def positive(self, dim: Dim) -> bool:
        """Whether the difference says what it does rather than what it does not."""
        return bool(self.value(dim)) or dim[0] in {"scope", "kind", "app", "goal"}


def _dim_key(dim: Dim) -> tuple[int, Dim]:
    """In the order a name says them."""
    return _KINDS.index(dim[0]), dim


def _what(p: _Profile, kind: str) -> tuple[str, str]:
    """Its scope, kind, tool or goal calls as name words and a description clause."""
    if kind == "scope":
        if p.w.scope == "task":
            return "plan", "is a plan that hands its steps to other agents"
        return "own_steps", "takes the steps itself"
    if kind == "kind":
        if p.w.kind == "subroutine":
            return "as_step", "is one step of larger tasks"
        return "whole_task", "covers a whole task"
    if kind == "app":
        app = p.goal.rsplit(".", 1)[0].replace(".", "_") if "." in p.goal else "plain"
        return f"in_{app}", f"calls {p.goal}"
    return _times(p.calls).replace(" ", "_"), f"calls {_tool(p.goal)} {_times(p.calls)}"


def _around(p: _Profile, kind: str) -> tuple[str, str]:
    """Its calls before or after the goal as name words and a description clause."""
    goal = _tool(p.goal)
    calls = p.reads if kind == "reads" else p.after
    if not calls:
        return (
            ("directly", "looks nothing up first") if kind == "reads" else ("then_stop", f"ends with {goal}")
        )
    name = "_and_".join(_snake(a) + ("" if n == 1 else "_" + _times(n).replace(" ", "_")) for a, n in calls)
    said = " and ".join(_tool(a) + ("" if n == 1 else " " + _times(n)) for a, n in calls)
    if kind == "reads":
        return f"after_{name}", f"calls {said} first"
    return f"then_{name}", f"then calls {said}"


def _keys(p: _Profile, dim: Dim) -> tuple[str, str]:
    """What it takes from the task, its calls' argument keys or its placeholders as name
    words and a description clause."""
    if dim[0] == "given":
        key = dim[1]
        if key in p.given:
            return f"by_{key}", f"takes {{{key}}} from the task"
        return f"without_{key}", f"does not take {{{key}}}"
    if dim[0] == "args":
        keys = sorted(p.args.get(dim[1], frozenset()))
        if not keys:
            return f"{_snake(dim[1])}_without_arguments", f"calls {_tool(dim[1])} without arguments"
        call = "" if dim[1] == p.goal else _snake(dim[1]) + "_"
        return f"{call}by_{'_and_'.join(keys)}", f"calls {_tool(dim[1])} by {', '.join(keys)}"
    shown = p.placeholders or ("nothing",)
    return "with_" + "_and_".join(shown), "fills " + ", ".join(f"{{{x}}}" for x in shown)


def _word(p: _Profile, dim: Dim) -> tuple[str, str]:
    """A difference as name words and as a description clause (after "it")."""
    if dim[0] in {"scope", "kind", "app", "goal"}:
        return _what(p, dim[0])
    if dim[0] in {"reads", "after"}:
        return _around(p, dim[0])
    if dim[0] == "read":
        n = dict(p.reads).get(dim[1], 0)
        if not n:
            return f"without_{_snake(dim[1])}", f"does not call {_tool(dim[1])} first"
        times = "" if n == 1 else " " + _times(n)
        return f"after_{_snake(dim[1])}{times.replace(' ', '_')}", f"calls {_tool(dim[1])}{times} first"
    return _keys(p, dim)


def _separating(target: _Profile, others: Sequence[_Profile]) -> list[Dim]:
    """Few differences that set `target` apart from every one of `others` (greedy: of the
    most readable kinds that separate any, the one that separates most; on a tie, one that
    says what it does), in a canonical order."""
    dims = sorted(set().union(target.dims(), *(o.dims() for o in others)), key=_dim_key)
    chosen: list[Dim] = []
    rivals = list(others)
    while rivals:
        best: tuple[tuple[int, int, bool, int], Dim] | None = None
        for dim in dims:
            if dim in chosen:
                continue
            split = sum(r.value(dim) != target.value(dim) for r in rivals)
            rank = (_TIERS.get(dim[0], 3), -split, not target.positive(dim), _dim_key(dim)[0])
            if split and (best is None or rank < best[0]):
                best = (rank, dim)
        if best is None:
            break  # alike in everything: `_ordinals` tells them apart
        chosen.append(best[1])
        rivals = [r for r in rivals if r.value(best[1]) == target.value(best[1])]
    return sorted(chosen, key=_dim_key)


def _ordinals(group: Sequence[Workflow], fixed: set[str]) -> dict[str, int]:
    """Workflows alike in every difference: their place by content (0 for the first; a
    fixed one, whose text stays, comes first)."""
    ranked = sorted(group, key=lambda w: (w.id not in fixed, w.content_hash(), w.id))
    return {w.id: i for i, w in enumerate(ranked)}


def _spread(
    workflows: list[Workflow],
    fixed: Sequence[Workflow],
    text: Callable[[Workflow], str],
    qualify: Callable[[Workflow, list[tuple[str, str]], int], Workflow],
) -> list[Workflow]:
    """One pass: each workflow whose `text` another of its agent shares gets what sets it
    apart from those."""
    by_agent: dict[tuple[str, str], list[Workflow]] = defaultdict(list)
    for w in [*workflows, *fixed]:
        by_agent[(w.namespace, w.agent)].append(w)
    changed: dict[str, Workflow] = {}
    for w in workflows:
        rivals = [o for o in by_agent[(w.namespace, w.agent)] if o.id != w.id and text(o) == text(w)]
        if not rivals:
            continue
        target, others = _Profile(w), [_Profile(o) for o in rivals]
        dims = _separating(target, others)
        alike = [o.w for o in others if all(o.value(d) == target.value(d) for d in dims)]
        place = _ordinals([w, *alike], {f.id for f in fixed})[w.id] if alike else 0
        changed[w.id] = qualify(w, [_word(target, d) for d in dims], place)
    return [changed.get(w.id, w) for w in workflows]


def _named(w: Workflow, words: list[tuple[str, str]], place: int) -> Workflow:
    parts = [n for n, _ in words] + ([_ORDINALS[(place - 1) % len(_ORDINALS)] + "_way"] if place else [])
    return w.model_copy(update={"name": "_".join([w.name, *parts])}) if parts else w


def _described(w: Workflow, words: list[tuple[str, str]], place: int) -> Workflow:
    clauses = [c for _, c in words] + (
        [f"is the {_ORDINALS[(place - 1) % len(_ORDINALS)]} way"] if place else []
    )
    if not clauses:
        return w
    base = w.description.rstrip().rstrip(".")
    return w.model_copy(update={"description": f"{base}; it {' and '.join(clauses)}."})


def _duplicates(workflows: Iterable[Workflow], text: Callable[[Workflow], str]) -> bool:
    seen = Counter((w.namespace, w.agent, text(w)) for w in workflows)
    return any(n > 1 for n in seen.values())


_MAX_QUALIFIER = 3
"""Words a name spends on how it differs: one difference of up to three words, or two short
ones; the shared name keeps at least two (a verb and its object) within `MAX_NAME_WORDS`."""

_NAME_KINDS = ["agent", "scope", "kind", "goal", "repeat", "read", "after", "given", "arg", "app"]
"""The differences a name can say, the most telling first."""


def _short(action: str) -> list[str]:
    """A tool as at most two name words: its verb and the first word of its object."""
    return verb_phrase(action).words[:2]


def _key_words(key: str) -> list[str]:
    """An argument key as at most two name words, its digits left out (`address1` -> address)."""
    return name_words(re.sub(r"\d+", " ", key))[-2:]


class _NameProfile:
    """What a workflow does, as the name words of each difference it can have."""

    def __init__(self, w: Workflow) -> None:
        steps = w.steps
        goal = goal_index(steps) if steps else 0
        self.w = w
        self.goal = steps[goal].action if steps else ""
        self.reads = {s.action for s in steps[:goal] if s.action != self.goal}
        self.after = next((s.action for s in steps[goal + 1 :]), None)
        self.repeats = sum(s.action == self.goal for s in steps[: goal + 1]) > 1
        self.given = {_COUNTED.sub("", p) for p, source in w.parameters.items() if from_task(source)}
        self.args = {(s.action, k) for s in steps for k in s.args}

    def dims(self) -> set[Dim]:
        out: set[Dim] = {("agent",), ("scope",), ("kind",), ("goal",), ("repeat",), ("after",), ("app",)}
        out |= {("read", a) for a in self.reads} | {("given", k) for k in self.given}
        return out | {("arg", a, k) for a, k in self.args}

    def words(self, dim: Dim) -> tuple[str, ...]:
        """The difference as name words (none where it has nothing to say)."""
        kind = dim[0]
        if kind == "agent":
            return ("for", *name_words(self.w.agent)[:2])
        if kind in {"scope", "kind"}:
            return (
                ("as", "plan")
                if self.w.scope == "task" and kind == "scope"
                else (("as", "step") if self.w.kind == "subroutine" and kind == "kind" else ())
            )
        if kind == "goal":
            return ("via", *_short(self.goal))
        if kind == "repeat":
            return ("repeatedly",) if self.repeats else ()
        if kind == "after":
            return ("then", *_short(self.after)) if self.after else ()
        if kind == "app":
            app = self.goal.rsplit(".", 1)[0] if "." in self.goal else ""
            return ("in", *name_words(app)[-1:]) if app else ()
        return self._has(dim)

    def _has(self, dim: Dim) -> tuple[str, ...]:
        if dim[0] == "read":
            return ("after" if dim[1] in self.reads else "without", *_short(dim[1]))
        key = _key_words(dim[-1])
        if not key:
            return ()
        if dim[0] == "given":
            return ("by" if dim[1] in self.given else "without", *key)
        return ("by" if (dim[1], dim[2]) in self.args else "without", *key)


def _qualifier(target: _NameProfile, rivals: Sequence[_NameProfile], *, said: bool = False) -> list[str]:
    """The fewest words (at most `_MAX_QUALIFIER`) that set `target` apart from the `rivals`
    (greedy: the difference that parts most of those left, then the shortest, the most
    telling), in the order `_NAME_KINDS` says them. A difference `target` has no words for
    (it lacks what the rivals have: "then search emails") costs nothing and leaves saying it
    to the rivals; `said`: only differences it says itself."""
    dims = sorted(set().union(target.dims(), *(r.dims() for r in rivals)))
    chosen: list[Dim] = []
    left, spent = list(rivals), 0
    while left:
        best: tuple[tuple[int, int, int], Dim] | None = None
        for dim in dims:
            words = target.words(dim)
            split = sum(r.words(dim) != words for r in left)
            rank = (-split, len(words), _NAME_KINDS.index(dim[0]))
            if (
                split
                and (words or not said)
                and dim not in chosen
                and spent + len(words) <= _MAX_QUALIFIER
                and (best is None or rank < best[0])
            ):
                best = (rank, dim)
        if best is None:
            break  # alike in what fits: a letter parts them (`_lettered`)
        chosen.append(best[1])
        spent += len(target.words(best[1]))
        left = [r for r in left if r.words(best[1]) == target.words(best[1])]
    chosen.sort(key=lambda d: (_NAME_KINDS.index(d[0]), d))
    return [w for d in chosen for w in target.words(d)]


def _joined(base: str, qualifier: Sequence[str]) -> str:
    """The name cut to leave room for the qualifier (its prepositions left out first, none
    last), then it."""
    room = max(2, MAX_NAME_WORDS - len(qualifier))
    words = base.split("_")
    while len(words) > room and any(w in PREPOSITIONS for w in words[1:]):
        words.pop(max(i for i, w in enumerate(words) if i and w in PREPOSITIONS))
    words = words[:room]
    while len(words) > 1 and words[-1] in PREPOSITIONS:
        words.pop()
    return "_".join([*words, *qualifier][:MAX_NAME_WORDS])


def _letter(n: int) -> str:
    """b, c, ..., z, then ba, bb, ...: a mark with no count in it."""
    letters = "bcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        out = letters[n % len(letters)] + out
        n //= len(letters)
        if not n:
            return out


def _names(workflows: list[Workflow], fixed: Sequence[Workflow]) -> list[Workflow]:
    """Each workflow's name made short, then told apart from those of its namespace that
    share it (see the module's doc); `fixed` ones keep theirs."""
    out = [w.model_copy(update={"name": "_".join(name_words(w.name)) or "workflow"}) for w in workflows]
    groups: dict[tuple[str, str], list[Workflow]] = defaultdict(list)
    for w in [*out, *fixed]:
        groups[(w.namespace, w.name)].append(w)
    own = {w.id for w in out}
    named: dict[str, str] = {}
    for group in groups.values():
        if len(group) < 2:
            continue
        profiles = [_NameProfile(w) for w in group]
        for p in profiles:
            if p.w.id in own:
                named[p.w.id] = _joined(p.w.name, _qualifier(p, [r for r in profiles if r is not p]))
    out = [w.model_copy(update={"name": named[w.id]}) if w.id in named else w for w in out]
    return _lettered(_said_apart(out, fixed, groups), fixed)


def _said_apart(
    workflows: list[Workflow], fixed: Sequence[Workflow], groups: Mapping[tuple[str, str], list[Workflow]]
) -> list[Workflow]:
    """Workflows of a namespace that still share a name after their qualifiers (each left it
    to the other to say a difference): the first by content (a fixed one first) keeps it, as
    in `_lettered`; each other takes the words of a difference it says itself, told apart from
    the workflows that shared its name before (`groups`)."""
    shared: dict[tuple[str, str], list[Workflow]] = defaultdict(list)
    for w in [*workflows, *fixed]:
        shared[(w.namespace, w.name)].append(w)
    fixed_ids = {f.id for f in fixed}
    base = {w.id: (key, w.name) for key, group in groups.items() for w in group}
    renamed: dict[str, str] = {}
    for group in shared.values():
        ranked = sorted(group, key=lambda w: (w.id not in fixed_ids, w.content_hash(), w.id))
        for w in ranked[1:]:
            if w.id in fixed_ids or w.id not in base:
                continue
            key, name = base[w.id]
            profiles = [_NameProfile(r) for r in groups[key]]
            target = next(p for p in profiles if p.w.id == w.id)
            qualifier = _qualifier(target, [r for r in profiles if r is not target], said=True)
            renamed[w.id] = _joined(name, qualifier) if qualifier else w.name
    return [w.model_copy(update={"name": renamed[w.id]}) if w.id in renamed else w for w in workflows]


def _lettered(workflows: list[Workflow], fixed: Sequence[Workflow]) -> list[Workflow]:
    """Workflows of a namespace still sharing a name: the first by content (a fixed one
    first) keeps it, each other takes `variant` and a letter (`_letter`)."""
    taken = {(w.namespace, w.name) for w in [*workflows, *fixed]}
    groups: dict[tuple[str, str], list[Workflow]] = defaultdict(list)
    for w in [*workflows, *fixed]:
        groups[(w.namespace, w.name)].append(w)
    fixed_ids = {f.id for f in fixed}
    renamed: dict[str, str] = {}
    for (namespace, name), group in sorted(groups.items()):
        ranked = sorted(group, key=lambda w: (w.id not in fixed_ids, w.content_hash(), w.id))
        n = 0
        for w in ranked[1:]:
            while True:
                candidate = _joined(name, ["variant", _letter(n)])
                n += 1
                if (namespace, candidate) not in taken:
                    break
            taken.add((namespace, candidate))
            renamed[w.id] = candidate
    return [w.model_copy(update={"name": renamed[w.id]}) if w.id in renamed else w for w in workflows]


def distinct(
    workflows: Sequence[Workflow],
    *,
    fixed: Sequence[Workflow] = (),
    served: Mapping[str, Workflow] | None = None,
) -> list[Workflow]:
    """The workflows (in their order), each named within `MAX_NAME_WORDS` words with no
    counting word, none sharing its name with another of its namespace nor its description
    with another of its agent (see the module's doc).

    `fixed` workflows (served ones this run does not make) count as the others but keep their
    own name and description. A workflow whose `served` version (by id) was told apart in an
    earlier run — its name is the new one and more words, `return_order_as_step` for
    `return_order`; its description the new one and a clause — keeps that name or
    description where no other takes it, so a run that induces the same again makes no new
    version."""
    out = [_as_served(w, (served or {}).get(w.id)) for w in workflows]
    fixed = [f for f in fixed if f.id not in {w.id for w in out}]
    out = _names(out, fixed)
    for _ in range(3):  # a qualified description can meet another's; the next pass parts them
        if not _duplicates([*out, *fixed], _description):
            break
        out = _spread(out, fixed, _description, _described)
    return out


def _as_served(w: Workflow, before: Workflow | None) -> Workflow:
    if before is None:
        return w
    update = {}
    # Told apart before and drafted plain now, or drafted told apart (among the drafts alone)
    # and served plain: the served text, told apart again below only if it meets another's.
    if before.name.startswith(w.name + "_") or w.name.startswith(before.name + "_"):
        update["name"] = before.name
    if before.description.startswith(w.description.rstrip().rstrip(".") + "; it ") or (
        w.description.startswith(before.description.rstrip().rstrip(".") + "; it ")
    ):
        update["description"] = before.description
    return w.model_copy(update=update) if update else w


def _name(w: Workflow) -> str:
    return w.name


def _description(w: Workflow) -> str:
    return w.description
