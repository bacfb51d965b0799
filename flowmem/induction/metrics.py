"""Evaluation metrics of retrieved memories (definitions in docs/metrics.md). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flowmem.induction.align import lcs_len
from flowmem.induction.literals import MIN_CHARS, find_literals, scalar_text

__all__ = ["LeakChecker", "Retrieval", "clustering_scores", "memory_metrics", "slot_literals"]


@dataclass(frozen=True)
class Retrieval:
    """What was retrieved for one test trajectory."""

    test_actions: list[str]
    """The test run's action names."""
    test_success: bool
    """Whether the test run succeeded (coverage counts successful runs only)."""
    memories: list[tuple[str, list[str], str]]
    """Per retrieved memory: (memory id, its action names, its rendered text)."""


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


def slot_literals(slots: Sequence[dict[str, object]]) -> set[str]:
    """Every template slot value (≥ 3 characters) of the training runs."""
    found: set[str] = set()
    for s in slots:
        for value in s.values():
            text = scalar_text(value)
            if text is not None and len(text) >= MIN_CHARS:
                found.add(text)
    return found


def memory_metrics(
    retrievals: Sequence[Retrieval], leak: LeakChecker, slot_leak: LeakChecker | None, n_memories: int
) -> dict[str, float | int | None]:
    """coverage, step_precision, utility_rate, leakage, slot_leakage, tokens_per_prompt, memories."""
    coverage = precision = useful = 0.0
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
        best, best_len = 0, 0
        for _, actions, _ in r.memories:
            n = lcs_len(actions, r.test_actions)
            # The best memory has the longest LCS; among equals, the higher-ranked one (the
            # argmax convention, as in the reference measurement of the raw baseline).
            if n > best:
                best, best_len = n, len(actions)
        coverage += best / len(r.test_actions)
        precision += best / best_len if best else 0.0
        useful += best >= min(2, len(r.test_actions))
    return {
        "coverage": round(coverage / scored, 4) if scored else None,
        "step_precision": round(precision / scored, 4) if scored else None,
        "utility_rate": round(useful / scored, 4) if scored else None,
        "leakage": round(leaked / pairs, 4) if pairs else 0.0,
        "slot_leakage": round(slot_leaked / pairs, 4)
        if slot_leak and pairs
        else (0.0 if slot_leak else None),
        "tokens_per_prompt": round(tokens / len(retrievals), 2) if retrievals else 0.0,
        "memories": n_memories,
        "scored_test_runs": scored,
    }


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
