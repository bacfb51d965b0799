"""A BERT-uncased WordPiece tokenizer in pure Python: the part of a Hugging Face `tokenizer.json`
that a model2vec static model needs, read from its parsed JSON (no `tokenizers` package).

It reproduces the `tokenizers` pipeline for a `BertNormalizer`, a `BertPreTokenizer` and a
`WordPiece` model, as model2vec calls it (`add_special_tokens=False`):

1. added tokens (`[PAD]`, `[UNK]`, ...) are matched in the raw text first, and kept whole;
2. normalize: drop NUL, U+FFFD and control characters, make every whitespace a space
   (`clean_text`); put spaces around CJK ideographs (`handle_chinese_chars`); decompose (NFD)
   and drop non-spacing marks (`strip_accents`, which follows `lowercase` when unset); lower-case
   each character on its own (`Σ` is always `σ`, never a final `ς`);
3. pre-tokenize: split on whitespace, and make every punctuation character (ASCII punctuation,
   or a Unicode `P*` category) a word of its own;
4. WordPiece: greedy longest match from the start of each word, later pieces prefixed `##`; a
   word with a part no piece matches, or longer than `max_input_chars_per_word`, is `[UNK]`.

tests/test_static_embedder.py checks each rule on a synthetic vocabulary; docs/usage.md
("A static embedder") records the check against `tokenizers` on real task texts.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

__all__ = ["WordPiece"]

_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),  # sic: `tokenizers` starts this block at 0x2B920, BERT's Python at 0x2B820
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
"""The code point ranges `tokenizers`' BertNormalizer treats as Chinese characters."""

_ASCII_CONTROLS = {c: None for c in [*range(0, 9), 11, 12, *range(14, 32), 127]}
_ASCII_CLEAN = str.maketrans({**_ASCII_CONTROLS, 9: " ", 10: " ", 13: " "})
"""`clean_text` on ASCII: control characters dropped, tab and line breaks made spaces."""

_ASCII_WORDS = re.compile(r"[A-Za-z0-9]+|[^A-Za-z0-9 ]")
"""After cleaning, ASCII words: runs of letters and digits; every other printable character is
ASCII punctuation, a word of its own."""

_WORD_CACHE = 100_000
"""Words whose pieces are remembered: task texts repeat a small vocabulary."""


class WordPiece:
    """Token ids of texts, as `tokenizers` gives them for a BERT WordPiece `tokenizer.json`."""

    def __init__(self, spec: Mapping[str, Any]) -> None:
        """Read a parsed `tokenizer.json`.

        Raises:
            ValueError: if its model is not WordPiece, its normalizer not a BertNormalizer or
                its pre-tokenizer not a BertPreTokenizer, or its `[UNK]` is not in its vocabulary.
        """
        model, norm, pre = (
            spec.get("model") or {},
            spec.get("normalizer") or {},
            spec.get("pre_tokenizer") or {},
        )
        kinds = (model.get("type"), norm.get("type"), pre.get("type"))
        if kinds != ("WordPiece", "BertNormalizer", "BertPreTokenizer"):
            raise ValueError(
                f"tokenizer.json is {'/'.join(map(str, kinds))}: "
                "only WordPiece/BertNormalizer/BertPreTokenizer (BERT) tokenizers are read"
            )
        self.vocab: dict[str, int] = dict(model["vocab"])
        self.prefix: str = model.get("continuing_subword_prefix") or "##"
        self.max_chars: int = int(model.get("max_input_chars_per_word", 100))
        unk = model.get("unk_token", "[UNK]")
        if unk not in self.vocab:
            raise ValueError(f"tokenizer.json: its unknown token {unk!r} is not in its vocabulary")
        self.unk_id: int = self.vocab[unk]
        self.clean_text: bool = bool(norm.get("clean_text", True))
        self.chinese: bool = bool(norm.get("handle_chinese_chars", True))
        self.lowercase: bool = bool(norm.get("lowercase", True))
        accents = norm.get("strip_accents")
        self.strip_accents: bool = self.lowercase if accents is None else bool(accents)
        added = {t["content"]: int(t["id"]) for t in spec.get("added_tokens") or []}
        self.added = added
        self._added = (
            re.compile("|".join(map(re.escape, sorted(added, key=len, reverse=True)))) if added else None
        )
        self._pieces: dict[str, list[int]] = {}

    def ids(self, text: str) -> list[int]:
        """The token ids of a text, `[UNK]` included, no special tokens added."""
        if self._added is None:
            return self._text_ids(text)
        out: list[int] = []
        start = 0
        for found in self._added.finditer(text):
            out += self._text_ids(text[start : found.start()])
            out.append(self.added[found.group()])
            start = found.end()
        return out + self._text_ids(text[start:])

    def words(self, text: str) -> list[str]:
        """The normalized, pre-tokenized words of a text (no added-token matching)."""
        if text.isascii() and self.clean_text:
            cleaned = text.translate(_ASCII_CLEAN)
            return _ASCII_WORDS.findall(cleaned.lower() if self.lowercase else cleaned)
        return _split(self._normalize(text))

    def _text_ids(self, text: str) -> list[int]:
        out: list[int] = []
        for word in self.words(text):
            pieces = self._pieces.get(word)
            if pieces is None:
                pieces = self._word_ids(word)
                if len(self._pieces) >= _WORD_CACHE:
                    self._pieces.clear()
                self._pieces[word] = pieces
            out += pieces
        return out

    def _word_ids(self, word: str) -> list[int]:
        """Greedy longest match; the whole word is `[UNK]` if any part matches nothing."""
        if len(word) > self.max_chars:
            return [self.unk_id]
        out: list[int] = []
        start = 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    out.append(self.vocab[piece])
                    start = end
                    break
            else:
                return [self.unk_id]
        return out

    def _normalize(self, text: str) -> str:
        if self.clean_text:
            text = "".join(" " if c.isspace() else c for c in text if not _dropped(c))
        if self.chinese:
            text = "".join(f" {c} " if _is_cjk(c) else c for c in text)
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
        if self.lowercase:
            # One character at a time, as `tokenizers` does: no context-dependent final sigma.
            text = "".join(c.lower() for c in text)
        return text


_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs"})
"""Control, format, private-use and surrogate characters. Unassigned code points (`Cn`) stay:
`tokenizers` keeps them (its category tables know no `Cn`)."""


def _dropped(c: str) -> bool:
    """`clean_text` drops NUL, U+FFFD and `_DROPPED_CATEGORIES` but tab and line breaks."""
    return c in "\x00\ufffd" or (c not in "\t\n\r" and unicodedata.category(c) in _DROPPED_CATEGORIES)


def _is_cjk(c: str) -> bool:
    code = ord(c)
    return any(lo <= code <= hi for lo, hi in _CJK)


def _is_punctuation(c: str) -> bool:
    """ASCII punctuation (symbols such as `$` and `+` included), or a Unicode `P*` category."""
    if c.isascii():
        return c.isprintable() and not c.isalnum() and c != " "
    return unicodedata.category(c)[0] == "P"


def _split(text: str) -> list[str]:
    """BertPreTokenizer: whitespace separates words; each punctuation character is a word."""
    words: list[str] = []
    current: list[str] = []
    for c in text:
        if c.isspace() or _is_punctuation(c):
            if current:
                words.append("".join(current))
                current = []
            if not c.isspace():
                words.append(c)
        else:
            current.append(c)
    if current:
        words.append("".join(current))
    return words
