"""Choosing the embedder from the settings, with its caches."""

from __future__ import annotations

from flowmem.induction.embed import CachedEmbedder, Embedder, HashingEmbedder, MemoryCache, VectorCache
from flowmem.settings import Settings

__all__ = ["embedder_from"]


def embedder_from(settings: Settings, *, persistent: VectorCache | None = None) -> Embedder:
    """The embedder the settings select, wrapped so a text is never embedded twice.

    The hashing embedder is cheaper than any lookup, so it gets only an in-process cache; a
    network embedder also gets the `persistent` cache (the store's), so a text is embedded
    once across processes too.
    """
    if settings.embedder == "openai":
        from flowmem.providers.openai import embedder_from_settings

        caches: tuple[VectorCache, ...] = (MemoryCache(),) + ((persistent,) if persistent else ())
        return CachedEmbedder(embedder_from_settings(settings), *caches)
    return CachedEmbedder(HashingEmbedder(settings.embedding_dim), MemoryCache(50_000))
