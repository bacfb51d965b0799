"""The served index's fast exact ranking (the nearest keys first, proven, else every key)
against the ranking of every version by a stable sort, on random data with ties."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from flowmem.models import UsageStats
from flowmem.policy.lifecycle import DEFAULT_PARAMS
from flowmem.retrieval import ranking
from flowmem.retrieval.ann import KeyANN, breadth
from flowmem.retrieval.blas import ONE_BLAS_THREAD
from flowmem.retrieval.cover import Evidence
from flowmem.retrieval.nearest import SHARE_WEIGHT, snap_cosines
from flowmem.retrieval.ranking import Ask, Ranked, Snapshot
from flowmem.storage.served import ServedRows


def _unit(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _snapshot(
    rng: np.random.Generator, n: int, *, keys: int, pool: int, trials: int, dim: int = 24
) -> Snapshot:
    """n versions with 1..keys keys each drawn from `pool` distinct vectors (ties), varied
    shares and usage (rank factors), `trials` candidate versions on trial beside their active one."""
    counts = rng.integers(1, keys + 1, size=n)
    vectors = _unit(rng.normal(size=(pool, dim)))[rng.integers(0, pool, size=int(counts.sum()))]
    ids = [f"w{i:05d}" for i in range(n)]
    statuses = ["active"] * n
    for i in rng.choice(n - 1, size=trials, replace=False):
        if ids[i + 1] != ids[i] and statuses[i] == "active" and statuses[i + 1] == "active":
            ids[i + 1], statuses[i + 1] = ids[i], "candidate"  # a candidate beside its active version
    stats = [
        UsageStats(served=int(r) + int(s) + int(f), successes=int(s), failures=int(f))
        for r, s, f in zip(
            rng.integers(0, 20, n),
            rng.integers(0, 6, n) * rng.integers(0, 2, n),
            rng.integers(0, 4, n),
            strict=True,
        )
    ]
    codes = np.zeros(n, dtype=np.int32)
    rows = ServedRows(
        ids=ids,
        versions=np.where(np.array(statuses) == "candidate", 2, 1).astype(np.int64),
        statuses=statuses,
        stats=stats,
        agents=codes,
        agent_names=["a"],
        scopes=codes,
        scope_names=["s"],
        keys=vectors,
        owners=np.repeat(np.arange(n, dtype=np.int64), counts),
        shares=rng.choice([1.0, 1.0, 0.5, 0.2], size=len(vectors)) if keys > 1 else np.ones(len(vectors)),
        subroutine=np.zeros(n, dtype=bool),
        by_example=np.ones(n, dtype=bool),
        table=None,
    )
    return Snapshot.of(rows)


def _reference(snap: Snapshot, query: npt.NDArray[np.float32], ask: Ask, *, by_rows: bool = False) -> Ranked:
    """Every version scored, sorted stably (ties by position), the trial pairs decided on the top
    until none of it loses: the ranking before the fast path (`by_rows`: each key's product as
    the ANN path computes it, `KeyANN.products`, rather than by BLAS, whose float sums differ)."""
    if by_rows:
        cosines = KeyANN.products(snap.index.vectors, query, np.arange(len(snap.index.vectors)))
    else:
        with ONE_BLAS_THREAD:
            cosines = snap.index.vectors @ query
    per_key = snap_cosines(cosines) - SHARE_WEIGHT * (1.0 - np.asarray(snap.rows.shares))
    similarity = np.full(len(snap), -np.inf)
    for key, owner in enumerate(snap.index.owners.tolist()):
        similarity[owner] = max(similarity[owner], per_key[key])
    allowed = np.isfinite(similarity) if ask.ok is None else ask.ok & np.isfinite(similarity)
    scores = np.where(allowed, similarity * snap.factors, -np.inf)
    while True:
        best = sorted(np.flatnonzero(np.isfinite(scores)), key=lambda i: (-scores[i], i))
        order = np.array(best[: ask.m], dtype=np.int64)
        dropped = {p for i in order.tolist() for p in snap._excluded(i, ask)} & set(order.tolist())
        if not dropped:
            return order, scores[order], similarity[order]
        scores = scores.copy()
        scores[list(dropped)] = -np.inf


@pytest.mark.parametrize(
    ("n", "keys", "pool", "trials"),
    [(3000, 1, 3000, 0), (3000, 1, 40, 0), (2000, 3, 60, 40), (1500, 2, 1500, 100), (300, 1, 20, 10)],
)
def test_fast_exact_ranking_is_the_full_sort(n: int, keys: int, pool: int, trials: int) -> None:
    rng = np.random.default_rng(n + keys + pool)
    snap = _snapshot(rng, n, keys=keys, pool=pool, trials=trials)
    masks: list[npt.NDArray[np.bool_] | None] = [None, rng.random(n) < 0.6, rng.random(n) < 0.1]
    for q in range(30):
        # Queries near a stored key (ties among its copies), and random ones.
        base = snap.index.vectors[rng.integers(len(snap.index.vectors))] if q % 2 else rng.normal(size=24)
        query = _unit((base + rng.normal(scale=0.3 * (q % 3), size=24))[None, :])[0]
        for ok in masks:
            for m, share in ((20, 0.0), (3, 0.5), (60, 1.0)):
                ask = Ask(f"task {q}", m, ok, share)
                got, want = snap.ranked(query, ask), _reference(snap, query, ask)
                for a, b in zip(got, want, strict=True):
                    assert np.array_equal(a, b), (q, m, share)


def test_the_nearest_keys_are_proven_without_scoring_every_version() -> None:
    rng = np.random.default_rng(7)
    snap = _snapshot(rng, 5000, keys=1, pool=5000, trials=0)
    query = snap.index.vectors[17]
    keys = np.array([17])
    # No other version can score above 0.5: the key's own version is the best.
    found = snap._proven(query, keys, snap.index.vectors[keys] @ query, 0.5, Ask("t", 1, None, 0.0))
    assert found is not None and found[0].tolist() == [17]
    # 20 versions asked of one key's, or another version might score above it: not proven.
    assert snap._proven(query, keys, snap.index.vectors[keys] @ query, 0.5, Ask("t", 20, None, 0.0)) is None
    assert snap._proven(query, keys, snap.index.vectors[keys] @ query, 10.0, Ask("t", 1, None, 0.0)) is None


def _evidence(rng: np.random.Generator, n: int, dim: int = 24) -> Evidence:
    vectors = _unit(rng.normal(size=(n, dim)))
    return Evidence([f"task {i}" for i in range(n)], [["a.b"]] * n, vectors)


def test_floor_keeps_looks_at_stored_runs_only_when_the_memories_are_below_the_floor() -> None:
    rng = np.random.default_rng(3)
    evidence = _evidence(rng, 400)
    query = evidence.vectors[5]
    calls: list[int] = []
    familiar = evidence.familiar

    def counted(q: npt.NDArray[np.float32], floor: float) -> bool:
        calls.append(1)
        return familiar(q, floor)

    object.__setattr__(evidence, "familiar", counted)
    assert evidence.floor_keeps(query, 0.5, [0.9, 0.1], [True, True], recurs=False) == [True, True]
    assert calls == []  # the nearest memory clears the floor: no stored run looked at
    assert evidence.floor_keeps(query, 0.5, [0.3, 0.1], [True, False], recurs=False) == [True, True]
    assert calls == [1]  # below: the task is of a known domain (its own run is stored)
    far = -query
    assert evidence.floor_keeps(far, 0.95, [0.3, 0.1], [True, False], recurs=False) == [False, True]


class _ExactANN(KeyANN):
    """An ANN that returns the truly nearest keys, counting its searches."""

    def __init__(self, vectors: npt.NDArray[np.float32]) -> None:
        super().__init__(None, len(vectors))
        self.vectors, self.searches = vectors, 0
        self.asked: list[int] = []
        """How many keys each search asked for."""

    def search(
        self, query: npt.NDArray[np.float32], count: int, ef: int | None = None
    ) -> npt.NDArray[np.int64]:
        self.searches += 1
        self.asked.append(count)
        return np.argsort(-(self.vectors @ query), kind="stable")[:count].astype(np.int64)


class _Unscanned(np.ndarray):
    """Run vectors that refuse a product with every row."""

    def __matmul__(self, other: object) -> Any:
        raise AssertionError("every run scored")


class _ExactRows(_ExactANN):
    """An exact ANN whose re-rank reads the rows it is given (not faiss's products)."""

    @staticmethod
    def products(
        vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], keys: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.float32]:
        return np.asarray(vectors)[keys] @ query


def test_a_recurring_task_s_runs_are_found_by_the_index_not_by_scoring_every_run() -> None:
    """With an index of the stored tasks, `runs_for` scores the runs of the task's template and
    those of the tasks the index finds nearest: the same runs, and the same answer, as scoring
    every run wherever the index finds the nearest tasks, on runs whose tasks repeat (so a
    stored task's row in the index is not its run's) beside other tasks seen (failed runs)."""
    rng = np.random.default_rng(11)
    verbs, things = ["send", "file", "close", "merge"], ["report", "ticket", "invoice"]
    centres = {(v, t): rng.normal(size=24) for v in verbs for t in things}
    texts, rows = [], []
    for i in range(900):
        verb, thing = verbs[i % 4], things[(i // 4) % 3]
        value = int(rng.integers(40))  # few values: a task comes back, as runs retried
        texts.append(f"{verb} the {thing} {value}")
        rows.append(centres[verb, thing] + rng.normal(scale=0.8, size=24) + value / 40)
    vectors = _unit(np.array(rows))
    by_text = {t: vectors[texts.index(t)] for t in texts}  # the same task, the same vector
    vectors = np.array([by_text[t] for t in texts], dtype=np.float32)
    others = _unit(rng.normal(size=(20, 24)))
    actions = [[f"a.{i % 7}"] for i in range(900)]
    exact = Evidence(texts, actions, vectors, share=0.1, others=others)
    indexed = Evidence(texts, actions, vectors.view(_Unscanned), share=0.1, others=others)
    assert len(exact.seen_vectors) == len(by_text) + 20 < 920
    indexed.index.ann = _ExactRows(np.asarray(indexed.seen_vectors))
    found = []
    for q in range(80):
        verb, thing = verbs[q % 4], things[(q // 4) % 3]
        # Near its own kind's runs, near another kind's, or near a failed run's task.
        near = [others[q % 20] * 3, *[centres[verb, thing]] * 3, list(centres.values())[q * 7 % 12]][q % 5]
        query = _unit((near + rng.normal(scale=0.8, size=24))[None, :])[0]
        task = f"{verb} the {thing} {100 + q}"
        want = exact.runs_for(task, query)
        assert indexed.runs_for(task, query) == want, q
        found.append(bool(want))
    assert 10 < sum(found) < 70  # both kinds: tasks that recur and known tasks that do not


@pytest.mark.parametrize("boosted", [5, 300])
def test_versions_ranked_up_by_outcomes_are_scored_beside_the_ann_keys(
    boosted: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few versions whose outcomes raised their rank factor (to 1.5) can outscore nearer
    ones: they are scored exactly beside the ANN's nearest keys, so the ranking is the full
    sort's and is proven from the first keys; past `BOOSTED` such keys, the largest factor of
    those left bounds the rest, and the ranking is still the full sort's."""
    monkeypatch.setattr(ranking, "BOOSTED", 64)
    rng = np.random.default_rng(boosted)
    rows = _snapshot(rng, 6000, keys=1, pool=6000, trials=0).rows
    assert isinstance(rows, ServedRows)
    lucky = rng.choice(len(rows), size=boosted, replace=False)
    stats = [UsageStats()] * len(rows)  # untried: factor 1
    for i in lucky.tolist():
        stats[i] = UsageStats(served=40, successes=40)
    snap = Snapshot.of(replace(rows, stats=stats))
    ann = _ExactANN(snap.index.vectors)
    snap.slot.ann = ann
    for q in range(20):
        near = snap.index.vectors[lucky[q % len(lucky)]]
        query = _unit((near + rng.normal(scale=0.6, size=24))[None, :])[0]
        ask = Ask(f"task {q}", 20, None, 0.0)
        before = ann.searches
        got, want = snap.ranked(query, ask), _reference(snap, query, ask, by_rows=True)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b), q
        if boosted <= ranking.BOOSTED:
            assert ann.searches - before == 1  # proven from the first keys


@pytest.mark.parametrize(
    ("size", "m", "first"), [(6000, 20, 40), (6000, 30, 60), (30_000, 20, 64), (100_000, 20, 64)]
)
def test_the_ann_is_asked_first_for_no_more_keys_than_it_looks_at(size: int, m: int, first: int) -> None:
    """An HNSW looks at least at as many keys as it is asked for: up to 10k keys, where its
    breadth is `EF_SMALL` (40), the ranking asks it first for that many, or for twice the
    versions asked for when that is more; from 64 keys of breadth on, for 64. The ranking is
    the full sort's either way."""
    rng = np.random.default_rng(size + m)
    snap = _snapshot(rng, 6000, keys=1, pool=6000, trials=0)
    ann = _ExactANN(snap.index.vectors)
    ann.size, ann.breadth = size, breadth(size)  # an HNSW of that many keys, and its breadth
    snap.slot.ann = ann
    for q in range(10):
        query = _unit(rng.normal(size=(1, 24)))[0]
        ask = Ask(f"task {q}", m, None, 0.0)
        ann.asked.clear()
        got, want = snap.ranked(query, ask), _reference(snap, query, ask, by_rows=True)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b), q
        assert ann.asked[0] == first


class _ScaledANN(_ExactANN):
    """An exact ANN over keys scaled by the factors they had when it was built."""

    def __init__(self, vectors: npt.NDArray[np.float32], scale: npt.NDArray[np.float64]) -> None:
        super().__init__((vectors * scale[:, None]).astype(np.float32))


def test_an_ann_of_keys_scaled_by_their_factors_ranks_as_the_full_sort(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every version with outcomes (factors from 0.6 to 1.5): the ANN holds each key scaled by
    its factor when built (`Snapshot.to_build`), and its bound (the farthest key's product
    scaled, times the largest factor over scale left) proves the ranking from the first keys;
    after outcomes change some factors (`with_stats`), those grown are scored beside it, and
    the ranking is still the full sort's."""
    monkeypatch.setattr(ranking, "BOOSTED", 64)
    rng = np.random.default_rng(11)
    rows = _snapshot(rng, 6000, keys=2, pool=6000, trials=0).rows
    assert isinstance(rows, ServedRows)
    stats = [
        UsageStats(served=int(s + f), successes=int(s), failures=int(f))
        for s, f in zip(rng.integers(0, 12, len(rows)), rng.integers(0, 12, len(rows)), strict=True)
    ]
    snap = Snapshot.of(replace(rows, stats=stats))
    assert len(set(snap.factors.tolist())) > 20 and (snap.factors > 1).mean() > 0.3
    slot = snap.to_build()
    assert slot.scale is not None
    ann = _ScaledANN(snap.index.vectors, slot.scale)
    slot.ann = ann
    later = list(stats)
    for i in rng.choice(len(rows), size=40, replace=False).tolist():
        later[i] = UsageStats(served=30, successes=30)  # grown: scored beside the ANN
    for i in rng.choice(len(rows), size=40, replace=False).tolist():
        later[i] = UsageStats(served=30, failures=30)
    grown = snap.with_stats(replace(rows, stats=later), range(len(rows)), DEFAULT_PARAMS)
    for current in (snap, grown):
        searches = []
        for q in range(30):
            query = _unit(rng.normal(size=(1, 24)))[0]  # near no key in particular
            ask = Ask(f"task {q}", 20, None, 0.0)
            before = ann.searches
            got, want = current.ranked(query, ask), _reference(current, query, ask, by_rows=True)
            # The same versions; a version's other keys are multiplied by BLAS here, whose sums
            # may round a cosine to the next step (`snap_cosines`).
            assert np.array_equal(got[0], want[0]), q
            assert np.allclose(got[1], want[1], rtol=0, atol=2**-15) and np.allclose(
                got[2], want[2], rtol=0, atol=2**-15
            )
            searches.append(ann.searches - before)
        assert np.median(searches) == 1  # proven from the first keys, as a store of untried ones


def test_an_outcome_carries_the_boost_over_as_worked_out_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    """`with_stats` changes the factors of a few versions' keys and carries the boost over: the
    same keys scored exactly as working it out anew gives, bounds no narrower, the key factors
    as the full gather gives; past `BOOSTED` keys above 1 it is worked out anew."""
    rng = np.random.default_rng(5)
    rows = _snapshot(rng, 3000, keys=3, pool=3000, trials=0).rows
    assert isinstance(rows, ServedRows)
    snap = Snapshot.of(rows)
    slot = snap.to_build()
    slot.ann = _ScaledANN(snap.index.vectors, slot.scale)  # type: ignore[arg-type]
    snap.boost(slot)
    current, stats = snap, list(rows.stats)
    changed: list[int] = []
    for _ in range(4):  # some versions changed again: ranked up, then down
        changed = sorted(set(rng.choice(len(rows), size=20, replace=False).tolist()) | set(changed[:15]))
        for i in changed:
            s, f = (int(x) for x in rng.integers(0, 9, 2))
            stats[i] = UsageStats(served=s + f, successes=s, failures=f)
        following = current.with_stats(replace(rows, stats=list(stats)), changed, DEFAULT_PARAMS)
        assert np.array_equal(following.key_factors, following.factors[following.index.owners])
        assert following._boost is not None and following._boost[0] is slot
        carried = following._boost[1]
        following._boost = None
        fresh = following.boost(slot)
        assert np.array_equal(carried.keys, fresh.keys)
        assert carried.rest >= fresh.rest and carried.least <= fresh.least and carried.rest <= 1.0
        following._boost = (slot, carried)
        current = following
    monkeypatch.setattr(ranking, "BOOSTED", 5)
    ups = [UsageStats(served=9, successes=9)] * len(rows)
    assert current.with_stats(replace(rows, stats=ups), range(len(rows)), DEFAULT_PARAMS)._boost is None


@pytest.mark.parametrize("n", [5, 20, 79, 80, 81, 300])
def test_the_best_scores_are_a_stable_sorts_whether_all_are_sorted_or_partitioned_first(n: int) -> None:
    """`ranking._top` sorts every finite score up to `_SORT_ALL` × m of them, and partitions
    first past it: either way the m best, ties by item, as a stable sort of every score."""
    rng = np.random.default_rng(n)
    for _ in range(50):
        scores = rng.integers(0, 6, size=n).astype(np.float64) / 5
        scores[rng.random(n) < 0.2] = -np.inf
        items = rng.permutation(n).astype(np.int64)
        finite = np.flatnonzero(np.isfinite(scores))
        want = finite[np.lexsort((items[finite], -scores[finite]))][:20]
        assert ranking._top(scores, 20, items).tolist() == want.tolist()
        want_plain = finite[np.argsort(-scores[finite], kind="stable")][:20]
        assert ranking._top(scores, 20).tolist() == want_plain.tolist()
