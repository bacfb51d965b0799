from __future__ import annotations

import subprocess
import sys

import numpy as np

from flowmem.induction import Embedder, HashingEmbedder

TEXTS = ["Forward the latest email about the budget to olga", "Cancel my next meeting with Ada", ""]


def test_unit_vectors_and_lexical_similarity() -> None:
    e = HashingEmbedder(dim=256)
    assert isinstance(e, Embedder) and e.name == "hashing-v2-256"
    v = e.embed(TEXTS)
    assert v.shape == (3, 256) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v[:2], axis=1), 1.0) and not v[2].any()
    near = e.embed(["forward the newest email about the budget to Olga"])[0]
    assert float(near @ v[0]) > 0.7 > float(near @ v[1])
    assert e.embed([]).shape == (0, 256)


def test_same_text_same_vector_in_another_process() -> None:
    code = (
        "import sys, numpy as np; from flowmem.induction import HashingEmbedder; "
        f"np.save(sys.stdout.buffer, HashingEmbedder().embed({TEXTS!r}))"
    )
    env = {"PYTHONHASHSEED": "12345"}
    import io
    import os

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=True, env={**os.environ, **env}
    )
    theirs = np.load(io.BytesIO(out.stdout))
    assert np.array_equal(theirs, HashingEmbedder().embed(TEXTS))


class Counting:
    """A fake network embedder that counts what it is asked to embed."""

    name, dim = "fake-net-8", 8

    def __init__(self) -> None:
        self.asked: list[str] = []

    def embed(self, texts: object) -> np.ndarray:  # type: ignore[type-arg]
        items = list(texts)  # type: ignore[call-overload]
        self.asked += items
        return HashingEmbedder(dim=8).embed(items)


def test_a_text_is_never_embedded_twice() -> None:
    from flowmem.induction import CachedEmbedder

    inner = Counting()
    cached = CachedEmbedder(inner)
    first = cached.embed(["a b", "c d", "a b"])
    second = cached.embed(["c d", "e f"])
    assert inner.asked == ["a b", "c d", "e f"] and cached.embedded == 3
    assert np.array_equal(first[1], second[0]) and np.array_equal(first[0], first[2])
    assert cached.embed([]).shape == (0, 8)


def test_the_store_cache_spans_processes(tmp_path: object) -> None:
    from flowmem.induction import CachedEmbedder, MemoryCache
    from flowmem.settings import Settings
    from flowmem.storage import Store
    from flowmem.storage.cache import StoreVectorCache

    settings = Settings(db=f"{tmp_path}/db")
    asked: list[list[str]] = []
    for _ in range(2):  # two store instances stand for two processes
        store, inner = Store(settings), Counting()
        store._embedder = CachedEmbedder(inner, MemoryCache(), StoreVectorCache(store))
        store.embedder.embed(["forward the email", "cancel the meeting"])
        asked.append(inner.asked)
    assert asked == [["forward the email", "cancel the meeting"], []]
