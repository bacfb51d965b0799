"""The pure core of induction (no prefect, lancedb or openai imports): embedders so far."""

from flowmem.induction.embed import Embedder, HashingEmbedder

__all__ = ["Embedder", "HashingEmbedder"]
