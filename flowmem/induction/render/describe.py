"""Names, descriptions and step intents of workflows (pure; the rule inducer needs no LLM
for them).

- The name is what the workflow's tasks ask, as a short verb phrase in snake_case without
  their example values (`induction/render/phrase.py`: "Delete all my emails from yuki from the last
  5 days", ... -> `delete_emails`; "Deploy v2.4.1 to staging", ... ->
  `deploy_version_to_environment`): at most `MAX_NAME_WORDS` words, none of them a counting
  word, a digit or an example's value (`name_words`). Where the tasks share no verb, it is
  the goal's verb and object (`forward_email`, `exchange_delivered_order_items`): the goal
  is the last step that changes something (`segments.is_read`), or the last step of a
  workflow that only looks things up. A workflow that only looks up, where the tasks ask for
  a change no step makes, is a check: `check_before_send_email`, "Use to check whether to
  send email ...".
- The description is one sentence saying when to use it (the tasks' phrase, placeholders
  in braces, or the goal's), with the other placeholders the task supplies, and what it does:
  "Use to delete emails from {query} given {date_min}: first search emails, then delete
  email."
- Verb phrases of tools start with a verb (`verb_phrase`): a tool named by a noun phrase
  reads as what one does with it (`analytics.engaged_users_count` -> "count engaged users",
  `order_details(order_id)` -> "get the order details"). `induction/render/naming.py` then tells
  apart the workflows of a namespace that would share a name or a description.
- Each step's intent says what it does with what, and which later value it yields:
  "search emails by query; gives {email_id}".

Besides the tasks' shared words (checked against the cluster's example values), only action
names, argument keys and placeholder names are used.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

from flowmem.induction.abstract.segments import READ_VERBS, is_read
from flowmem.induction.base import ClusterInput
from flowmem.induction.injection import find_injection
from flowmem.induction.literals import LiteralIndex, find_literals
from flowmem.induction.render.phrase import (
    COUNTING_WORDS,
    PREPOSITIONS,
    Phrase,
    Verbs,
    inflected,
    task_phrase,
)
from flowmem.models import Trajectory, WorkflowStep

__all__ = [
    "CHANGE_VERBS",
    "MAX_NAME_WORDS",
    "VERBS",
    "VerbPhrase",
    "action_words",
    "describe",
    "goal_index",
    "name_for",
    "name_words",
    "phrase_for",
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

MAX_NAME_WORDS = 5
"""A name is a short verb phrase: a verb, what it acts on and, where two workflows would share
one, a word or two saying how they differ; five words hold that and stay a glance's read."""

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
    if inflected(first) or first in named or last in CHANGE_VERBS or single_noun:
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


def phrase_for(
    steps: Sequence[WorkflowStep],
    runs: Sequence[Trajectory],
    forbidden: Collection[str] = (),
    cluster: ClusterInput | None = None,
) -> Phrase | None:
    """What the runs' tasks ask (`phrase.task_phrase`: the words of its object shared by the
    `cluster`'s successful runs' tasks too, none that is one example's in its namespace), the
    workflow's own verbs known; None when they share no verb, when their phrase reads as an
    instruction to the agent, and for a sub-routine. A phrase of a verb alone takes the
    object of the step with that verb, else the goal's verb and object ("cancel" for
    `delete_event` -> "delete event": a verb of the tasks that no step has is not put
    before a step's object, which could make "refund human agents" of a transfer). So does a
    phrase whose object shares no word with any object of the steps with its verb
    (`_names_another_thing`: "exchange the water bottle" -> "exchange delivered order items")."""
    if not steps or not runs or (cluster is not None and cluster.kind == "subroutine"):
        return None  # a sub-routine's runs are segments: their tasks ask for more than it does
    own = [verb_phrase(s.action, s.args) for s in steps]
    at = goal_index(steps)
    goal = own[at]
    verbs = Verbs(goal=goal.verb, steps=frozenset(p.verb for p in own), known=VERBS)
    population = cluster.successes if cluster is not None else ()
    index = cluster.literals if cluster is not None else None
    phrase = task_phrase(steps, runs, verbs, forbidden, population, index)
    if phrase is None or find_injection(phrase.text()):
        return None
    if not phrase.object or _names_another_thing(phrase, own):
        named = _steps_object(phrase, own, goal, [is_read(s.action) for s in steps])
        if not find_literals(named.text(), forbidden):
            return named
    phrase = _with_thing(phrase, own, forbidden, None if is_read(steps[at].action) else goal)
    return _checking(phrase, steps, own)


def _checking(phrase: Phrase, steps: Sequence[WorkflowStep], own: Sequence[VerbPhrase]) -> Phrase:
    """The phrase as a check (`Phrase.checks`) where the tasks ask for a change
    (`CHANGE_VERBS`) that no step makes, every step only looking up: the tasks were
    conditional ("if X, send ...") and their runs found no change to make, or looked up what
    the change needs. "Use to send email" of a workflow that searches events would have an
    agent stop before sending."""
    asks_change = phrase.verb in CHANGE_VERBS and all(p.verb != phrase.verb for p in own)
    if asks_change and all(is_read(s.action) for s in steps):
        return dataclasses.replace(phrase, checks=True)
    return phrase


def _with_thing(
    phrase: Phrase, own: Sequence[VerbPhrase], forbidden: Collection[str], goal: VerbPhrase | None = None
) -> Phrase:
    """A phrase whose object opens with a preposition ("send to {name}": the tasks' words
    for the thing differ, or it is a value) with the thing its step acts on first: the last
    word of the object of the last step with its verb ("send email to {name}", for
    `send_email`). A verb no step has takes the thing of the `goal` (given where its action
    is a change; not where its verb reads as a look-up either: "count engaged users") when
    its object is a thing ("move task of {name}" for `update_task`), not a place it goes to
    (`transfer_to_human_agents`: "refund to {card}" is no "refund agents"). A phrase whose
    object opens with a value ("change {order_id} to {address2}") takes the thing right after
    it: "change {order_id} address to {address2}", `change_address`."""
    value_first = bool(phrase.object) and phrase.object[0][0] == "" and _is_slot(phrase.object[0][1])
    if not phrase.object or (phrase.object[0][0] not in PREPOSITIONS and not value_first):
        return phrase
    found = _thing(phrase, own, goal)
    said = {_stem(w) for _, item in phrase.object for w in item.strip("{}").split()}  # {environment} too
    if found is None or _stem(found) in said:  # "assign to person ... tasks" names it
        return phrase
    thing = ("", found)
    parts = (phrase.object[0], thing, *phrase.object[1:]) if value_first else (thing, *phrase.object)
    named = Phrase(phrase.verb, parts)
    return phrase if find_literals(named.text(), forbidden) else named


def _thing(phrase: Phrase, own: Sequence[VerbPhrase], goal: VerbPhrase | None) -> str | None:
    """`_with_thing`'s thing: the last word of the object of the last step with the phrase's
    verb, else, for a verb no step has, the `goal`'s (a change, its object a thing)."""
    things = [w for p in own if p.verb == phrase.verb for w in p.object[-1:] if w not in PREPOSITIONS]
    unknown = all(p.verb != phrase.verb for p in own)
    if unknown and goal is not None and goal.verb not in READ_VERBS and goal.object:
        if goal.object[0] not in PREPOSITIONS:
            things = [goal.object[-1]]
    return things[-1] if things else None


def _is_slot(item: str) -> bool:
    return item.startswith("{") and item.endswith("}")


def _steps_object(
    phrase: Phrase, own: Sequence[VerbPhrase], goal: VerbPhrase, reads: Sequence[bool] = ()
) -> Phrase:
    """The last of the steps' verb phrases (`own`) with the phrase's verb (one with an object,
    where the phrase has one), else the goal with its own verb: a verb no step has joins no
    step's object ("refund" and `transfer_to_human_agents`), and a look-up's verb does not
    name a workflow that changes something ("get the refund" of a return is not
    `get_product_details`; `reads`: per step, whether it only looks up)."""
    changes = bool(reads) and not all(reads)
    fits = [
        p
        for i, p in enumerate(own)
        if p.verb == phrase.verb and (p.object or not phrase.object) and not (changes and reads[i])
    ]
    thing = fits[-1] if fits else goal
    return Phrase(thing.verb, tuple(("", w) for w in thing.object if w not in PREPOSITIONS))


def _stem(word: str) -> str:
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _tool_words(steps: Sequence[WorkflowStep], index: LiteralIndex | None) -> set[str]:
    """The words (`_stem`med) of the workflow's actions and argument keys and of the
    namespace's vocabulary but prepositions (`transfer_to_human_agents`' "to" names nothing):
    what its tools call things."""
    vocabulary = [*(s.action for s in steps), *(k for s in steps for k in s.args)]
    vocabulary += [*index.vocabulary] if index is not None else []
    return {_stem(w) for name in vocabulary for w in action_words(name) if w not in PREPOSITIONS}


def _names_another_thing(phrase: Phrase, own: Sequence[VerbPhrase]) -> bool:
    """True when steps of the workflow (their verb phrases, `own`) have the phrase's verb and
    an object of their own, and none of those objects shares a word with the phrase's (its own
    words, not placeholders):
    the tasks name a thing ("exchange the water bottle") or what the app is ("update the
    crm") where the tool names the kind the procedure acts on (`exchange_delivered_order_items`,
    `update_customer`), or they ask for more than this variant of their cluster does ("modify
    the address" of a workflow that modifies the order's items). A verb no step has (a web
    agent's "book a flight" over `click`) keeps the tasks' words."""
    words = {_stem(w) for _, item in phrase.object if not item.startswith("{") for w in item.split()}
    same = [p for p in own if p.verb == phrase.verb and p.object]
    return bool(words) and bool(same) and all(not words & {_stem(w) for w in p.object} for p in same)


def name_words(text: str, forbidden: Collection[str] = ()) -> list[str]:
    """A name's words (split on anything not a letter or a digit, lower case) without
    counting words, words with a digit and words that read as one of the `forbidden` example
    values, cut to `MAX_NAME_WORDS`, no preposition last."""
    words = [w for w in re.split(r"[^a-z0-9]+", text.lower()) if w]
    words = [w for w in words if w not in COUNTING_WORDS and not any(c.isdigit() for c in w)]
    if forbidden:
        words = [w for w in words if not find_literals(w, forbidden)]
        while words and find_literals(" ".join(words), forbidden):
            words.pop()
    words = words[:MAX_NAME_WORDS]
    while len(words) > 1 and words[-1] in PREPOSITIONS:
        words.pop()
    return words


def _fitted(phrase: Phrase, steps: Sequence[WorkflowStep], cluster: ClusterInput | None) -> list[str]:
    """The phrase's name words; past `MAX_NAME_WORDS` with a last word (what it acts on) that
    a tool uses (`_tool_words`), without the object's words no tool uses: "close old light
    blue checking account" -> "close account" where a tool says "account", not a cut to five
    words that loses what it closes. A last word no tool uses ("... at the earliest time tomorrow") leaves
    the cut as it was."""
    words = phrase.words()
    if len(words) <= MAX_NAME_WORDS:
        return words
    tools = _tool_words(steps, cluster.literals if cluster is not None else None)
    if _stem(words[-1]) not in tools:
        return words
    direct = list(itertools.takewhile(lambda w: w not in PREPOSITIONS, words[1:]))
    if direct and not any(_stem(w) in tools for w in direct):
        return words[: 1 + len(direct)]  # what it acts on, not a tool's word of what qualifies it
    ours = [_stem(w) in tools for w in words] + [False]
    # A preposition stays with the word after it ("to address"), else it joins nothing.
    kept = [
        words[0],
        *(w for i, w in enumerate(words[1:], 1) if ours[i] or (w in PREPOSITIONS and ours[i + 1])),
    ]
    return kept if len(kept) > 1 else words


def name_for(
    steps: Sequence[WorkflowStep],
    runs: Sequence[Trajectory] = (),
    forbidden: Collection[str] = (),
    cluster: ClusterInput | None = None,
) -> str:
    """A snake_case name (`name_words`): the verb phrase of the `runs`' tasks (`phrase_for`),
    or else the goal step's verb and object (`verb_phrase`; its first argument key as the
    object when the action is a bare verb: `calculate(expression)` ->
    `calculate_expression`)."""
    phrase = phrase_for(steps, runs, forbidden, cluster)
    if phrase is not None and (words := name_words("_".join(_fitted(phrase, steps, cluster)), forbidden)):
        return "_".join(words)
    goal = steps[goal_index(steps)]
    words = verb_phrase(goal.action, goal.args).words
    if len(words) == 1 and goal.args:
        words += action_words(next(iter(goal.args)))
    name = "_".join(name_words("_".join(dict.fromkeys(words)), forbidden))
    return re.sub(r"[^a-z0-9_]+", "_", name).strip("_") or "workflow"


def _phrase(name: str, forbidden: Collection[str]) -> str:
    """An action or key in words (`forward email`), or as written (`total_visits_count`) when
    the words would read as one of the `forbidden` example values ("total visits")."""
    words = " ".join(dict.fromkeys(action_words(name)))
    return name.rsplit(".", 1)[-1] if forbidden and find_literals(words, forbidden) else words


def _listed(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def describe(
    steps: Sequence[WorkflowStep],
    parameters: Mapping[str, str],
    forbidden: Collection[str] = (),
    runs: Sequence[Trajectory] = (),
    cluster: ClusterInput | None = None,
) -> str:
    """One sentence: when to use the workflow (what the `runs`' tasks ask, `phrase_for`, or
    else its goal), what else the task must give, what it does (no word group that reads as
    one of the `forbidden` example values)."""
    goal = goal_index(steps)
    phrase = phrase_for(steps, runs, forbidden, cluster)
    head = phrase.text() if phrase is not None else _said(steps[goal], forbidden)
    text = "Use to " + head
    given = [f"{{{p}}}" for p, source in parameters.items() if source == "task" and f"{{{p}}}" not in head]
    if given:
        text += " given " + _listed(given[:_MAX_TASK_PARAMETERS])
    shown = _before_goal(steps, goal, forbidden)
    if phrase is not None and phrase.verb != verb_phrase(steps[goal].action, steps[goal].args).verb:
        shown.append(_said(steps[goal], forbidden))  # the head says what is asked, this how
        if len(shown) == 1:
            return f"{text}: {shown[0]}."
    if shown:
        text += ": first " + ", then ".join(shown)
    return text + "."


def _before_goal(steps: Sequence[WorkflowStep], goal: int, forbidden: Collection[str]) -> list[str]:
    """What the steps before the goal do, once each in their order, at most `_MAX_READS` of
    them: past that, the changes are said (up to as many) and the look-ups only as far as
    the room left, at least the first ("find user id by email, then more look-ups, then
    modify pending order address, ..."): a change the task asks for is what a reader needs
    to know before the goal, the look-ups the steps list anyway."""
    said = dict.fromkeys(
        (_said(s, forbidden), is_read(s.action)) for s in steps[:goal] if s.action != steps[goal].action
    )
    items = list(dict.fromkeys(text for text, _ in said))
    if len(items) <= _MAX_READS:
        return items
    reads = [text for text, read in said if read]
    changes = [text for text in items if text not in reads]
    if not changes:
        return [*reads[:_MAX_READS], "more"]
    room = max(1, _MAX_READS - len(changes))
    shown = reads[:room] + (["more look-ups"] if len(reads) > room else [])
    return shown + changes[:_MAX_READS] + (["more"] if len(changes) > _MAX_READS else [])


def step_intents(
    steps: Sequence[WorkflowStep], parameters: Mapping[str, str], forbidden: Collection[str] = ()
) -> list[str]:
    """Per step: what it does, verb first as the description says it (`_said`: "count
    traffic sources", not "traffic source count"), with which arguments (none its action's
    name says already: "find user id by email", not "... by email by email"), and the
    placeholders its result gives (no word group that reads as one of the `forbidden` example
    values)."""
    intents, given = [], set()
    for step in steps:
        text = _said(step, forbidden)
        said = {_stem(w) for w in text.split()}
        keys = [k for k in step.args if not {_stem(w) for w in _phrase(k, forbidden).split()} <= said]
        if keys and "by" not in said:  # "find user id by email" says its argument already
            text += " by " + ", ".join(_phrase(k, forbidden) for k in keys)
        gives = [
            p for p, source in parameters.items() if source == f"result of {step.action}" and p not in given
        ]
        if gives:  # said of the first step of that action only
            text += "; gives " + ", ".join(f"{{{p}}}" for p in gives)
            given.update(gives)
        intents.append(text)
    return intents
