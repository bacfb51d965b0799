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
"""

from __future__ import annotations

import re
from typing import Any

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
_LINKING = frozenset(
    {"to", "at", "for", "from", "with", "the", "into", "onto", "on", "in", "of", "and", "a", "an", "by", "as",
     "via", "is", "be", "than", "or", "then"}
)  # fmt: skip
"""Words between a noun and its value that name nothing ("push the image TO registry.io")."""


def _is_value(token: str) -> bool:
    digits = sum(c.isdigit() for c in token)
    return digits >= 2 or any(c in _SEPARATORS for c in token)


def _key(before: str, taken: dict[str, Any], *, first: bool) -> str:
    words = [w.lower() for w in _WORD.findall(before)][1 if first else 0 :]  # skip the verb
    name = next((w for w in reversed(words) if w not in _LINKING and len(w) > 1), "value")
    key, n = name, 2
    while key in taken:
        key, n = f"{name}_{n}", n + 1
    return key


def parse_prose(text: str, named: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """A step's text as (action, arguments): each value replaced by `{key}` in the action and
    given as that argument. Text without a value comes back as it is, with no arguments.
    `named` (value -> key, updated) carries the names of one procedure's values across its
    steps."""
    named = {} if named is None else named
    args: dict[str, str] = {}
    parts: list[str] = []
    at = 0
    for found in _VALUE.finditer(text):
        value = found.group(0)
        start, end = found.span()
        if found.group("quoted") is not None:
            value, start, end = value[1:-1], start + 1, end - 1  # the quotes stay in the sentence
        else:
            stripped = value.rstrip(_TRAILING)
            end -= len(value) - len(stripped)
            value = stripped
            if found.group("token") is not None and not _is_value(value):
                continue
        key = named.get(value)
        if key is None or key in args:
            key = _key(text[at:start], args, first=at == 0)
            named.setdefault(value, key)
        args[key] = value
        parts += [text[at:start], "{" + key + "}"]
        at = end
    if not args:
        return text, {}
    return "".join([*parts, text[at:]]), args


def is_prose(action: str, args: dict[str, Any]) -> bool:
    """Whether a step is a sentence: whitespace in its action, and each argument a `{key}` in it."""
    return any(c.isspace() for c in action) and all("{" + k + "}" in action for k in args)


def render_prose(action: str, args: dict[str, Any]) -> str:
    """A sentence step with its arguments put back: "Build Docker image {image}"."""
    for key, value in args.items():
        action = action.replace("{" + key + "}", value if isinstance(value, str) else str(value))
    return action
