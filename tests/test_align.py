"""Action-sequence alignment (`retrieval.align`) against the plain table it speeds up, and the
matches `cover` keeps between searches."""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence

from flowmem.retrieval import cover as cover_module
from flowmem.retrieval.align import lcs_len, lcs_pairs, pattern_pairs
from flowmem.retrieval.cover import cover


def _plain_pairs(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """The definition, by recursion over every step of both: the longest common subsequence's
    length of each pair of suffixes, and the walk that takes a match and otherwise leaves out
    `a`'s step unless that shortens what is left."""
    n, m = len(a), len(b)

    @functools.cache
    def length(i: int, j: int) -> int:
        if i == n or j == m:
            return 0
        return length(i + 1, j + 1) + 1 if a[i] == b[j] else max(length(i + 1, j), length(i, j + 1))

    def walk(i: int, j: int) -> list[tuple[int, int]]:
        if i == n or j == m:
            return []
        if a[i] == b[j]:
            return [(i, j), *walk(i + 1, j + 1)]
        return walk(i + 1, j) if length(i + 1, j) >= length(i, j + 1) else walk(i, j + 1)

    return walk(0, 0)


def _sequences(rng: random.Random) -> tuple[list[str], list[str]]:
    actions = [f"act{i}" for i in range(rng.randrange(1, 8))]
    a = [rng.choice(actions + ["only_a", "other_a"]) for _ in range(rng.randrange(0, 20))]
    b = [rng.choice(actions + ["only_b"]) for _ in range(rng.randrange(0, 10))]
    return a, b


def test_pairs_and_lengths_are_the_plain_tables_with_steps_the_other_lacks() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        a, b = _sequences(rng)
        want = _plain_pairs(a, b)
        assert lcs_pairs(a, b) == want, (a, b)
        assert lcs_len(a, b) == len(want) == lcs_len(b, a)


def test_a_step_the_pattern_lacks_is_skipped_wherever_it_falls() -> None:
    run = ["search", "log", "open", "log", "reply", "log"]
    assert lcs_pairs(run, ["search", "open", "reply"]) == [(0, 0), (2, 1), (4, 2)]
    assert lcs_pairs(run, ["delete"]) == []
    assert pattern_pairs(run, ["search", ("open", "reply")]) == [(0, 0), (2, 1), (4, 2)]


def test_cover_matches_each_run_and_memory_once_across_searches() -> None:
    cover_module._match.cache_clear()
    runs = [["search", "open", "reply"], ["search", "open", "reply"], ["search", "delete"]]
    candidates = [["search", "open"], ["reply"], ["search", "open"], ["delete"]]
    first = cover(candidates, runs, k=3)
    distinct = 2 * 3  # two distinct runs, three distinct memories
    assert cover_module._match.cache_info().misses == distinct
    assert cover(candidates, runs, k=3) == first == [0, 1, 3]
    assert cover_module._match.cache_info().misses == distinct


def _plain_cover(candidates: list[list[str]], runs: list[list[str]], k: int, weight: float) -> list[int]:
    """`cover` as first written: every memory matched with every run by the plain table, and
    every memory valued in every round."""
    matches = [
        [({i for i, _ in p}, len({j for _, j in p})) for p in (_plain_pairs(run, c) for run in runs)]
        for c in candidates
    ]
    covered: list[set[int]] = [set() for _ in runs]
    hits, shown, best = [0] * len(runs), 0, 0.0
    chosen: list[int] = []

    def value(found: list[tuple[set[int], int]], size: int) -> float:
        total = 0.0
        for r, run in enumerate(runs):
            extra, used = found[r]
            precision = (hits[r] + used) / (shown + size) if shown + size else 0.0
            total += len(covered[r] | extra) / len(run) + weight * precision
        return total / len(runs)

    while len(chosen) < k:
        values = [(value(matches[i], len(c)), -i) for i, c in enumerate(candidates) if c and i not in chosen]
        found, minus = max(values, default=(best, 0))
        if found <= best:
            break
        chosen.append(-minus)
        for r, (steps, used) in enumerate(matches[-minus]):
            covered[r] |= steps
            hits[r] += used
        shown += len(candidates[-minus])
        best = found
    return chosen


def test_cover_chooses_as_the_plain_greedy_does() -> None:
    rng = random.Random(11)
    actions = [f"act{i}" for i in range(6)]
    for _ in range(400):
        runs = [[rng.choice(actions) for _ in range(rng.randrange(1, 9))] for _ in range(rng.randrange(1, 5))]
        runs += runs[: rng.randrange(2)]  # a run's actions repeated, as recurring tasks' runs are
        candidates = [
            [rng.choice([*actions, "elsewhere"]) for _ in range(rng.randrange(0, 4))] for _ in range(12)
        ]
        candidates += candidates[: rng.randrange(3)]
        for k in (1, 3):
            assert cover(candidates, runs, k=k, weight=0.35) == _plain_cover(candidates, runs, k, 0.35)
