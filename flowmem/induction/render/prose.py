"""Steps written as sentences: the values in them become arguments (pure).

A hand-written procedure's step is text ("Build Docker image app:2.4.1"). Three deploys that
differ only in their version are one procedure, so the text is split into what stays (the
action: "Build Docker image {image}") and what varies (the arguments: `image="app:2.4.1"`).
Induction then treats the values like any call's arguments: the ones that vary, are rare or
come from the task become placeholders, and procedures that differ only in values align.

A value is what no procedure of another kind would share: a quoted text, an e-mail address,
a URL, or a token with a digit that is a number (two digits or more) or holds a
separator (`2.4.1`, `app:2.4.1`, `#W123`, `2023-11-30`). Names with one digit (`S3`, `EC2`,
`K8s`, `2FA`) are words of the tool's vocabulary and stay. An argument is named after the
word before its value since the previous value ("image" in "Build Docker image app:2.4.1"),
skipping short linking words and the sentence's first word (its verb); `value` when there is
none. A value met again
in a later step of the same procedure keeps the name it got first.

Given the procedure's task, a step's words are read against it too (`task=`):
- a plain word that follows a linking word and that the task names ("deploy v2.4.1 to
  staging" for the task "Deploy v2.4.1 to staging") is a value of the task, like a token with
  digits: the task said where or for whom, and the next task may say another;
- a value the task names is called what the task calls it: the word right after it in the
  task ("the staging environment": `environment`), else the word right before it ("version
  2.4.1": `version`), each when it is no linking word and no value; else after the linking
  word before it in the step (`destination` after "to", `origin` after "from"); else as above.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

__all__ = ["is_prose", "parse_prose", "render_prose"]

_VALUE = re.compile(
    r"""(?P<quoted>"[^"\n]+"|'[^'\n]+'|`[^`\n]+`)"""
    r"|(?P<address>[a-z][a-z0-9+.-]*://[^\s,;()\[\]]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)"
    r"|(?P<token>[^\s,;()\[\]]*\d[^\s,;()\[\]]*)"
)
_TRAILING = ".:!?"
"""Punctuation that ends a sentence rather than a value."""
_SEPARATORS = frozenset(".:/#-_@")
_WORD = re.compile(r"(?<!\w)[A-Za-z][A-Za-z0-9]*")
_PLAIN = re.compile(r"(?<![\w./:@-])[A-Za-z][A-Za-z-]*[A-Za-z](?![\w/:@-]|\.\w)")
"""A plain word: letters (and inner hyphens), no digit."""
_LINKING = frozenset(
    {"to", "at", "for", "from", "with", "the", "into", "onto", "on", "in", "of", "and", "a", "an", "by", "as",
     "via", "is", "be", "than", "or", "then"}
)  # fmt: skip
"""Words between a noun and its value that name nothing ("push the image TO registry.io")."""


def _is_value(token: str) -> bool:
    digits = sum(c.isdigit() for c in token)
    return digits >= 2 or any(c in _SEPARATORS for c in token)


def _key(before: str, taken: Collection[str], *, first: bool) -> str:
    words = [w.lower() for w in _WORD.findall(before)][1 if first else 0 :]  # skip the verb
    name = next((w for w in reversed(words) if w not in _LINKING and len(w) > 1), "value")
    key, n = name, 2
    while key in taken:
        key, n = f"{name}_{n}", n + 1
    return key


def _task_words(text: str, task: str) -> list[tuple[int, int]]:
    """Spans of the plain words of a step's text that follow a linking word and that the task
    names as a whole word (values of the task: "to staging")."""
    out: list[tuple[int, int]] = []
    words = list(_PLAIN.finditer(text))
    for prev, word in zip(words, words[1:], strict=False):
        w = word.group(0)
        if prev.group(0).lower() in _LINKING and w.lower() not in _LINKING and len(w) > 2 and _named(w, task):
            out.append(word.span())
    return out


def _named(value: str, task: str) -> re.Match[str] | None:
    return re.search(r"(?<![\w.])" + re.escape(value) + r"(?![\w])", task, re.IGNORECASE)


def _task_key(value: str, task: str) -> str | None:
    """What the task calls a value it names: the word right after it, else right before it
    (no linking word, no value, not the task's first word)."""
    found = _named(value, task)
    if found is None:
        return None
    after = _PLAIN.match(task, found.end() + 1) if task[found.end() : found.end() + 1] == " " else None
    before = list(_PLAIN.finditer(task[: found.start()]))
    for word in (
        after,
        before[-1] if len(before) > 1 and task[before[-1].end() : found.start()] == " " else None,
    ):
        if word is not None and word.group(0).lower() not in _LINKING and not _is_value(word.group(0)):
            return word.group(0).lower()
    return None


def _values(text: str, task: str | None) -> list[tuple[int, int, str, bool]]:
    """The values of a step's text in order: (start, end, value, whether it is a plain word
    of the task rather than a value by its shape)."""
    found: list[tuple[int, int, str, bool]] = []
    for match in _VALUE.finditer(text):
        value = match.group(0)
        start, end = match.span()
        if match.group("quoted") is not None:
            found.append((start + 1, end - 1, value[1:-1], False))  # the quotes stay in the sentence
            continue
        stripped = value.rstrip(_TRAILING)
        if match.group("token") is not None and not _is_value(stripped):
            continue
        found.append((start, end - (len(value) - len(stripped)), stripped, False))
    if task:
        taken = [(s, e) for s, e, _, _ in found]
        found += [
            (s, e, text[s:e], True)
            for s, e in _task_words(text, task)
            if not any(a <= s < b for a, b in taken)
        ]
    return sorted(found)


_ROLES = {"to": "destination", "into": "destination", "onto": "destination", "from": "origin"}
"""What a value after these linking words is, when the task has no word for it: where a thing
goes ("deploy to production") or comes from."""


def _role(before: str) -> str | None:
    words = _WORD.findall(before)
    return _ROLES.get(words[-1].lower()) if words else None


def _fresh(name: str, taken: Collection[str]) -> str:
    key, n = name, 2
    while key in taken:
        key, n = f"{name}_{n}", n + 1
    return key


def parse_prose(
    text: str, named: dict[str, str] | None = None, *, task: str | None = None
) -> tuple[str, dict[str, str]]:
    """A step's text as (action, arguments): each value replaced by `{key}` in the action and
    given as that argument. Text without a value comes back as it is, with no arguments.
    `named` (value -> key, updated) carries the names of one procedure's values across its
    steps; `task`, the procedure's task, finds its values in the text and names them."""
    named = {} if named is None else named
    args: dict[str, str] = {}
    parts: list[str] = []
    at = 0
    for start, end, value, worded in _values(text, task):
        key = named.get(value)
        if key is None or key in args:
            called = (_task_key(value, task) or (_role(text[:start]) if worded else None)) if task else None
            key = (
                _fresh(called, args)
                if called and called not in named.values()
                else _key(text[at:start], args, first=at == 0)
            )
            named.setdefault(value, key)
        args[key] = value
        parts += [text[at:start], "{" + key + "}"]
        at = end
    if not args:
        return text, {}
    return "".join([*parts, text[at:]]), args


def is_prose(action: str, args: Mapping[str, object]) -> bool:
    """Whether a step is a sentence: whitespace in its action, and each argument a `{key}` in it."""
    return any(c.isspace() for c in action) and all("{" + k + "}" in action for k in args)


def render_prose(action: str, args: Mapping[str, object]) -> str:
    """A sentence step with its arguments put back: "Build Docker image {image}"."""
    for key, value in args.items():
        action = action.replace("{" + key + "}", value if isinstance(value, str) else str(value))
    return action
