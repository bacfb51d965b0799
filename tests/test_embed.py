from __future__ import annotations

import subprocess
import sys

import numpy as np

from flowmem.retrieval.embed import Embedder, HashingEmbedder

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
        "import sys, numpy as np; from flowmem.retrieval.embed import HashingEmbedder; "
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

    def embed(self, texts: object) -> np.ndarray:
        items = list(texts)  # type: ignore[call-overload]
        self.asked += items
        return HashingEmbedder(dim=8).embed(items)


def test_a_text_is_never_embedded_twice() -> None:
    from flowmem.retrieval.embed import CachedEmbedder

    inner = Counting()
    cached = CachedEmbedder(inner)
    first = cached.embed(["a b", "c d", "a b"])
    second = cached.embed(["c d", "e f"])
    assert inner.asked == ["a b", "c d", "e f"] and cached.embedded == 3
    assert np.array_equal(first[1], second[0]) and np.array_equal(first[0], first[2])
    assert cached.embed([]).shape == (0, 8)


def test_one_text_is_embedded_as_in_a_batch_and_cached_alike() -> None:
    """A search's one text: the batch's vector, embedded once, a later cache's hit copied into
    the first, and a copy returned (the caches keep theirs)."""
    from flowmem.retrieval.embed import CachedEmbedder, MemoryCache, content_key

    inner, first, second = Counting(), MemoryCache(), MemoryCache()
    cached = CachedEmbedder(inner, first, second)
    batch = CachedEmbedder(Counting()).embed(["a b", "c d"])
    one = cached.embed(["a b"])
    assert one.shape == (1, 8) and one.dtype == np.float32 and np.array_equal(one[0], batch[0])
    one[0, :] = 7.0
    assert np.array_equal(cached.embed(["a b"])[0], batch[0])
    assert inner.asked == ["a b"] and cached.embedded == 1
    key = content_key(cached.name, "a b")
    assert first.get_many([key]) and second.get_many([key])
    other = CachedEmbedder(Counting(), MemoryCache(), first)  # "a b" only in its second cache
    assert np.array_equal(other.embed(["a b"])[0], batch[0]) and other.embedded == 0
    assert other.caches[0].get_many([key])


def test_the_store_cache_spans_processes(tmp_path: object) -> None:
    from flowmem.retrieval.embed import CachedEmbedder, MemoryCache
    from flowmem.settings import Settings
    from flowmem.storage import Store
    from flowmem.storage.vector_cache import StoreVectorCache

    settings = Settings(db=f"{tmp_path}/db")
    asked: list[list[str]] = []
    for _ in range(2):  # two store instances stand for two processes
        inner = Counting()
        cache = StoreVectorCache(settings.db, inner.name, inner.dim)
        store = Store(settings, embedder=CachedEmbedder(inner, MemoryCache(), cache))
        store.embedder.embed(["forward the email", "cancel the meeting"])
        asked.append(inner.asked)
    assert asked == [["forward the email", "cancel the meeting"], []]


# Equivalence with the scikit-learn implementation that wrote the stored `hashing-v2-*` vectors.

CORPUS = [
    *TEXTS,
    "Schedule a meeting with the marketing team for next Tuesday at 3pm",
    "Reply to Bob's invoice e-mail: 'Paid, thanks!' and archive the thread",
    "FORWARD THE LATEST EMAIL ABOUT THE BUDGET TO OLGA",
    "Über naïve café résumé Straße ÉCOLE İstanbul ǅemal",
    "日本語のテキストを要約して 中文文本 русский текст العربية हिन्दी ภาษาไทย",
    "🚀 launch 🔥🔥 the 👍🏽 thing 👨‍👩‍👧 ok",
    "!!! ??? ... --- ;;; ()[]{}",
    "123 4567 8 9 10 3.14 2024-05-01 #42",
    "a b c d e f g I x y",
    "tabs\tand\nnewlines\r\n\n  and   runs \u00a0of\u2003\u3000whitespace\x0b\x0c\x1c\x85end",
    "   leading and trailing spaces   ",
    " ",
    "\t\n",
    "x",
    "under_score snake_case_name camelCaseName x1y2",
    "ad1u66pi collides with the sign bit",  # mmh3.hash("ad1u66pi") == -2**31
    " ".join(f"word{i % 97} token{i % 13}" for i in range(2_000)) + " " + "z" * 5_000,
]


def _sklearn_reference(texts: list[str], dim: int) -> np.ndarray:
    """The HashingEmbedder of flowmem <= 0.1, built on scikit-learn, verbatim."""
    from sklearn.feature_extraction.text import HashingVectorizer

    common = {"n_features": dim, "alternate_sign": True, "norm": None, "lowercase": True}
    words = HashingVectorizer(analyzer="word", ngram_range=(1, 2), **common).transform(texts)
    chars = HashingVectorizer(analyzer="char_wb", ngram_range=(3, 3), **common).transform(texts)
    dense = np.asarray((words * 2.0 + chars * 0.5).toarray(), dtype=np.float32)
    norms = np.linalg.norm(dense, axis=1, keepdims=True)
    np.divide(dense, norms, out=dense, where=norms > 0)
    return dense


def _assert_same(new: np.ndarray, old: np.ndarray) -> None:
    assert new.shape == old.shape and new.dtype == np.float32
    assert np.array_equal(new != 0, old != 0)
    assert np.allclose(new, old, atol=1e-6, rtol=0)


def test_the_corpus_embeds_as_scikit_learn_did(monkeypatch: object) -> None:
    import mmh3

    import flowmem.retrieval.embed as embed_module

    assert mmh3.hash("ad1u66pi") == -(2**31)
    for dim in (384, 37):
        old = _sklearn_reference(CORPUS, dim)
        _assert_same(HashingEmbedder(dim).embed(CORPUS), old)
        for i, text in enumerate(CORPUS):  # one at a time, as an agent's search does
            _assert_same(HashingEmbedder(dim).embed([text]), old[i : i + 1])
    # Texts are hashed in chunks; chunk boundaries must not matter.
    monkeypatch.setattr(embed_module, "_CHUNK", 3)  # type: ignore[attr-defined]
    _assert_same(HashingEmbedder(37).embed(CORPUS), _sklearn_reference(CORPUS, 37))


def test_one_text_embeds_bit_for_bit_as_its_row_of_a_batch() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    # One text takes its own path (a search's task); a batch of two, the batch path. A long
    # text's trigrams are hashed with arrays, but those holding a character past ASCII.
    long = " ".join(CORPUS * 3) + " The ORDER #W123, order w123;\tthe  order..."
    texts = [*CORPUS, long, long.upper(), f"{long} Café naïve 中文 😀 x\u00a0y", "é" * 200]
    for dim in (384, 37, 1):
        batch = HashingEmbedder(dim).embed(texts)
        for i, text in enumerate(texts):
            assert np.array_equal(HashingEmbedder(dim).embed([text])[0], batch[i])

    chars = st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from(" \t\n\u00a0aÉ_1"))

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(text=st.text(chars, max_size=60), dim=st.sampled_from([384, 37, 1]))
    def check(text: str, dim: int) -> None:
        one = HashingEmbedder(dim).embed([text])
        assert one.shape == (1, dim) and one.dtype == np.float32
        assert np.array_equal(one[0], HashingEmbedder(dim).embed([text, "x"])[0])

    check()


def test_a_single_string_is_refused() -> None:
    import pytest

    with pytest.raises(ValueError):
        HashingEmbedder().embed("not a list")


def test_random_unicode_embeds_as_scikit_learn_did() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    # Lone surrogates are not text: both implementations refuse them (see the test below).
    anything = st.characters(exclude_categories=["Cs"])
    chars = st.one_of(anything, st.sampled_from(" \t\n\u00a0\u3000aAbÉ_1"))
    texts = st.lists(st.text(chars, max_size=40), min_size=1, max_size=4)

    @settings(max_examples=100, deadline=None, derandomize=True)
    @given(texts=texts, dim=st.sampled_from([384, 37, 1]))
    def check(texts: list[str], dim: int) -> None:
        _assert_same(HashingEmbedder(dim).embed(texts), _sklearn_reference(texts, dim))

    check()


def test_lone_surrogates_are_refused_as_scikit_learn_did() -> None:
    import pytest

    for text in ["ab\ud800cd", "\udfff", "x \ud83d"]:
        with pytest.raises(UnicodeEncodeError):
            _sklearn_reference([text], 37)
        with pytest.raises(UnicodeEncodeError):
            HashingEmbedder(37).embed([text])


def test_embedding_imports_neither_sklearn_nor_scipy() -> None:
    code = (
        "import sys; from flowmem.retrieval.embed import HashingEmbedder; "
        "HashingEmbedder().embed(['Forward the latest email to Olga']); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    assert out.stdout.strip() == "[]"


def test_every_ascii_trigram_hashes_as_mmh3_does() -> None:
    import itertools

    import mmh3

    from flowmem.retrieval.embed import _trigram_hashes

    # All 128³ ASCII trigrams side by side in one string, and a few with other characters.
    trigrams = ["".join(t) for t in itertools.product(map(chr, range(128)), repeat=3)]
    trigrams += ["é a", "ab\u00e9", "\u4e2d\u6587x", "\U0001f600 a"]
    joined = "".join(trigrams)
    codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    starts = np.cumsum([0] + [len(t) for t in trigrams[:-1]])
    want = np.fromiter(map(mmh3.hash, trigrams), dtype=np.int64, count=len(trigrams))
    assert np.array_equal(_trigram_hashes(joined, codes, starts), want)
