"""Text embedders behind one Protocol: `embed(texts) -> float32 array`, rows L2-normalised."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import mmh3
import numpy as np
import numpy.typing as npt

__all__ = ["CachedEmbedder", "Embedder", "HashingEmbedder", "MemoryCache", "VectorCache", "content_key"]

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors."""

    @property
    def name(self) -> str:
        """Identifies the embedder and its configuration; stored vectors carry it."""
        ...

    @property
    def dim(self) -> int:
        """Vector size."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts into a (len(texts), dim) float32 array of L2-normalised rows."""
        ...


class HashingEmbedder:
    """Offline default: feature hashing of word 1–2-grams and character trigrams.

    Stateless and deterministic: MurmurHash3 of each n-gram picks a signed coordinate, so the
    same text gives the same vector in every process and every run, with no model to download
    and nothing to fit. It captures lexical, not semantic, similarity.

    The vectors are exactly those of scikit-learn's `HashingVectorizer` (word analyzer with
    ngram_range=(1, 2), char_wb analyzer with ngram_range=(3, 3), lowercase, alternate_sign,
    norm=None), which this class used until importing scikit-learn and scipy (~2 s) proved too
    slow for agent processes; stores written then stay valid. tests/test_embed.py checks the
    equivalence against scikit-learn.
    """

    VERSION = 2
    """Bumped whenever the vectors it produces would change."""

    def __init__(self, dim: int = 384) -> None:
        self._dim = dim

    @property
    def name(self) -> str:
        """`hashing-v<version>-<dim>`."""
        return f"hashing-v{self.VERSION}-{self._dim}"

    @property
    def dim(self) -> int:
        """Vector size."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts; an empty text gives the zero vector."""
        if isinstance(texts, str):
            raise ValueError("Expected a sequence of texts, got a single string.")
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        if len(texts) == 1:  # a search's task: a third of the batch path's fixed cost
            return _one_vector(texts[0], self._dim)[None, :]
        # Words carry most meaning; character n-grams make inflections and typos still match.
        dense = np.zeros((len(texts), self._dim), dtype=np.float32)
        for start in range(0, len(texts), _CHUNK):
            chunk = texts[start : start + _CHUNK]
            dense[start : start + len(chunk)] = _hashed_counts(chunk, self._dim)
        norms = np.linalg.norm(dense, axis=1, keepdims=True)
        np.divide(dense, norms, out=dense, where=norms > 0)
        return dense


_TOKEN = re.compile(r"(?u)\b\w\w+\b")
"""scikit-learn's default `token_pattern`: words of two or more word characters."""

_WORD_WEIGHT, _CHAR_WEIGHT = 2.0, 0.5

_CHUNK = 4096
"""Texts hashed together; bounds the float64 scratch array to _CHUNK × dim."""


def _hashed_counts(texts: Sequence[str], dim: int) -> npt.NDArray[np.float64]:
    """`words * 2.0 + chars * 0.5` of scikit-learn's two `HashingVectorizer`s, dense.

    Word features: tokens of the lowercased text, then each adjacent pair joined by one space.
    Character features (char_wb): each whitespace-separated word of the lowercased text,
    padded with one space either side, cut into all its trigrams. (scikit-learn first squeezes
    runs of whitespace; that changes no word, as `re`'s `\\s` and `str.split` agree.)
    A feature lands at `abs(h) % dim` with sign `+1 if h >= 0 else -1`, h the signed 32-bit
    MurmurHash3 (seed 0) of its UTF-8 bytes; collisions add up. All values are multiples of
    0.5, so float64 sums are exact whatever the order.
    """
    words: list[str] = []
    word_counts: list[int] = []
    padded: list[str] = []
    for text in texts:
        lowered = text.lower()
        tokens = _TOKEN.findall(lowered)
        words += tokens
        words += map(" ".join, zip(tokens, tokens[1:], strict=False))
        word_counts.append(max(2 * len(tokens) - 1, 0))
        # " w1  w2 ": every trigram inside a padded word, and none across two (those hold "  ").
        split = lowered.split()
        padded.append(f" {'  '.join(split)} " if split else "")
    row_of_word = np.repeat(np.arange(len(texts)), word_counts)

    joined = "".join(padded)
    codes, starts = _trigram_starts(joined)
    row_of_char = np.repeat(np.arange(len(texts)), [len(p) for p in padded])[starts]
    word_hashes = np.fromiter(map(mmh3.hash, words), dtype=np.int64, count=len(words))
    hashes = np.concatenate([word_hashes, _trigram_hashes(joined, codes, starts)])
    rows = np.concatenate([row_of_word, row_of_char])
    weights = np.repeat([_WORD_WEIGHT, _CHAR_WEIGHT], [len(words), len(starts)])
    np.negative(weights, out=weights, where=hashes < 0)
    # np.abs of -2**31 is 2**31 in int64, which is what scikit-learn's special case computes.
    flat = rows * dim + np.abs(hashes) % dim
    counts = np.bincount(flat, weights=weights, minlength=len(texts) * dim)
    return counts.astype(np.float64, copy=False).reshape(len(texts), dim)  # float64 already


_ARRAYS_FROM = 128
"""Characters from which one text's trigrams are found and hashed with arrays (`_trigram_starts`,
`_trigram_hashes`): below, one `mmh3.hash` call each costs less than the arrays' fixed cost
(~36 µs against ~25 µs at 60 characters, ~52 µs against ~53 µs at 150, ~74 against ~132 at 500)."""

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
"""MurmurHash3 (x86, 32-bit)'s two key constants."""


def _trigram_starts(joined: str) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.int64]]:
    """The code points of words each padded with one space either side and joined (" w1  w2 "),
    and where each of their char_wb trigrams starts: every 3-character window that holds no
    two spaces in a row (those span two words)."""
    width = np.uint8 if joined.isascii() else np.uint32
    codes = np.frombuffer(joined.encode("ascii" if width is np.uint8 else "utf-32-le"), dtype=width)
    spaces = codes == 32
    double = spaces[:-1] & spaces[1:]
    return codes.astype(np.uint32, copy=False), np.flatnonzero(~(double[:-1] | double[1:]))


def _trigram_hashes(
    joined: str, codes: npt.NDArray[np.uint32], starts: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The signed MurmurHash3 (seed 0) of the UTF-8 bytes of each trigram of `joined` starting
    at `starts`, as `mmh3.hash` gives it. An ASCII trigram is 3 bytes, which MurmurHash3 hashes
    as one tail block: those are computed all at once in uint32 arithmetic (which wraps as the
    C code's does; every ASCII trigram is checked against `mmh3` in tests/test_embed.py), ~15 µs
    for a task of 1,600 characters against ~80 µs by one `mmh3.hash` call each. A trigram with
    any other character: one call."""
    first, second, third = codes[starts], codes[starts + 1], codes[starts + 2]
    k = first | (second << 8) | (third << 16)
    k *= _C1
    k = (k << 15) | (k >> 17)
    k *= _C2
    h = k ^ np.uint32(3)  # the key's length
    h ^= h >> 16
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> 13
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> 16
    hashes = h.view(np.int32).astype(np.int64)
    other = np.flatnonzero((first | second | third) >= 128)
    if len(other):
        at = starts[other].tolist()
        hashes[other] = np.fromiter((mmh3.hash(joined[i : i + 3]) for i in at), dtype=np.int64, count=len(at))
    return hashes


def _one_vector(text: str, dim: int) -> Vectors:
    """`embed([text])[0]`, for one text: the same features, hashes and float32 norm as
    `_hashed_counts` and `embed` (bit for bit: tests/test_embed.py), without the batch path's
    row bookkeeping (~25 µs against ~45 µs for a task of ten words), a long text's trigrams
    hashed with arrays (`_ARRAYS_FROM`)."""
    lowered = text.lower()
    # A lone surrogate is not text: refused as the batch path (and scikit-learn) refuse it.
    # Checked first: mmh3 5.3 crashes the process on a string holding one.
    lowered.encode()
    tokens = _TOKEN.findall(lowered)
    features = tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False)]
    hashes = np.fromiter(map(mmh3.hash, features), dtype=np.int64, count=len(features))
    split = lowered.split()
    joined = f" {'  '.join(split)} " if split else ""
    if len(joined) >= _ARRAYS_FROM:
        hashes = np.concatenate([hashes, _trigram_hashes(joined, *_trigram_starts(joined))])
    else:
        trigrams = [
            padded[i : i + 3] for word in split for padded in (f" {word} ",) for i in range(len(word))
        ]
        hashes = np.concatenate(
            [hashes, np.fromiter(map(mmh3.hash, trigrams), dtype=np.int64, count=len(trigrams))]
        )
    weights = np.where(hashes < 0, -_CHAR_WEIGHT, _CHAR_WEIGHT)
    weights[: len(features)] *= _WORD_WEIGHT / _CHAR_WEIGHT
    dense = np.bincount(np.abs(hashes) % dim, weights=weights, minlength=dim).astype(np.float32)
    norm = np.sqrt(np.add.reduce(dense * dense))  # as `np.linalg.norm` sums a float32 row
    return dense / norm if norm > 0 else dense


class VectorCache(Protocol):
    """Where a `CachedEmbedder` keeps vectors, by content hash."""

    def get_many(self, keys: Sequence[str]) -> dict[str, Vectors]:
        """The cached vectors among `keys` (missing keys are absent)."""
        ...

    def put_many(self, vectors: dict[str, Vectors]) -> None:
        """Remember vectors."""
        ...


class MemoryCache:
    """An in-process vector cache holding at most `size` vectors (oldest dropped first)."""

    def __init__(self, size: int = 200_000) -> None:
        self.size = size
        self._data: dict[str, Vectors] = {}

    def get_many(self, keys: Sequence[str]) -> dict[str, Vectors]:
        """The cached vectors among `keys`."""
        return {k: self._data[k] for k in keys if k in self._data}

    def put_many(self, vectors: dict[str, Vectors]) -> None:
        """Remember vectors, dropping the oldest beyond `size`."""
        self._data.update(vectors)
        while len(self._data) > self.size:
            self._data.pop(next(iter(self._data)))


def content_key(embedder_name: str, text: str) -> str:
    """The cache key of a text for one embedder: a SHA-256 of both."""
    return hashlib.sha256(f"{embedder_name}\0{text}".encode()).hexdigest()


class CachedEmbedder:
    """Wraps an embedder so a text is never embedded twice: vectors are looked up by content
    hash in the caches (fastest first), and only the misses go to the inner embedder."""

    def __init__(self, inner: Embedder, *caches: VectorCache) -> None:
        self.inner = inner
        self.caches = caches or (MemoryCache(),)
        self.embedded = 0
        """Texts the inner embedder was asked for (cache misses)."""

    @property
    def name(self) -> str:
        """The inner embedder's name (the cache does not change vectors)."""
        return self.inner.name

    @property
    def dim(self) -> int:
        """The inner embedder's vector size."""
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed texts, from the caches where possible."""
        keys = [content_key(self.name, t) for t in texts]
        found: dict[str, Vectors] = {}
        for i, cache in enumerate(self.caches):
            missing = [k for k in dict.fromkeys(keys) if k not in found]
            if not missing:
                break
            hits = cache.get_many(missing)
            if hits and i > 0:
                self.caches[0].put_many(hits)
            found.update(hits)
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        if todo:
            vectors = self.inner.embed(list(todo.values()))
            fresh = {k: vectors[j] for j, k in enumerate(todo)}
            self.embedded += len(todo)
            for cache in self.caches:
                cache.put_many(fresh)
            found.update(fresh)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # One array of them all: ~1 µs for a search's one text against ~8 µs by `np.stack`,
        # and a third of its time for a batch of 4,096.
        return np.array([found[k] for k in keys], dtype=np.float32)
