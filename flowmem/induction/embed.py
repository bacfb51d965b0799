"""Text embedders behind one Protocol: `embed(texts) -> float32 array`, rows L2-normalised."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

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
    """

    VERSION = 2
    """Bumped whenever the vectors it produces would change."""

    def __init__(self, dim: int = 384) -> None:
        # sklearn is imported here, not at module import, so importing flowmem stays cheap.
        from sklearn.feature_extraction.text import HashingVectorizer

        self._dim = dim
        common = {"n_features": dim, "alternate_sign": True, "norm": None, "lowercase": True}
        self._words = HashingVectorizer(analyzer="word", ngram_range=(1, 2), **common)
        # Trigrams only: 3–4-grams retrieved no better on WorkBench and halved the speed.
        self._chars = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 3), **common)

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
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        words = self._words.transform(texts)
        chars = self._chars.transform(texts)
        # Words carry most meaning; character n-grams make inflections and typos still match.
        dense = np.asarray((words * 2.0 + chars * 0.5).toarray(), dtype=np.float32)
        norms = np.linalg.norm(dense, axis=1, keepdims=True)
        np.divide(dense, norms, out=dense, where=norms > 0)
        return dense


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
