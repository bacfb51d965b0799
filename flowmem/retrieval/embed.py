"""Text embedders behind one Protocol: `embed(texts) -> float32 array`, rows L2-normalised."""

from __future__ import annotations

import functools
import hashlib
import itertools
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
    spaces = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32) == 32
    double = spaces[:-1] & spaces[1:]
    starts = np.flatnonzero(~(double[:-1] | double[1:]))
    row_of_char = np.repeat(np.arange(len(texts)), [len(p) for p in padded])[starts]
    slices = map(slice, starts.tolist(), (starts + 3).tolist())
    trigrams = map(joined.__getitem__, slices)

    hashes = np.fromiter(
        itertools.chain(map(mmh3.hash, words), map(mmh3.hash, trigrams)),
        dtype=np.int64,
        count=len(words) + len(starts),
    )
    rows = np.concatenate([row_of_word, row_of_char])
    weights = np.repeat([_WORD_WEIGHT, _CHAR_WEIGHT], [len(words), len(starts)])
    np.negative(weights, out=weights, where=hashes < 0)
    # np.abs of -2**31 is 2**31 in int64, which is what scikit-learn's special case computes.
    flat = rows * dim + np.abs(hashes) % dim
    counts = np.bincount(flat, weights=weights, minlength=len(texts) * dim)
    return counts.astype(np.float64, copy=False).reshape(len(texts), dim)  # float64 already


TRIGRAM_WORDS = 8_192
"""Words whose character trigrams' hashes are kept (`_trigram_hashes`, ~0.4 KB a word): a
task's words recur within it and across tasks, and a long task's trigrams are most of its
features."""


@functools.lru_cache(maxsize=TRIGRAM_WORDS)
def _trigram_hashes(word: str) -> tuple[int, ...]:
    """The signed MurmurHash3 of each trigram of a whitespace-separated word padded with one
    space either side (char_wb's features of it)."""
    padded = f" {word} "
    return tuple(map(mmh3.hash, [padded[i : i + 3] for i in range(len(padded) - 2)]))


def _one_vector(text: str, dim: int) -> Vectors:
    """`embed([text])[0]`, for one text: the same features, hashes and float32 norm as
    `_hashed_counts` and `embed` (bit for bit: tests/test_embed.py), without the batch path's
    row bookkeeping, and each word's trigrams hashed once (`_trigram_hashes`). A task of ten
    words: ~18 µs against ~22 µs; a customer-service task of 1,600 characters: ~145 µs against
    ~170 µs in a fresh process, ~80 µs against ~160 µs once its words were seen. The features'
    order differs from the batch path's; their weights are multiples of 0.5, so the float64
    sums are exact whatever the order."""
    lowered = text.lower()
    # A lone surrogate is not text: refused as the batch path (and scikit-learn) refuse it.
    # Checked first: mmh3 5.3 crashes the process on a string holding one.
    lowered.encode()
    tokens = _TOKEN.findall(lowered)
    features = tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False)]
    trigrams = itertools.chain.from_iterable(map(_trigram_hashes, lowered.split()))
    hashes = np.fromiter(itertools.chain(map(mmh3.hash, features), trigrams), dtype=np.int64)
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
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
