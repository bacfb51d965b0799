"""Text embedders behind one Protocol: `embed(texts) -> float32 array`, rows L2-normalised."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "HashingEmbedder"]

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
    """Offline default: feature hashing of word 1–2-grams and character 3–4-grams.

    Stateless and deterministic: MurmurHash3 of each n-gram picks a signed coordinate, so the
    same text gives the same vector in every process and every run, with no model to download
    and nothing to fit. It captures lexical, not semantic, similarity.
    """

    VERSION = 1
    """Bumped whenever the vectors it produces would change."""

    def __init__(self, dim: int = 384) -> None:
        # sklearn is imported here, not at module import, so importing flowmem stays cheap.
        from sklearn.feature_extraction.text import HashingVectorizer

        self._dim = dim
        common = {"n_features": dim, "alternate_sign": True, "norm": None, "lowercase": True}
        self._words = HashingVectorizer(analyzer="word", ngram_range=(1, 2), **common)
        self._chars = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 4), **common)

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
