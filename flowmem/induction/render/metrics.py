"""Evaluation metrics of retrieved memories (definitions in docs/metrics.md). Pure."""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from flowmem.induction.literals import MIN_CHARS, find_literals, scalar_text
from flowmem.models import Condition
from flowmem.retrieval.align import Pattern, flat_pattern, lcs_len, pattern_pairs

__all__ = [
    "LeakChecker",
    "Retrieval",
    "clustering_scores",
    "contrast_conditions",
    "described",
    "memory_metrics",
    "redundancy",
    "rejected_clusters",
    "slot_literals",
    "warning_metrics",
]

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Retrieval:
    """What was retrieved for one test trajectory."""

    test_actions: list[str]
    """The test run's action names."""
    test_success: bool
    """Whether the test run succeeded (coverage counts successful runs only)."""
    memories: list[tuple[str, Pattern, str]]
    """Per retrieved memory: (memory id, its actions as a `Pattern`: a loop as its body's
    tuple, `Workflow.pattern`; a raw run's action names), its rendered text)."""


class LeakChecker:
    """Does a rendered memory contain one of a set of literals? (cached per memory id)"""

    def __init__(self, literals: set[str]) -> None:
        self.literals = {lit.lower() for lit in literals if len(lit) >= MIN_CHARS}
        self._cache: dict[str, bool] = {}

    def leaks(self, memory_id: str, text: str) -> bool:
        """True if the text contains any literal, word-bounded, case-insensitive."""
        if memory_id not in self._cache:
            low = text.lower()
            candidates = [lit for lit in self.literals if lit in low]  # cheap pre-filter
            self._cache[memory_id] = bool(candidates and find_literals(text, candidates))
        return self._cache[memory_id]


def slot_literals(
    slots: Iterable[Mapping[str, object]], tasks: Iterable[str], *, max_share: float = 0.1
) -> set[str]:
    """The example-specific template slot values of the training runs: every value (≥ 3
    characters) that occurs, as `find_literals` matches, in fewer than `max_share` of the
    distinct task texts. A word that most tasks of a kind carry is the template's, not an
    example's."""
    values: dict[str, str] = {}
    for s in slots:
        for value in s.values():
            text = scalar_text(value)
            if text is not None and len(text) >= MIN_CHARS:
                values.setdefault(text.lower(), text)
    distinct = sorted(set(tasks))
    # Every \w+ run of a value found whole-word in a task is a \w+ run of that task, so the
    # tasks holding all of a value's words are a superset of those it occurs in: a value with
    # fewer candidates than the limit needs no regex at all.
    postings: dict[str, set[int]] = defaultdict(set)
    for i, task in enumerate(distinct):
        for word in _WORD.findall(task.lower()):
            postings[word].add(i)
    limit = max_share * len(distinct)
    found: set[str] = set()
    for low, text in values.items():
        words = set(_WORD.findall(low))
        candidates = (
            set.intersection(*(postings.get(w, set()) for w in words)) if words else set(range(len(distinct)))
        )
        n = 0
        if len(candidates) >= limit:
            for i in sorted(candidates):
                n += bool(find_literals(distinct[i], [text]))
                if n >= limit:
                    break
        if n < limit:
            found.add(text)
    return found


def memory_metrics(
    retrievals: Sequence[Retrieval], leak: LeakChecker, slot_leak: LeakChecker | None, n_memories: int
) -> dict[str, float | int | None]:
    """coverage, step_precision, joint_coverage, joint_precision, utility_rate, leakage,
    slot_leakage, tokens_per_prompt, memories, scored_test_runs, served_nothing."""
    coverage = precision = joint_coverage = joint_precision = useful = 0.0
    scored = pairs = leaked = slot_leaked = 0
    tokens = 0
    for r in retrievals:
        texts = [text for _, _, text in r.memories]
        tokens += len("\n\n".join(texts).split())
        for mid, _, text in r.memories:
            pairs += 1
            leaked += leak.leaks(mid, text)
            slot_leaked += bool(slot_leak and slot_leak.leaks(mid, text))
        if not (r.test_success and r.test_actions):
            continue
        scored += 1
        best, best_used, best_len = 0, 0, 0
        matched: set[int] = set()  # test positions matched by any memory
        shown = hits = 0  # memory steps shown, and matched
        for _, pattern, _ in r.memories:
            aligned = pattern_pairs(r.test_actions, pattern)
            n = len(aligned)  # the run's steps it matches (a loop's body as often as repeated)
            used = len({j for _, j in aligned})  # its own steps that match (a body's once)
            size = len(flat_pattern(pattern))
            # The best memory has the longest LCS; among equals, the higher-ranked one (the
            # argmax convention, as in the reference measurement of the raw baseline).
            if n > best:
                best, best_used, best_len = n, used, size
            matched.update(i for i, _ in aligned)
            shown, hits = shown + size, hits + used
        coverage += best / len(r.test_actions)
        precision += best_used / best_len if best else 0.0
        joint_coverage += len(matched) / len(r.test_actions)
        joint_precision += hits / shown if shown else 0.0
        useful += best >= min(2, len(r.test_actions))

    def mean(total: float) -> float | None:
        return round(total / scored, 4) if scored else None

    return {
        "coverage": mean(coverage),
        "step_precision": mean(precision),
        "joint_coverage": mean(joint_coverage),
        "joint_precision": mean(joint_precision),
        "utility_rate": mean(useful),
        "leakage": round(leaked / pairs, 4) if pairs else 0.0,
        "slot_leakage": round(slot_leaked / pairs, 4)
        if slot_leak and pairs
        else (0.0 if slot_leak else None),
        "tokens_per_prompt": round(tokens / len(retrievals), 2) if retrievals else 0.0,
        "memories": n_memories,
        "scored_test_runs": scored,
        "served_nothing": round(sum(not r.memories for r in retrievals) / len(retrievals), 4)
        if retrievals
        else 0.0,
    }


def _nth_pair(p: int) -> tuple[int, int]:
    """The p-th pair (i, j), j < i, in the order (1, 0), (2, 0), (2, 1), (3, 0), ..."""
    i = (1 + math.isqrt(1 + 8 * p)) // 2
    return i, p - i * (i - 1) // 2


def redundancy(
    sequences: Sequence[Sequence[str]], *, max_pairs: int = 20_000, seed: int = 0
) -> dict[str, float | int | None]:
    """AWM's function overlap: the mean of LCS(a, b) / min(len a, len b) over the pairs of
    action sequences (those with ≥ 1 step); over every pair, or over `max_pairs` pairs drawn
    without replacement with a fixed seed when there are more. Returns `redundancy` (None
    with fewer than two sequences) and `redundancy_pairs` (how many pairs it is over)."""
    seqs = [tuple(s) for s in sequences if s]
    total = len(seqs) * (len(seqs) - 1) // 2
    if total == 0:
        return {"redundancy": None, "redundancy_pairs": 0}
    pairs: Iterator[tuple[int, int]] = (
        itertools.combinations(range(len(seqs)), 2)
        if total <= max_pairs
        else map(_nth_pair, random.Random(seed).sample(range(total), max_pairs))
    )
    # Memories often repeat one action sequence (raw runs of one template): each distinct
    # pair of sequences is aligned once.
    cache: dict[tuple[tuple[str, ...], tuple[str, ...]], float] = {}
    overlap, count = 0.0, 0
    for i, j in pairs:
        a, b = seqs[i], seqs[j]
        key = (a, b) if a <= b else (b, a)
        if key not in cache:
            cache[key] = lcs_len(a, b) / min(len(a), len(b))
        overlap, count = overlap + cache[key], count + 1
    return {"redundancy": round(overlap / count, 4), "redundancy_pairs": count}


def described(descriptions: Sequence[str], *, min_words: int = 4) -> float | None:
    """Share of descriptions with at least `min_words` words and no mask (`{…}` or a bare
    `…`): a description that says when to use the memory. None when there is none."""
    if not descriptions:
        return None
    ok = sum(len(d.split()) >= min_words and "…" not in d for d in descriptions)
    return round(ok / len(descriptions), 4)


def rejected_clusters(reasons: Mapping[str, str]) -> dict[str, int]:
    """Failed clusters counted by reason (cluster key -> reason in), most frequent first."""
    return dict(sorted(Counter(reasons.values()).items(), key=lambda kv: (-kv[1], kv[0])))


def clustering_scores(groups: Sequence[str], labels: Sequence[str | None]) -> dict[str, float]:
    """ARI and NMI of cluster labels against known groups (noise points as singletons)."""
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    flat = [label if label is not None else f"noise-{i}" for i, label in enumerate(labels)]
    noise = sum(label is None for label in labels)
    return {
        "cluster_ari": round(float(adjusted_rand_score(groups, flat)), 4),
        "cluster_nmi": round(float(normalized_mutual_info_score(groups, flat)), 4),
        "noise_fraction": round(noise / len(labels), 4) if labels else 0.0,
    }


# -- Warnings: do the served pitfalls' conditions hold on the test runs? (docs/metrics.md) --


def warning_metrics(outcomes: Sequence[bool | None], warned: Sequence[bool]) -> dict[str, float | int | None]:
    """`warned`: the share of failed test runs on which a served pitfall's condition holds;
    `false_alarms`: the same share of successful test runs (runs of unknown outcome count in
    neither); with the counts they are shares of (None for an empty count)."""
    failed = [w for o, w in zip(outcomes, warned, strict=True) if o is False]
    ok = [w for o, w in zip(outcomes, warned, strict=True) if o is True]
    return {
        "warned": round(sum(failed) / len(failed), 4) if failed else None,
        "false_alarms": round(sum(ok) / len(ok), 4) if ok else None,
        "failed_test_runs": len(failed),
        "successful_test_runs": len(ok),
    }


def contrast_conditions(failed: Sequence[Sequence[str]], ok: Sequence[Sequence[str]]) -> list[Condition]:
    """The contrast baseline's pitfalls from a test run's nearest failed and successful training
    runs (their actions): "does X" for each action only the failed ones take, "skips Y" (by the
    run's end) for each action every successful one takes. None without failed runs."""
    if not failed:
        return []
    ok_any = {a for run in ok for a in run}
    only_failed = sorted({a for run in failed for a in run} - ok_any)
    every_ok = sorted(set.intersection(*(set(run) for run in ok))) if ok else []
    return [Condition(kind="does", action=a) for a in only_failed] + [
        Condition(kind="skips", action=a) for a in every_ok
    ]
