"""The scrubber: secrets and personal data masked in a trajectory before it is stored.

`Store.add_trajectories` applies it to every trajectory, so every input path (file ingest,
hooks, spool, API, MCP) is covered; `Settings.scrub` (`FLOWMEM_SCRUB`) names the kinds. Each
match is replaced by a typed mask, so a reader still sees that a value was there:

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

import functools
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from typing import Any

from flowmem.models import Step, Trajectory
from flowmem.settings import ScrubKind

__all__ = ["MASKS", "scrub_text", "scrub_trajectory", "scrub_value"]

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
_NOT_A_MASK = r"(?!\[(?:SECRET|CARD|EMAIL|PHONE)\])"

# -- secrets ---------------------------------------------------------------------------------

_PEM_BODY = r"[A-Za-z0-9+/=\s\\:,.-]"
"""Characters of a PEM block's body (base64, line breaks, escaped ones, headers)."""
_KEYS = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-(?:proj-|ant-|live-|test-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|gh[opusr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{30,}"
    r"|eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}(?:\.[A-Za-z0-9_-]*)?"
    r")(?![A-Za-z0-9_-])"
    r"|-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----" + _PEM_BODY + r"*?"
    r"(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|(?!" + _PEM_BODY + "))",
    re.ASCII,
)
_BEARER = re.compile(r"(?i)(?<![A-Za-z0-9])(bearer\s+)([A-Za-z0-9_.~+/-]{8,}=*)", re.ASCII)
_AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9])(authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|bot)\s+)?+)"
    + _NOT_A_MASK
    + r"([^\s\"',;]+)",
    re.ASCII,
)
_ASSIGNMENT = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])("  # one start per compound name: linear time
    r"(?:(?:[A-Za-z0-9]*[_-])*(?:pass(?:word|wd|phrase)|pwd|api[_-]?key|client[_-]?secret"
    r"|(?:secret|access|private)[_-]?key)|(?:[A-Za-z0-9]*[_-])+(?:token|secret))[\"']?\s*[:=]\s*"
    r"|(?:token|secret|pass)(?:=|[\"']\s*:\s*)"
    r")" + _NOT_A_MASK + r"(?:\"([^\"\n]+)\"|'([^'\n]+)'|([^\s\"',;&)}\]]+))",
    re.ASCII,
)
_URL_CREDENTIALS = re.compile(
    r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://)[^\s/:@\"']+:[^\s/@\"']+@", re.ASCII
)
_KEY_HINTS = (
    *("sk-", "k_live_", "k_test_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox"),
    *("akia", "asia", "aiza", "eyj", "-----begin", "://"),
)
"""Lower-cased substrings without which no key pattern can match."""
_WORD_HINTS = ("bearer", "authorization", "pass", "pwd", "key", "token", "secret")
"""Lower-cased substrings without which no header, bearer or assignment rule can match."""


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
    (_AUTH_HEADER, lambda m: m.group(1) + _SECRET),
    (_BEARER, _bearer),
    (_ASSIGNMENT, _assignment),
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
    if any(h in low for h in _KEY_HINTS):
        text, n1 = _KEYS.subn(_SECRET, text)
        text, n2 = _URL_CREDENTIALS.subn(r"\1" + _SECRET + "@", text)
        if n1 + n2:
            counts["secrets"] += n1 + n2
    if any(h in low for h in _WORD_HINTS):
        for pattern, repl in _SECRET_RULES:
            text = _sub(pattern, repl, text, "secrets", counts)
    return text


_KEY_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_CREDENTIAL_LAST = {
    "pass",
    "password",
    "passwd",
    "pwd",
    "passphrase",
    "secret",
    "token",
    "credential",
    "credentials",
    "authorization",
    "apikey",
}
_CREDENTIAL_PAIRS = {
    ("api", "key"),
    ("access", "key"),
    ("private", "key"),
    ("secret", "key"),
    ("client", "secret"),
}


@functools.lru_cache(maxsize=4096)
def _is_credential_key(key: str) -> bool:
    """Whether an argument or meta key names a credential (its whole value is a secret)."""
    words = [w.lower() for w in _KEY_WORD.findall(key)]
    if not words:
        return False
    return words[-1] in _CREDENTIAL_LAST or any(
        p in _CREDENTIAL_PAIRS for p in zip(words, words[1:], strict=False)
    )


# -- cards -----------------------------------------------------------------------------------

_CARD = re.compile(  # the first digit is matched before the look-behind: a fast scan for digits
    r"\d(?<![\d.+]\d)(?:\d{12,18}"
    r"|\d{3}(?P<s1>[ -])\d{4}(?P=s1)\d{4}(?P=s1)\d{1,7}"
    r"|\d{3}(?P<s2>[ -])\d{6}(?P=s2)\d{4,5}"
    r")(?!\d|\.\d)",
    re.ASCII,
)


def _is_card(digits: str) -> bool:
    if not 13 <= len(digits) <= 19 or digits[0] not in "3456" and not 2221 <= int(digits[:4]) <= 2720:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card_spans(text: str) -> Iterator[tuple[int, int]]:
    pos = 0
    while (m := _CARD.search(text, pos)) is not None:
        if _is_card(m.group(0).replace(" ", "").replace("-", "")):
            yield m.span()
            pos = m.end()
        else:  # a card may start inside a candidate that is none ("2023 4111 1111 1111 1111")
            pos = m.start() + 1


def _cards(text: str, counts: Counter[str]) -> str:
    out: list[str] = []
    last = 0
    for start, end in _card_spans(text):
        out += (text[last:start], MASKS["cards"])
        last = end
        counts["cards"] += 1
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


# -- e-mail addresses ------------------------------------------------------------------------

_EMAIL = re.compile(
    r"[A-Za-z0-9_.%+-](?<![A-Za-z0-9_.%+-].)"
    r"[A-Za-z0-9_.%+-]{0,63}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![A-Za-z0-9-])"
)


def _emails(text: str, counts: Counter[str]) -> str:
    if "@" not in text:
        return text
    text, n = _EMAIL.subn(MASKS["emails"], text)
    counts["emails"] += n
    return text


# -- phone numbers ---------------------------------------------------------------------------

_PHONE = re.compile(  # the first character is matched before the look-behinds: a fast scan
    r"[+(\d](?<![\w+.-][+(\d])(?:"
    r"(?<=\+)(?P<intl>\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){1,6})"
    r"|(?<=\()[2-9]\d{2}\) ?\d{3}-\d{4}"
    r"|(?<=[2-9])\d{2}(?P<s1>[.-])\d{3}(?P=s1)\d{4}"
    r"|(?<=0)(?P<trunk>[1-9]\d{0,3}(?P<s2>[ .-])\d{2,5}(?:(?P=s2)\d{2,5}){1,3})"
    r")(?![\w+(]|[.-]\d)",
    re.ASCII,
)
_DECIMAL = re.compile(r"\+\d+(?:\.\d+)?")


def _phone(m: re.Match[str]) -> str | None:
    return MASKS["phones"] if _is_phone(m) else None


def _is_phone(m: re.Match[str]) -> bool:
    found = m.group(0)
    digits = sum(c.isdigit() for c in found)
    if m.group("intl") is not None:
        separators = set(found) - set("+0123456789")
        if "." in separators and len(separators) > 1:  # "+1.5 01.02.2023": numbers, not a phone
            return False
        if _DECIMAL.fullmatch(found):
            return 10 <= digits <= 15 and "." not in found
        return 8 <= digits <= 15
    if m.group("trunk") is not None:
        return 10 <= digits <= 12
    return True


def _phones(text: str, counts: Counter[str]) -> str:
    return _sub(_PHONE, _phone, text, "phones", counts)


_SCRUBBERS: dict[ScrubKind, Callable[[str, Counter[str]], str]] = {
    "secrets": _secrets,
    "cards": _cards,
    "emails": _emails,
    "phones": _phones,
}

# -- values and trajectories -----------------------------------------------------------------

_DUMP_HINTS = ("sk-", "github_pat_", "xox", "eyj", "://", *_WORD_HINTS, "credential")
_STRIPE, _GITHUB, _AWS_GOOGLE = (
    re.compile(p) for p in (r"k_(?:live|test)_", r"gh[pousr]_", r"A(?:KIA|SIA|Iza)")
)
"""Together: what a trajectory's JSON (lower-cased but for the last) holds if any secret rule
or credential-named key can match in it. A PEM block holds "key"; one regex with a literal
prefix costs what one substring test does, and fewer tests keep ingest fast."""
_MIN_CARD_INT = 10**12
"""The smallest 13-digit integer."""
_DIGITS = bytes.maketrans(b"0123456789 -", b"0000000000ss")
_CARD_SHAPES = (b"0" * 13, b"0000s0000s0000s0", b"0000s000000s0000")
"""Every card candidate, with its digits as 0 and its separators as s, contains one of these."""


def _may_match(t: Trajectory, kinds: tuple[ScrubKind, ...]) -> tuple[ScrubKind, ...]:
    """The kinds that may match somewhere in the trajectory, decided at once on its JSON: most
    trajectories need no more. The checks look only for characters that JSON never escapes,
    and ask no more than a match needs (an escape may stand next to a card's digits)."""
    dump = t.model_dump_json()
    found: list[ScrubKind] = []
    for kind in kinds:
        if kind == "secrets":
            low = dump.lower()
            may = any(h in low for h in _DUMP_HINTS) or any(
                p.search(s) is not None for p, s in ((_STRIPE, low), (_GITHUB, low), (_AWS_GOOGLE, dump))
            )
        elif kind == "cards":
            shape = dump.encode().translate(_DIGITS)
            may = any(c in shape for c in _CARD_SHAPES)
        elif kind == "emails":
            may = "@" in dump
        else:
            may = True  # phones: checked per text
        if may:
            found.append(kind)
    return tuple(found)


class _Scrubber:
    """One scrub: the kinds, the counts of masked values, the credential values to mask."""

    def __init__(self, kinds: tuple[ScrubKind, ...], literals: Collection[str] = ()) -> None:
        self.kinds = kinds
        self.counts: Counter[str] = Counter()
        longest_first = sorted(literals, key=len, reverse=True)
        self.literals = (
            re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, longest_first)) + r")(?!\w)")
            if literals
            else None
        )

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
        if (
            "cards" in self.kinds
            and isinstance(value, int)
            and value >= _MIN_CARD_INT
            and _is_card(str(value))
        ):
            self.counts["cards"] += 1
            return MASKS["cards"]
        return value

    def item(self, key: Any, value: Any) -> Any:
        """A dict item's value scrubbed: the whole of it when its key names a credential."""
        if "secrets" not in self.kinds or not isinstance(key, str) or not _is_credential_key(key):
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
            _credential_values(v, found, under_credential=under_credential or _is_credential_key(str(k)))
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
        chosen = _may_match(t, chosen)
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
