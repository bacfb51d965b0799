"""Learning from outcomes: fold the outcomes of runs into the stats of the workflow versions
they were served (pure). Promotion and demotion rules build on these figures."""

from __future__ import annotations

from collections.abc import Iterable

from flowmem.models import Trajectory, UsageStats

__all__ = ["usage_from"]


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
