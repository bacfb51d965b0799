"""Action-sequence alignment: longest common subsequences and the medoid of a set of runs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from fractions import Fraction

__all__ = ["Pattern", "flat_pattern", "lcs_len", "lcs_pairs", "medoid", "pattern_pairs"]


def _table(a: Sequence[str], b: Sequence[str]) -> list[list[int]]:
    """dp[i][j]: the length of the longest common subsequence of a[i:] and b[j:]. The row's
    value to the right is carried in a local and `max` is a comparison: half the time of
    indexing and calling it per cell (a search's `cover` runs hundreds of these)."""
    n, m = len(a), len(b)
    dp = [[0] * (m + 1) for _ in range(n + 1)]
    columns = range(m - 1, -1, -1)
    for i in range(n - 1, -1, -1):
        row, below, here = dp[i], dp[i + 1], a[i]
        right = 0
        for j in columns:
            if here == b[j]:
                right = below[j + 1] + 1
            elif below[j] > right:
                right = below[j]
            row[j] = right
    return dp


def lcs_len(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two action sequences (each first cut to
    the actions the other holds: the others are in no common subsequence)."""
    common = set(a) & set(b)
    if not common:
        return 0
    return _table([x for x in a if x in common], [x for x in b if x in common])[0][0]


def lcs_pairs(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """Index pairs (i, j) with a[i] == b[j] along one longest common subsequence.

    The steps of `a` whose action `b` does not hold are left out first and the pairs mapped
    back: the same pairs, as the walk below always steps past such a step (its row of the
    table equals the next one's), for a smaller table."""
    held = set(b)
    kept = [i for i, x in enumerate(a) if x in held]
    if len(kept) == len(a):
        return _pairs(a, b)
    return [(kept[i], j) for i, j in _pairs([a[i] for i in kept], b)] if kept else []


def _pairs(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int]]:
    """`lcs_pairs`, by the table and a walk from its corner."""
    dp = _table(a, b)
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif dp[i + 1][j] >= dp[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


def medoid(sequences: Sequence[Sequence[str]]) -> int:
    """Index of the sequence that agrees best with all others.

    Agreement is the Dice overlap 2·LCS/(len a + len b), which rewards covering the other
    runs' steps and penalises steps they do not take; ties go to the shorter, then the first.
    Runs of one kind often repeat the same actions: each distinct sequence is compared once
    with each other, weighted by how often it occurs, and the totals are kept exact (a tie is
    a tie, whatever the order of the sums).
    """
    first: dict[tuple[str, ...], int] = {}
    count: Counter[tuple[str, ...]] = Counter()
    for i, seq in enumerate(sequences):
        key = tuple(seq)
        first.setdefault(key, i)
        count[key] += 1
    distinct = list(first)
    best, best_key = 0, (Fraction(-1), 0)
    for a in distinct:
        total = sum(
            (
                n * (Fraction(2 * lcs_len(a, b), len(a) + len(b)) if a or b else Fraction(1))
                for b, n in count.items()
            ),
            Fraction(0),
        )
        rank = (total, -len(a))
        if rank > best_key:  # in order of first occurrence: a tie keeps the first
            best, best_key = first[a], rank
    return best


Pattern = Sequence[str | tuple[str, ...]]
"""Actions as a workflow prescribes them: a plain action, or a loop as the tuple of its
body's actions, done once or more (`models.Workflow.pattern`)."""


def flat_pattern(pattern: Pattern) -> list[str]:
    """A pattern's actions with each loop's body once: one per workflow step."""
    return [a for item in pattern for a in ((item,) if isinstance(item, str) else item)]


def pattern_pairs(run: Sequence[str], pattern: Pattern) -> list[tuple[int, int]]:
    """Index pairs (i, j) along one longest common subsequence of a run's actions and a
    pattern, `run[i]` matched by step `j` of the pattern (`flat_pattern`'s positions), a
    loop's body repeated as often as the run could use it: a step of a loop's body may match
    several of the run's steps. Without loops, `lcs_pairs`."""
    if all(isinstance(item, str) for item in pattern):
        return lcs_pairs(run, [a for a in pattern if isinstance(a, str)])
    expanded: list[str] = []
    step_of: list[int] = []
    j = 0
    for item in pattern:
        if isinstance(item, str):
            expanded.append(item)
            step_of.append(j)
            j += 1
            continue
        times = max(1, -(-len(run) // len(item)))
        for _ in range(times):
            expanded += item
            step_of += range(j, j + len(item))
        j += len(item)
    return [(i, step_of[k]) for i, k in lcs_pairs(run, expanded)]
