"""Learning from outcomes: fold the outcomes of runs into the stats of the workflow versions
they were served (pure). Promotion and demotion rules build on these figures."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from flowmem.models import Trajectory, UsageStats

if TYPE_CHECKING:
    from flowmem.storage import Store

__all__ = ["report_outcome", "usage_from"]


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


def report_outcome(
    store: Store, run_id: str, *, success: bool, feedback: str | None = None, namespace: str | None = None
) -> None:
    """Set a stored run's outcome and move the stats of the versions it was served by the
    difference (the learn flow recomputes them exactly later).

    Raises:
        NotFoundError: if the namespace has no such run.
    """
    before = store.set_outcome(run_id, success=success, feedback=feedback, namespace=namespace)
    if not before.workflows_used or before.success is success:
        return
    ok = int(success) - int(before.success is True)
    bad = int(not success) - int(before.success is False)
    change = UsageStats(served=0, successes=ok, failures=bad)
    store.add_usage({(r.id, r.version): change for r in before.workflows_used}, namespace=namespace)
