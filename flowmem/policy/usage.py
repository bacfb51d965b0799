"""Outcomes become usage statistics: the runs a version was served to, and how they ended (pure)."""

from __future__ import annotations

from collections.abc import Iterable

from flowmem.models import Trajectory, UsageStats

__all__ = ["outcome_change", "usage_from"]


def usage_from(trajectories: Iterable[Trajectory]) -> dict[tuple[str, int], UsageStats]:
    """Per (workflow id, version): runs it was served to, and how many of them succeeded or
    failed (runs with an unknown outcome count as served only)."""
    served: dict[tuple[str, int], list[int]] = {}
    for t in trajectories:
        for ref in t.workflows_used:
            counts = served.setdefault((ref.id, ref.version), [0, 0, 0])
            counts[0] += 1
            counts[1] += t.success is True
            counts[2] += t.success is False
    return {key: UsageStats(served=s, successes=ok, failures=bad) for key, (s, ok, bad) in served.items()}


def outcome_change(before: bool | None, after: bool) -> UsageStats:
    """How the stats of the versions a run was served move when its outcome goes from `before`
    (None: unknown) to `after`."""
    ok = int(after) - int(before is True)
    bad = int(not after) - int(before is False)
    return UsageStats(served=0, successes=ok, failures=bad)
