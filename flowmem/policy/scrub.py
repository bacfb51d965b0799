"""The scrubber: secrets and personal data masked in a trajectory before it is stored.

`jobs.ingest.store_trajectories` applies it to every trajectory, so every input path (file
ingest, hooks, spool, API, MCP) is covered; `Settings.scrub` (`FLOWMEM_SCRUB`) names the
kinds. Each match is replaced by a typed mask, so a reader still sees that a value was there:

- `secrets` -> `[SECRET]`:
  - API keys by their shape: OpenAI/Anthropic `sk-…` (also `sk-proj-…`, `sk-ant-…`: 20+
    characters after `sk-`), Stripe `sk_live_…`/`rk_test_…`, GitHub `ghp_ gho_ ghu_ ghs_ ghr_…`
    and `github_pat_…`, Slack `xoxa- xoxb- xoxp- xoxr- xoxs-…`, AWS access key ids
    `AKIA…`/`ASIA…`, Google `AIza…`, JWTs (`eyJ….eyJ…[.…]`), PEM private key blocks (to their
    END line, or to the end of the base64 when truncated);
  - `Bearer <token>` (the token: 8+ characters that are not an all-lowercase word) and the
    value of an `Authorization:` header (`Bearer`/`Basic`/`Token` scheme kept);
  - in free text, the value assigned with `:` or `=` (quoted or not: JSON, YAML, query
    strings, command lines) to `password`, `passwd`, `pwd`, `passphrase`, `api_key`/`apikey`,
    `client_secret`, `secret_key`, `access_key`, `private_key` (also with a prefix such as
    `db_password`), to any `<prefix>_token` or `<prefix>_secret` (`access_token`,
    `session_token`), and to a bare `token`, `secret` or `pass` only as `token=…` or
    `"token": …`; the name and separator are kept;
  - the `user:password` of a URL's `user:password@host`;
  - the whole value of an argument or meta key (at any depth) named like a credential: its
    last word is pass, password, passwd, pwd, passphrase, secret, token, credential(s),
    authorization or apikey, or it holds the words api key, access key, private key, secret
    key or client secret (`max_tokens` and `token_count` are not credentials). Strings,
    numbers and containers are replaced whole; booleans, nulls and empty strings are kept.
    Such a value (6+ characters) is masked wherever else it occurs in the trajectory too (a
    password argument echoed in the task or an observation).
- `cards` -> `[CARD]`: 13–19 digits, contiguous or in groups of 4 (4-4-4-1..7) or 4-6-4/5,
  separated by one kind of single space or dash, that start like a payment card (2221–2720,
  3, 4, 5 or 6) and pass the Luhn check; not inside a longer number or a decimal. Integer
  values (an argument `4111111111111111`) are checked too.
- `emails` -> `[EMAIL]`: `local@domain.tld` addresses (the TLD: 2+ letters).
- `phones` -> `[PHONE]`, conservatively:
  - international: `+` and a country code, then digit groups separated by single spaces,
    dots or dashes (an area code may be in parentheses): 8–15 digits with separators, 10–15
    without; never a plain signed or decimal number such as `+12345678` or `+0.123456789`;
  - North American: `(555) 123-4567`, `555-123-4567`, `555.123.4567` (the area code
    starts with 2–9; the same separator twice);
  - national with a trunk 0: `020 7946 0958`, `06 12 34 56 78`, `030-1234-5678` (one kind
    of separator, 10–12 digits in groups of 2–5, not starting 00).

  Dates, times, ISO timestamps, UUIDs, ids such as `00000123`, amounts, version numbers and
  plain numbers are not phones.

The masks never match again, so scrubbing twice changes nothing more. A trajectory that was
changed carries `meta["scrubbed"]`: how many values of each kind were masked. Independently,
the de-specification check of induction keeps example-specific values (such as an e-mail
address that is not scrubbed) out of served workflows.

Pure: no storage, network or SDK imports.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

from flowmem.models import Step, Trajectory
from flowmem.policy.scrub_patterns import (
    ASSIGNMENT,
    AUTH_HEADER,
    BEARER,
    DEFAULT_SCRUB,
    EMAIL,
    KEY_HINTS,
    KEYS,
    MIN_CARD_INT,
    PHONE,
    URL_CREDENTIALS,
    WORD_HINTS,
    ScrubKind,
    card_spans,
    is_card,
    is_credential_key,
    is_phone,
    kinds_in_dump,
    literals_pattern,
)

__all__ = ["DEFAULT_SCRUB", "MASKS", "ScrubKind", "scrub_text", "scrub_trajectory", "scrub_value"]

MASKS: dict[ScrubKind, str] = {
    "secrets": "[SECRET]",
    "cards": "[CARD]",
    "emails": "[EMAIL]",
    "phones": "[PHONE]",
}
"""The typed mask that replaces a match of each kind."""

_ORDER: tuple[ScrubKind, ...] = ("secrets", "cards", "emails", "phones")
"""Secrets first (a URL's credentials before its e-mail-like host part, a key's digits before
cards and phones), cards before phones (a grouped card number is not a phone)."""

_SECRET = MASKS["secrets"]

# -- the text rules of each kind (their patterns: flowmem.policy.scrub_patterns) --------------------


def _bearer(m: re.Match[str]) -> str | None:
    token = m.group(2)
    if token.isalpha() and token.islower():  # "bearer instruments": a word, not a token
        return None
    return m.group(1) + _SECRET


def _assignment(m: re.Match[str]) -> str:
    if m.group(2) is not None:
        return f'{m.group(1)}"{_SECRET}"'
    if m.group(3) is not None:
        return f"{m.group(1)}'{_SECRET}'"
    return m.group(1) + _SECRET


_SECRET_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str | None]], ...] = (
    (AUTH_HEADER, lambda m: m.group(1) + _SECRET),
    (BEARER, _bearer),
    (ASSIGNMENT, _assignment),
)


def _sub(
    pattern: re.Pattern[str],
    repl: Callable[[re.Match[str]], str | None],
    text: str,
    kind: str,
    counts: Counter[str],
) -> str:
    """`pattern.sub`, where `repl` returns None to keep a match; counts the replacements."""

    def counted(m: re.Match[str]) -> str:
        new = repl(m)
        if new is None:
            return m.group(0)
        counts[kind] += 1
        return new

    return pattern.sub(counted, text)


def _secrets(text: str, counts: Counter[str]) -> str:
    low = text.lower()
    if any(h in low for h in KEY_HINTS):
        text, n1 = KEYS.subn(_SECRET, text)
        text, n2 = URL_CREDENTIALS.subn(r"\1" + _SECRET + "@", text)
        if n1 + n2:
            counts["secrets"] += n1 + n2
    if any(h in low for h in WORD_HINTS):
        for pattern, repl in _SECRET_RULES:
            text = _sub(pattern, repl, text, "secrets", counts)
    return text


def _cards(text: str, counts: Counter[str]) -> str:
    out: list[str] = []
    last = 0
    for start, end in card_spans(text):
        out += (text[last:start], MASKS["cards"])
        last = end
        counts["cards"] += 1
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _emails(text: str, counts: Counter[str]) -> str:
    if "@" not in text:
        return text
    text, n = EMAIL.subn(MASKS["emails"], text)
    counts["emails"] += n
    return text


def _phone(m: re.Match[str]) -> str | None:
    return MASKS["phones"] if is_phone(m) else None


def _phones(text: str, counts: Counter[str]) -> str:
    return _sub(PHONE, _phone, text, "phones", counts)


_SCRUBBERS: dict[ScrubKind, Callable[[str, Counter[str]], str]] = {
    "secrets": _secrets,
    "cards": _cards,
    "emails": _emails,
    "phones": _phones,
}

# -- values and trajectories -----------------------------------------------------------------


class _Scrubber:
    """One scrub: the kinds, the counts of masked values, the credential values to mask."""

    def __init__(self, kinds: tuple[ScrubKind, ...], literals: Collection[str] = ()) -> None:
        self.kinds = kinds
        self.counts: Counter[str] = Counter()
        self.literals = literals_pattern(literals)

    def text(self, text: str) -> str:
        """The text scrubbed, again until nothing changes: a mask may make a neighbour a match
        (`…4567(555) 234-5678`: the second number follows a digit, then a mask)."""
        for _ in range(_MAX_PASSES):
            scrubbed = self._once(text)
            if scrubbed == text:
                break
            text = scrubbed
        return text

    def _once(self, text: str) -> str:
        if not text:
            return text
        if self.literals is not None:
            text, n = self.literals.subn(_SECRET, text)
            self.counts["secrets"] += n
        for kind in self.kinds:
            text = _SCRUBBERS[kind](text, self.counts)
        return text

    def value(self, value: Any) -> Any:
        """The value scrubbed; the very same object when nothing in it changed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out = {k: self.item(k, v) for k, v in value.items()}
            return out if any(out[k] is not v for k, v in value.items()) else value
        if isinstance(value, list | tuple):
            items = [self.value(v) for v in value]
            return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
        if "cards" in self.kinds and isinstance(value, int) and value >= MIN_CARD_INT and is_card(str(value)):
            self.counts["cards"] += 1
            return MASKS["cards"]
        return value

    def item(self, key: Any, value: Any) -> Any:
        """A dict item's value scrubbed: the whole of it when its key names a credential."""
        if "secrets" not in self.kinds or not isinstance(key, str) or not is_credential_key(key):
            return self.value(value)
        if value is None or isinstance(value, bool) or value == "" or value == _SECRET:
            return value
        self.counts["secrets"] += 1
        return _SECRET

    def step(self, step: Step) -> Step:
        update: dict[str, Any] = {}
        for name in _STEP_TEXTS:
            old = getattr(step, name)
            if old is not None and (new := self.text(old)) != old:
                update[name] = new
        for name in _STEP_VALUES:
            old = getattr(step, name)
            if old and (new := self.value(old)) is not old:
                update[name] = new
        return step.model_copy(update=update) if update else step


_STEP_TEXTS = ("thought", "observation", "error")
_STEP_VALUES = ("args", "meta")
_TEXTS = ("task", "final_answer", "feedback")
_MAX_PASSES = 4
"""Each pass masks more (a mask never matches), so this many are plenty."""
_MIN_LITERAL = 6
"""Shorter credential values are not searched for elsewhere in a trajectory."""


def _credential_values(value: Any, found: set[str], *, under_credential: bool = False) -> None:
    """Collect the scalar values (as text, 6+ characters) held by credential-named keys."""
    if isinstance(value, dict):
        for k, v in value.items():
            _credential_values(v, found, under_credential=under_credential or is_credential_key(str(k)))
    elif isinstance(value, list | tuple):
        for v in value:
            _credential_values(v, found, under_credential=under_credential)
    elif under_credential and value is not None and not isinstance(value, bool):
        text = str(value)
        if len(text) >= _MIN_LITERAL and text != _SECRET:
            found.add(text)


def _kinds(kinds: Collection[ScrubKind]) -> tuple[ScrubKind, ...]:
    unknown = set(kinds) - set(_ORDER)
    if unknown:
        raise ValueError(f"unknown scrub kinds: {sorted(unknown)}")
    return tuple(k for k in _ORDER if k in kinds)


def scrub_text(text: str, kinds: Collection[ScrubKind]) -> str:
    """A text with every match of the kinds replaced by its mask."""
    return _Scrubber(_kinds(kinds)).text(text)


def scrub_value(value: Any, kinds: Collection[ScrubKind]) -> Any:
    """A JSON-like value (arguments, meta) scrubbed at any depth, credential-named keys
    included; the same object when nothing changed."""
    return _Scrubber(_kinds(kinds)).value(value)


def scrub_trajectory(t: Trajectory, kinds: Collection[ScrubKind]) -> Trajectory:
    """The trajectory with secrets and personal data of the kinds masked: its task, final
    answer, feedback and meta, and every step's thought, arguments, observation, error and
    meta (ids, names of actions and agents, and dict keys are kept).

    Returns `t` itself when nothing matched; otherwise a copy whose `meta["scrubbed"]` counts
    the masked values by kind (added to any earlier counts).
    """
    chosen = _kinds(kinds)
    if chosen:
        chosen = kinds_in_dump(t.model_dump_json(), chosen)
    if not chosen:
        return t
    literals: set[str] = set()
    if "secrets" in chosen:
        for s in t.steps:
            _credential_values([s.args, s.meta], literals)
        _credential_values(t.meta, literals)
    scrubber = _Scrubber(chosen, literals)
    update: dict[str, Any] = {}
    for name in _TEXTS:
        old = getattr(t, name)
        if old is not None and (new := scrubber.text(old)) != old:
            update[name] = new
    steps = [scrubber.step(s) for s in t.steps]
    if any(a is not b for a, b in zip(steps, t.steps, strict=True)):
        update["steps"] = steps
    meta: dict[str, Any] = scrubber.value(t.meta)
    counts = +scrubber.counts
    if not counts:
        return t
    earlier = meta.get("scrubbed")
    if isinstance(earlier, dict):
        counts.update({k: n for k, n in earlier.items() if k in MASKS and isinstance(n, int)})
    update["meta"] = {**meta, "scrubbed": {k: counts[k] for k in _ORDER if counts[k]}}
    return t.model_copy(update=update)
