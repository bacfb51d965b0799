"""Which versions of a workflow are served to agents (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from flowmem.models import Workflow
from flowmem.policy.lifecycle import NOT_SERVED

__all__ = ["CANDIDATES", "above_floor", "compose", "served_versions", "within_gap"]

CANDIDATES = 20
"""How many of the best-ranked memories `compose` may look through to fill k places."""


def served_versions(versions: Iterable[Workflow]) -> list[Workflow]:
    """The versions search may serve, by workflow id, newest first within a workflow.

    Per workflow: its latest active version, and its latest candidate newer than that (a
    search serves the candidate to a share of requests, `lifecycle.serve_candidate`); with no
    active version, its latest candidate. Deprecated and retired versions are never served.
    """
    chosen: dict[str, list[Workflow]] = {}
    for w in sorted(versions, key=lambda w: (w.id, -w.version)):
        picked = chosen.setdefault(w.id, [])
        if w.status in NOT_SERVED or any(p.status == "active" for p in picked):
            continue
        if w.status == "active" or not picked:
            picked.append(w)
    return [w for _, picked in sorted(chosen.items()) for w in picked]


def within_gap(scores: Sequence[float], gap: float | None, ratio: float | None = None) -> int:
    """How many of the memories, scored best first, to consider serving: those that score at
    most `gap` below the first and at least `ratio` times the first (when it is positive);
    None leaves either bound out. A memory much farther from the task than the best one fits
    another kind of task; leaving it out makes k a maximum. The ratio does not move when every
    score is scaled alike (rank factors, an embedder whose cosines run lower or higher)."""
    if not scores:
        return 0
    floor = -float("inf") if gap is None else scores[0] - gap
    if ratio is not None and scores[0] > 0:
        floor = max(floor, ratio * scores[0])
    for i, s in enumerate(scores):
        if s < floor:
            return i
    return len(scores)


def above_floor(similarity: Sequence[float], by_example: Sequence[bool], floor: float | None) -> list[bool]:
    """Which of the ranked memories a task may be served under the relevance floor.

    The floor is a task-to-task similarity: when the memory keyed by example tasks that is
    nearest to the task is less similar than `floor`, the task is from no domain those
    examples know, and none of them is served. Otherwise the floor takes nothing away: the
    others are judged against the first (`within_gap`), as a task's further needs score lower
    than its main one. A memory keyed by its own text (no example tasks) is not held to it."""
    if len(similarity) != len(by_example):
        raise ValueError(f"{len(similarity)} similarities for {len(by_example)} memories")
    # One held at the floor keeps them all: looked for in rank order, the first most often.
    held = (s for s, example in zip(similarity, by_example, strict=True) if example)
    if not floor or any(s >= floor for s in held) or not any(by_example):
        return [True] * len(similarity)
    return [not example for example in by_example]


def compose(ranked: Sequence[Workflow], k: int) -> list[int]:
    """The positions, among memories ranked best first, of the at most k to serve together.

    Task-level workflows keep their rank. A sub-routine is served only when it brings an
    action that none of the memories chosen before it has: the intent of the task that they
    do not cover. Measured with `bench/eval_sets.py` (docs/metrics.md), serving sub-routines
    by rank alone costs coverage on both shared sets; this way neither figure gets worse.
    """
    chosen: list[int] = []
    covered: set[str] = set()
    for position, w in enumerate(ranked):
        if len(chosen) >= k:
            break
        actions = set(w.actions)
        if w.kind == "subroutine" and actions <= covered:
            continue
        chosen.append(position)
        covered |= actions
    return chosen
