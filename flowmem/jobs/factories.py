"""The one place that chooses from the settings: the inducer, the embedder and the store.

Each choice is a table from a name to a builder that imports what it needs only when it is
called, so choosing the rule inducer never imports the OpenAI SDK and an agent process that
opens a store imports no induction machinery; importing this module imports neither the store
nor an embedder (an agent's thread checks the settings here, `check_store`, and its writer
builds the store).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from flowmem.settings import Settings
from flowmem.storage.location import check_location

if TYPE_CHECKING:  # imported by the builders: an agent's thread imports none of them (`check_store`)
    from flowmem.induction.base import Inducer
    from flowmem.retrieval.embed import Embedder
    from flowmem.storage import Store

__all__ = ["EMBEDDERS", "INDUCERS", "check_store", "embedder_from", "inducer_from", "store_from"]


def _rule_inducer(settings: Settings) -> Inducer:
    from flowmem.induction.inducers.rule import RuleInducer

    return RuleInducer()


def _llm_inducer(settings: Settings) -> Inducer:
    from flowmem.induction.inducers.llm import LLMInducer
    from flowmem.providers.openai import llm_from_settings

    return LLMInducer(llm_from_settings(settings))


INDUCERS: dict[str, Callable[[Settings], Inducer]] = {"rule": _rule_inducer, "llm": _llm_inducer}
"""Inducer name -> builder: `rule` (no LLM, the default) or `llm` (the configured endpoint)."""


def _hashing_embedder(settings: Settings) -> Embedder:
    from flowmem.retrieval.embed import CachedEmbedder, HashingEmbedder, MemoryCache

    # Hashing costs less than any lookup: an in-process cache only.
    return CachedEmbedder(HashingEmbedder(settings.embedding_dim), MemoryCache(50_000))


def _openai_embedder(settings: Settings) -> Embedder:
    from flowmem.providers.openai import embedder_from_settings
    from flowmem.retrieval.embed import CachedEmbedder, MemoryCache
    from flowmem.storage.object_store import storage_options
    from flowmem.storage.vector_cache import StoreVectorCache

    # A network embedder also keeps its vectors in the store, so a text is embedded once
    # across processes too.
    inner = embedder_from_settings(settings)
    cache = StoreVectorCache(settings.db, inner.name, inner.dim, storage_options=storage_options(settings))
    return CachedEmbedder(inner, MemoryCache(), cache)


def _static_embedder(settings: Settings) -> Embedder:
    from flowmem.providers.static import StaticEmbedder
    from flowmem.retrieval.embed import CachedEmbedder, MemoryCache

    # Settings refuse `static` without a path; a model averages a few rows per text, cheaper
    # than a store lookup: an in-process cache only, as for hashing.
    assert settings.embedder_path is not None
    return CachedEmbedder(StaticEmbedder(settings.embedder_path), MemoryCache(50_000))


EMBEDDERS: dict[str, Callable[[Settings], Embedder]] = {
    "hashing": _hashing_embedder,
    "openai": _openai_embedder,
    "static": _static_embedder,
}
"""Embedder name (`Settings.embedder`) -> builder, with its caches."""


def inducer_from(kind: str, settings: Settings) -> Inducer:
    """The inducer of a kind, built where it runs (an LLM client does not travel to workers).

    Raises:
        ValueError: if the kind is unknown, or `llm` is asked for without a configured model.
    """
    if kind not in INDUCERS:
        raise ValueError(f"unknown inducer {kind!r}: use {' or '.join(INDUCERS)}")
    return INDUCERS[kind](settings)


def embedder_from(settings: Settings) -> Embedder:
    """The embedder the settings select, wrapped so a text is never embedded twice."""
    return EMBEDDERS[settings.embedder](settings)


def store_from(settings: Settings) -> Store:
    """The store the settings name, with the embedder they select."""
    from flowmem.storage import Store

    return Store(settings, embedder=embedder_from(settings))


def check_store(settings: Settings) -> None:
    """Refuse at once what `store_from` would refuse, with `stat`s alone and importing neither
    the store's modules nor the embedder's: a location that cannot be a store, a static
    model's directory that holds no model. An agent's memory checks this on the agent's thread
    and builds the store on its writer's (`flowmem.agents.writer.StoreSlot`).

    Raises:
        StoreLocationError: if the location cannot be a store.
        ModelFileError: if the static embedder's directory holds no model.
    """
    check_location(settings.db)
    if settings.embedder == "static":
        from flowmem.providers.static_files import check_model

        assert settings.embedder_path is not None  # the settings refuse `static` without it
        check_model(settings.embedder_path)
