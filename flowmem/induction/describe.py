"""Names, descriptions and step intents of workflows, from their actions, argument keys and
data flow (pure; the rule inducer needs no LLM for them).

- The name is the goal's verb and object in snake_case (`forward_email`,
  `exchange_delivered_order_items`): the goal is the last step that changes something
  (`segments.is_read`), or the last step of a workflow that only looks things up.
- The description is one sentence saying when to use it, with the placeholders the task
  supplies named, and the look-ups it makes first: "Use to forward email given {subject} and
  {recipient_name}: first search emails, then find email address."
- Both start with a verb (`verb_phrase`): a tool named by a noun phrase reads as what one does
  with it (`analytics.engaged_users_count` -> "count engaged users", `order_details(order_id)`
  -> "get the order details"). `induction/naming.py` then tells apart the workflows of one
  agent that would share a name or a description.
- Each step's intent says what it does with what, and which later value it yields:
  "search emails by query; gives {email_id}".

Only action names, argument keys and placeholder names are used: no task text, so no value
of an example can reach them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

from flowmem.induction.literals import find_literals
from flowmem.induction.segments import READ_VERBS, is_read
from flowmem.models import WorkflowStep

__all__ = [
    "CHANGE_VERBS",
    "VERBS",
    "VerbPhrase",
    "action_words",
    "describe",
    "goal_index",
    "name_for",
    "say",
    "step_intents",
    "verb_phrase",
]

CHANGE_VERBS = frozenset(
    {
        "create", "add", "insert", "post", "put", "set", "update", "edit", "modify", "patch",
        "change", "rename", "move", "copy", "delete", "remove", "cancel", "clear", "reset",
        "send", "reply", "forward", "respond", "answer", "ask", "submit", "book", "reserve",
        "schedule", "assign", "invite", "share", "upload", "download", "save", "store", "write",
        "append", "mark", "toggle", "enable", "disable", "start", "restart", "stop", "run",
        "execute", "open", "close", "approve", "reject", "confirm", "pay", "refund", "transfer",
        "exchange", "return", "apply", "log", "draft", "filter", "convert", "merge", "sort",
        "archive", "restore", "publish", "install", "register", "request", "give", "call",
        "wait", "sleep", "think", "plan", "embed", "print", "play", "pause", "unlock", "lock",
        "login", "logout", "sign", "track", "monitor", "listen", "notify", "remind", "capture",
        "comment", "mention", "message",
    }
)  # fmt: skip
"""Verbs of tools that change something: the create/update/delete, messaging and commerce
verbs that tool APIs and agent frameworks name their actions with (with `READ_VERBS`, the
words read as a verb wherever they stand first)."""

VERBS = READ_VERBS | CHANGE_VERBS
"""Every verb a tool name is known to start with."""

_PLURAL_OBJECT = frozenset({"count", "list"})
"""Verbs that take several things: `traffic_source_count` -> "count traffic sources"."""

_VERB_ENDINGS = ("ate", "ize", "ise", "ify")
"""Word endings that make English verbs (calculate, summarize, verify)."""

_NOUN_ENDINGS = ("tion", "sion", "ment", "ness", "ity", "ture", "able", "ible")
"""Word endings that make English nouns and adjectives (conversion, payment, temperature,
variable); `-age` too in words of seven letters or more (average, percentage, not manage)."""

_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_MAX_TASK_PARAMETERS = 4
_MAX_READS = 3


def action_words(action: str) -> list[str]:
    """The words of an action's last dotted part (`email.forward_email` -> forward, email)."""
    return [w.lower() for w in _WORD.findall(action.rsplit(".", 1)[-1])] or [action.lower()]


class VerbPhrase(NamedTuple):
    """What a step does, verb first: `verb` then the words of its `object`."""

    verb: str
    """The verb (`count`, `forward`, `get`)."""
    object: tuple[str, ...]
    """The words of what it acts on (`engaged`, `users`)."""
    article: bool = False
    """True for a tool named by what it gives (`order_details`): "get the order details"."""

    @property
    def words(self) -> list[str]:
        """Verb and object words, as the snake_case name joins them."""
        return list(dict.fromkeys([self.verb, *self.object]))


def _plural(word: str) -> str:
    if word.endswith("s"):
        return word
    if word.endswith(("x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in {"a", "e", "i", "o", "u"}:
        return word[:-1] + "ies"
    return word + "s"


def _inflected(word: str) -> bool:
    """Whether a word has a form no imperative takes: a past participle or -ing form
    (`engaged`, `upcoming`), a plural (`users`, not `access`, `status`, `analysis`) or a
    noun's or adjective's ending (`_NOUN_ENDINGS`)."""
    if len(word) >= 5 and word.endswith(("ed", "ing", *_NOUN_ENDINGS)):
        return True
    if len(word) >= 7 and word.endswith("age"):
        return True
    return len(word) >= 4 and word.endswith("s") and not word.endswith(("ss", "us", "is"))


def verb_phrase(action: str, arg_keys: Collection[str] = ()) -> VerbPhrase:
    """An action as verb and object, whatever order its name puts them in:

    - a name that starts with a known verb (`VERBS`) reads as written (`forward_email`);
    - a name that ends with a look-up verb puts it first (`engaged_users_count` -> count
      engaged users; a count or list is of several things, so its object is plural);
    - a name that names what the tool gives is read "get the ...": its first word has a form
      no imperative has (`upcoming_events`, `temperature_conversion`), or is a word of an
      argument it takes (the thing the call is about: `order_details(order_id)`), or it ends
      with a change word
      (`percentage_change`), or it is one word that is neither a known verb nor has a verb's
      ending (`weather`);
    - any other name starts with its verb, as tool names conventionally do
      (`exchange_delivered_order_items`)."""
    words = list(dict.fromkeys(action_words(action)))
    first, last = words[0], words[-1]
    if first in VERBS:
        return VerbPhrase(first, tuple(words[1:]))
    if len(words) > 1 and last in READ_VERBS:
        thing = words[:-1]
        if last in _PLURAL_OBJECT:
            thing[-1] = _plural(thing[-1])
        return VerbPhrase(last, tuple(thing))
    named = {w for key in arg_keys for w in action_words(key)}
    single_noun = len(words) == 1 and not first.endswith(_VERB_ENDINGS)
    if _inflected(first) or first in named or last in CHANGE_VERBS or single_noun:
        return VerbPhrase("get", tuple(words), article=True)
    return VerbPhrase(first, tuple(words[1:]))


def say(phrase: VerbPhrase, identifier: str, forbidden: Collection[str] = ()) -> str:
    """A verb phrase in words ("count engaged users"); where its words would read as one of
    the `forbidden` example values, its object as one identifier ("count engaged_users"), or
    the tool's `identifier` ("get engaged_users_count", "call get_average_session_duration")."""
    text = " ".join([phrase.verb, *(["the"] if phrase.article else []), *phrase.object])
    if not forbidden or not find_literals(text, forbidden):
        return text
    text = " ".join([phrase.verb, "_".join(phrase.object)]).strip()
    if not find_literals(text, forbidden):
        return text
    looks_up = phrase.verb in READ_VERBS and not identifier.lower().startswith(phrase.verb)
    return f"{'get' if looks_up else 'call'} {identifier}"


def _said(step: WorkflowStep, forbidden: Collection[str]) -> str:
    return say(verb_phrase(step.action, step.args), step.action.rsplit(".", 1)[-1], forbidden)


def goal_index(steps: Sequence[WorkflowStep]) -> int:
    """The position of the goal step: the last one that changes something, else the last."""
    changes = [i for i, s in enumerate(steps) if not is_read(s.action)]
    return changes[-1] if changes else len(steps) - 1


def name_for(steps: Sequence[WorkflowStep]) -> str:
    """A snake_case verb-object name from the goal step (`verb_phrase`; its first argument key
    as the object when the action is a bare verb: `calculate(expression)` ->
    `calculate_expression`)."""
    goal = steps[goal_index(steps)]
    words = verb_phrase(goal.action, goal.args).words
    if len(words) == 1 and goal.args:
        words += action_words(next(iter(goal.args)))
    name = "_".join(dict.fromkeys(words))
    return re.sub(r"[^a-z0-9_]+", "_", name).strip("_") or "workflow"


def _phrase(name: str, forbidden: Collection[str]) -> str:
    """An action or key in words (`forward email`), or as written (`total_visits_count`) when
    the words would read as one of the `forbidden` example values ("total visits")."""
    words = " ".join(dict.fromkeys(action_words(name)))
    return name.rsplit(".", 1)[-1] if forbidden and find_literals(words, forbidden) else words


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def describe(
    steps: Sequence[WorkflowStep], parameters: Mapping[str, str], forbidden: Collection[str] = ()
) -> str:
    """One sentence: when to use the workflow, what the task must give, what it looks up first
    (no word group that reads as one of the `forbidden` example values)."""
    goal = goal_index(steps)
    text = "Use to " + _said(steps[goal], forbidden)
    given = [f"{{{p}}}" for p, source in parameters.items() if source == "task"][:_MAX_TASK_PARAMETERS]
    if given:
        text += " given " + _listed(given)
    reads = list(dict.fromkeys(_said(s, forbidden) for s in steps[:goal] if s.action != steps[goal].action))
    if reads:
        shown = reads[:_MAX_READS] + (["more"] if len(reads) > _MAX_READS else [])
        text += ": first " + ", then ".join(shown)
    return text + "."


def step_intents(
    steps: Sequence[WorkflowStep], parameters: Mapping[str, str], forbidden: Collection[str] = ()
) -> list[str]:
    """Per step: what it does, with which arguments, and the placeholders its result gives
    (no word group that reads as one of the `forbidden` example values)."""
    intents, given = [], set()
    for step in steps:
        text = _phrase(step.action, forbidden)
        if step.args:
            text += " by " + ", ".join(_phrase(k, forbidden) for k in step.args)
        gives = [
            p for p, source in parameters.items() if source == f"result of {step.action}" and p not in given
        ]
        if gives:  # said of the first step of that action only
            text += "; gives " + ", ".join(f"{{{p}}}" for p in gives)
            given.update(gives)
        intents.append(text)
    return intents
