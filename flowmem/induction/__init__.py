"""The pure core of induction: no prefect, lancedb or openai imports."""

from flowmem.induction.embed import CachedEmbedder, Embedder, HashingEmbedder, MemoryCache

__all__ = ["CachedEmbedder", "Embedder", "HashingEmbedder", "MemoryCache"]
