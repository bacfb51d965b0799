"""The scrubber's patterns: compiled regexes and pure predicates that find secrets, payment
cards, e-mail addresses and phone numbers in text.

The rules themselves are documented in `flowmem.policy.scrub`, which applies these patterns and
replaces each match with its typed mask. Nothing here builds a mask or counts a match, except
that the free-text secret rules refuse to match the masks' own texts (`[SECRET]`, `[CARD]`,
`[EMAIL]`, `[PHONE]`: keep them in step with `flowmem.policy.scrub.MASKS`), so scrubbing twice
changes nothing more.

Pure: no storage, network or SDK imports.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterator
from typing import Literal

ScrubKind = Literal["secrets", "cards", "emails", "phones"]
"""What can be masked: credentials, payment cards, e-mail addresses, phone numbers."""

DEFAULT_SCRUB: tuple[ScrubKind, ...] = ("secrets", "cards")
"""What is masked unless the settings say otherwise."""


__all__ = [
    "ASSIGNMENT",
    "AUTH_HEADER",
    "BEARER",
    "EMAIL",
    "KEYS",
    "KEY_HINTS",
    "MIN_CARD_INT",
    "PHONE",
    "URL_CREDENTIALS",
    "WORD_HINTS",
    "card_spans",
    "is_card",
    "is_credential_key",
    "is_phone",
    "kinds_in_dump",
    "literals_pattern",
]

_NOT_A_MASK = r"(?!\[(?:SECRET|CARD|EMAIL|PHONE)\])"

# -- secrets ---------------------------------------------------------------------------------

_PEM_BODY = r"[A-Za-z0-9+/=\s\\:,.-]"
"""Characters of a PEM block's body (base64, line breaks, escaped ones, headers)."""
KEYS = re.compile(
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
"""API keys by their shape, and PEM private key blocks."""
BEARER = re.compile(r"(?i)(?<![A-Za-z0-9])(bearer\s+)([A-Za-z0-9_.~+/-]{8,}=*)", re.ASCII)
"""`Bearer <token>`: group 1 the word and spacing, group 2 the token."""
AUTH_HEADER = re.compile(
    r"(?i)(?<![A-Za-z0-9])(authorization[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|bot)\s+)?+)"
    + _NOT_A_MASK
    + r"([^\s\"',;]+)",
    re.ASCII,
)
"""An `Authorization:` header: group 1 the name, separator and scheme, group 2 the value."""
ASSIGNMENT = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])("  # one start per compound name: linear time
    r"(?:(?:[A-Za-z0-9]*[_-])*(?:pass(?:word|wd|phrase)|pwd|api[_-]?key|client[_-]?secret"
    r"|(?:secret|access|private)[_-]?key)|(?:[A-Za-z0-9]*[_-])+(?:token|secret))[\"']?\s*[:=]\s*"
    r"|(?:token|secret|pass)(?:=|[\"']\s*:\s*)"
    r")" + _NOT_A_MASK + r"(?:\"([^\"\n]+)\"|'([^'\n]+)'|([^\s\"',;&)}\]]+))",
    re.ASCII,
)
"""A value assigned to a credential name: group 1 the name and separator, then the value in
double quotes (group 2), single quotes (group 3) or bare (group 4)."""
URL_CREDENTIALS = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://)[^\s/:@\"']+:[^\s/@\"']+@", re.ASCII)
"""A URL's `user:password@`: group 1 the scheme and `://`."""
KEY_HINTS = (
    *("sk-", "k_live_", "k_test_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox"),
    *("akia", "asia", "aiza", "eyj", "-----begin", "://"),
)
"""Lower-cased substrings without which no key pattern can match."""
WORD_HINTS = ("bearer", "authorization", "pass", "pwd", "key", "token", "secret")
"""Lower-cased substrings without which no header, bearer or assignment rule can match."""

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
def is_credential_key(key: str) -> bool:
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
MIN_CARD_INT = 10**12
"""The smallest 13-digit integer."""


def is_card(digits: str) -> bool:
    """Whether a string of digits starts like a payment card, has its length and passes the
    Luhn check."""
    if not 13 <= len(digits) <= 19 or digits[0] not in "3456" and not 2221 <= int(digits[:4]) <= 2720:
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_spans(text: str) -> Iterator[tuple[int, int]]:
    """The spans of the card numbers in a text, in order and not overlapping."""
    pos = 0
    while (m := _CARD.search(text, pos)) is not None:
        if is_card(m.group(0).replace(" ", "").replace("-", "")):
            yield m.span()
            pos = m.end()
        else:  # a card may start inside a candidate that is none ("2023 4111 1111 1111 1111")
            pos = m.start() + 1


# -- e-mail addresses ------------------------------------------------------------------------

EMAIL = re.compile(
    r"[A-Za-z0-9_.%+-](?<![A-Za-z0-9_.%+-].)"
    r"[A-Za-z0-9_.%+-]{0,63}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?![A-Za-z0-9-])"
)

# -- phone numbers ---------------------------------------------------------------------------

PHONE = re.compile(  # the first character is matched before the look-behinds: a fast scan
    r"[+(\d](?<![\w+.-][+(\d])(?:"
    r"(?<=\+)(?P<intl>\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){1,6})"
    r"|(?<=\()[2-9]\d{2}\) ?\d{3}-\d{4}"
    r"|(?<=[2-9])\d{2}(?P<s1>[.-])\d{3}(?P=s1)\d{4}"
    r"|(?<=0)(?P<trunk>[1-9]\d{0,3}(?P<s2>[ .-])\d{2,5}(?:(?P=s2)\d{2,5}){1,3})"
    r")(?![\w+(]|[.-]\d)",
    re.ASCII,
)
"""A phone candidate; `is_phone` decides on it."""
_DECIMAL = re.compile(r"\+\d+(?:\.\d+)?")


def is_phone(m: re.Match[str]) -> bool:
    """Whether a `PHONE` match is a phone number (its digits counted, a signed or decimal
    number refused)."""
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


# -- credential values and whole trajectories ------------------------------------------------

_DUMP_HINTS = ("sk-", "github_pat_", "xox", "eyj", "://", *WORD_HINTS, "credential")
_STRIPE, _GITHUB, _AWS_GOOGLE = (
    re.compile(p) for p in (r"k_(?:live|test)_", r"gh[pousr]_", r"A(?:KIA|SIA|Iza)")
)
"""Together: what a trajectory's JSON (lower-cased but for the last) holds if any secret rule
or credential-named key can match in it. A PEM block holds "key"; one regex with a literal
prefix costs what one substring test does, and fewer tests keep ingest fast."""
_DIGITS = bytes.maketrans(b"0123456789 -", b"0000000000ss")
_CARD_SHAPES = (b"0" * 13, b"0000s0000s0000s0", b"0000s000000s0000")
"""Every card candidate, with its digits as 0 and its separators as s, contains one of these."""


def kinds_in_dump(dump: str, kinds: tuple[ScrubKind, ...]) -> tuple[ScrubKind, ...]:
    """The kinds that may match somewhere in a trajectory, decided at once on its JSON `dump`:
    most trajectories need no more. The checks look only for characters that JSON never
    escapes, and ask no more than a match needs (an escape may stand next to a card's digits)."""
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


def literals_pattern(literals: Collection[str]) -> re.Pattern[str] | None:
    """A pattern matching any of the literal texts (credential values) as a whole word, the
    longest first; None when there are none."""
    longest_first = sorted(literals, key=len, reverse=True)
    return (
        re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, longest_first)) + r")(?!\w)") if literals else None
    )
