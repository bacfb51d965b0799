"""The HNSW indexes search builds, kept on disk for the next process that opens the store."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from flowmem.agents import ann_cache, served_index
from flowmem.agents.ann_cache import SUFFIX, AnnCache, built
from flowmem.jobs.factories import store_from
from flowmem.retrieval.ann import ann_identity, build_ann
from flowmem.settings import Settings
from tests.factories import induced

pytest.importorskip("faiss")


def _unit(n: int, dim: int = 32, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the HNSWs built (not read from a cache) from here on."""
    found: list[int] = []
    real = build_ann

    def counted(vectors: Any, **kw: Any) -> Any:
        found.append(len(vectors))
        return real(vectors, **kw)

    monkeypatch.setattr(ann_cache, "build_ann", counted)
    return found


def _answers(ann: Any, queries: np.ndarray) -> list[list[int]]:
    return [ann.search(q, 10).tolist() for q in queries]


def test_an_index_kept_is_read_instead_of_built(tmp_path: Path, builds: list[int]) -> None:
    """The same rows (and scale) are built once: the next asks read it, and it answers as the
    one built; other rows or another scale are another index."""
    cache = AnnCache(tmp_path / "ann", 10**9)
    vectors, queries = _unit(600), _unit(20, seed=1)
    first = built(vectors, None, cache)
    assert builds == [600] and first is not None
    [kept] = list((tmp_path / "ann").iterdir())
    assert kept.name == f"{ann_identity(vectors)}{SUFFIX}"
    again = built(vectors.copy(), None, cache)  # equal rows, another array: as another process's
    assert builds == [600] and again is not None and again is not first
    assert _answers(again, queries) == _answers(first, queries)
    scale = np.linspace(0.5, 1.0, 600)
    assert built(vectors, scale, cache) is not None and builds == [600, 600]
    assert built(_unit(600, seed=2), None, cache) is not None and builds == [600, 600, 600]
    assert len(list((tmp_path / "ann").iterdir())) == 3
    assert built(vectors, scale, cache) is not None and builds == [600, 600, 600]
    assert built(vectors, None, None) is not None and builds == [600, 600, 600, 600]  # no cache: built


def test_a_file_that_cannot_be_read_is_built_anew_and_replaced(
    tmp_path: Path, builds: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    """A torn file, or one of other rows under this name, is logged and built over; no
    part-written file is left beside it."""
    cache = AnnCache(tmp_path / "ann", 10**9)
    vectors = _unit(300)
    built(vectors, None, cache)
    path = cache.path(ann_identity(vectors))
    path.write_bytes(path.read_bytes()[:1000])  # torn
    with caplog.at_level(logging.WARNING):
        assert built(vectors, None, cache) is not None
    assert builds == [300, 300] and "could not be read" in caplog.text
    assert cache.load(ann_identity(vectors), 300, 32) is not None  # written anew, whole
    other = _unit(200, seed=3)
    built(other, None, cache)
    os.replace(cache.path(ann_identity(other)), path)  # another index under this one's name
    assert cache.load(ann_identity(vectors), 300, 32) is None and not path.exists()
    assert built(vectors, None, cache) is not None and builds == [300, 300, 200, 300]
    assert [p.name for p in (tmp_path / "ann").iterdir()] == [path.name]  # moved away: one left


def test_past_the_limit_the_least_recently_used_are_removed(tmp_path: Path, builds: list[int]) -> None:
    """Past `limit` bytes the least recently used indexes are removed (a read counts as a
    use), never the one just kept; a part-written file a dead process left is removed once old."""
    directory = tmp_path / "ann"
    sets = [_unit(400, seed=s) for s in range(4)]
    size = AnnCache(directory, 10**9)
    built(sets[0], None, size)
    one = size.path(ann_identity(sets[0])).stat().st_size
    cache = AnnCache(directory, int(2.5 * one))  # room for two
    stale = directory / f".x{SUFFIX}.1.2.part"
    stale.write_bytes(b"half")
    fresh = directory / f".y{SUFFIX}.1.2.part"
    fresh.write_bytes(b"half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    past = time.time() - 100
    os.utime(size.path(ann_identity(sets[0])), (past, past))
    built(sets[1], None, cache)
    time.sleep(0.01)
    assert cache.load(ann_identity(sets[0]), 400, 32) is not None  # used: now the newest
    built(sets[2], None, cache)  # three: the least recently used (sets[1]) removed
    names = {p.name for p in directory.iterdir()}
    assert names == {cache.path(ann_identity(sets[i])).name for i in (0, 2)} | {fresh.name}
    tiny = AnnCache(directory, 1)  # no room at all: the one just kept stays
    built(sets[3], None, tiny)
    assert {p.name for p in directory.iterdir()} == {tiny.path(ann_identity(sets[3])).name, fresh.name}
    assert builds == [400, 400, 400, 400]


def test_a_cache_that_cannot_be_written_serves_the_index_built(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A directory that cannot be made (here: a file is in its place) is logged; the index is
    served all the same."""
    (tmp_path / "ann").write_text("not a directory")
    with caplog.at_level(logging.WARNING):
        ann = built(_unit(100), None, AnnCache(tmp_path / "ann", 10**9))
    assert ann is not None and "keeping the HNSW" in caplog.text


def test_the_settings_say_where_and_how_much(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "db"))
    assert settings.ann_cache_path == tmp_path / "db.ann"
    assert AnnCache.of(settings) == AnnCache(tmp_path / "db.ann", 2_000_000_000)
    assert Settings(db="s3://bucket/prefix").ann_cache_path == Path(".flowmem") / "ann"
    assert Settings(db=str(tmp_path / "db"), ann_cache=str(tmp_path / "x")).ann_cache_path == tmp_path / "x"
    assert AnnCache.of(Settings(db=str(tmp_path / "db"), ann_cache_mb=0)) is None


def test_a_second_process_reads_the_indexes_the_first_built(
    settings: Settings, tmp_path: Path, builds: list[int]
) -> None:
    """Two served indexes of one store (as two processes: each its own store object) build
    the keys' HNSW and the stored tasks' once between them, and serve the same hits."""
    induced(settings)
    cache = AnnCache(tmp_path / "ann", 10**9)

    def opened() -> served_index.ServedIndex:
        return served_index.ServedIndex(
            store_from(settings),
            settings.namespace,
            ann_min=2,
            ann_wait=True,
            cover_weight=0.35,
            evidence_limit=100,
            ann_cache=cache,
        )

    tasks = ["Cancel my next meeting with zed", "Forward the latest email to kim", "Book a flight to Oslo"]
    first = opened()
    hits = [[h.workflow.id for h in first.search(t, k=2)] for t in tasks]
    assert first._snapshot.slot.ann is not None and first._evidence.index.ann is not None
    assert len(builds) == 2 and len(list((tmp_path / "ann").iterdir())) == 2
    second = opened()
    assert [[h.workflow.id for h in second.search(t, k=2)] for t in tasks] == hits
    assert second._snapshot.slot.ann is not None and second._evidence.index.ann is not None
    assert len(builds) == 2


def test_an_index_another_process_is_building_is_waited_for_not_built_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one builder's claim stands (here a thread, held in its build), another that needs
    the same index waits and reads what the first keeps: one build between them."""
    cache = AnnCache(tmp_path / "ann", 10**9)
    vectors = _unit(400)
    started, gate, count = threading.Event(), threading.Event(), []

    def held(rows: Any, **kw: Any) -> Any:
        count.append(len(rows))
        started.set()
        assert gate.wait(30)
        return build_ann(rows, **kw)

    monkeypatch.setattr(ann_cache, "build_ann", held)
    got: dict[str, Any] = {}
    first = threading.Thread(target=lambda: got.update(first=built(vectors, None, cache)))
    first.start()
    assert started.wait(30)
    marker = tmp_path / "ann" / f".{ann_identity(vectors)}.building"
    assert marker.read_text() == f"{socket.gethostname()} {os.getpid()}"
    second = threading.Thread(target=lambda: got.update(second=built(vectors.copy(), None, cache)))
    second.start()
    time.sleep(0.6)  # the second waits (its look every quarter second finds the claim)
    assert second.is_alive() and count == [400]
    gate.set()
    first.join(30)
    second.join(30)
    assert count == [400] and got["first"] is not None and got["second"] is not None
    assert _answers(got["second"], _unit(10, seed=1)) == _answers(got["first"], _unit(10, seed=1))
    assert not marker.exists()


def test_a_claim_whose_process_is_gone_is_taken_over(tmp_path: Path, builds: list[int]) -> None:
    """A claim of a process that no longer runs on this host, one left half made, and one of
    another host or of a running pid past `_STALE_CLAIM` are taken over and built; a fresh one
    of another host is waited for until the caller stops."""
    cache = AnnCache(tmp_path / "ann", 10**9)
    (tmp_path / "ann").mkdir()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    here = socket.gethostname()
    owners = [
        f"{here} {gone.stdout.strip()}",
        "",
        "elsewhere 1",
        f"{here} {os.getpid()}",
    ]  # the last: a pid reused
    for n, owner in enumerate(owners):
        vectors = _unit(100 + n, seed=n)
        marker = tmp_path / "ann" / f".{ann_identity(vectors)}.building"
        marker.write_text(owner)
        if owner != owners[0]:
            old = time.time() - ann_cache._STALE_CLAIM - 1
            os.utime(marker, (old, old))
        bounded = threading.Event()  # a claim wrongly left to stand: waited for 30 s, then None
        threading.Timer(30, bounded.set).start()
        assert built(vectors, None, cache, bounded) is not None and builds[-1] == 100 + n
        bounded.set()
        assert not marker.exists() and cache.load(ann_identity(vectors), 100 + n, 32) is not None
    vectors = _unit(50, seed=9)
    (tmp_path / "ann" / f".{ann_identity(vectors)}.building").write_text("elsewhere 1")
    stop = threading.Event()
    threading.Timer(0.6, stop.set).start()
    assert built(vectors, None, cache, stop) is None and len(builds) == 4  # waited, not built
