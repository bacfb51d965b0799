"""Learn: fold the outcomes of served runs into per-version stats, then promote and demote."""

from __future__ import annotations

from typing import Any

from flowmem.jobs.induce import nothing_served
from flowmem.policy.lifecycle import DEFAULT_PARAMS, LifecycleParams, Transition, decide, needs_reinduction
from flowmem.policy.usage import usage_from
from flowmem.storage import NotFoundError, Store

__all__ = ["learn"]


def learn(store: Store, *, namespace: str, params: LifecycleParams = DEFAULT_PARAMS) -> dict[str, Any]:
    """Recompute each served version's stats of `namespace` exactly from the stored outcomes,
    apply the promotion and demotion rules, and record every transition in the lifecycle log.

    Returns the figures, the transitions and the workflows whose clusters go back to induction.
    """
    usage = usage_from(store.iter_trajectories(namespace=namespace))
    store.put_usage(usage, namespace=namespace)
    transitions: list[Transition] = []
    for wid in sorted({i for i, _ in usage}):
        try:
            versions = store.history(wid, namespace=namespace)
        except NotFoundError:  # outcomes of a workflow that is not stored (rolled back)
            continue
        transitions += decide(versions, params)
    store.record_transitions(transitions, namespace=namespace)
    return {
        "versions_with_outcomes": len(usage),
        "runs_served": sum(u.served for u in usage.values()),
        "transitions": [
            {"id": t.workflow_id, "version": t.version, "old": t.old, "new": t.new, "reason": t.reason}
            for t in transitions
        ],
        "reinduce": needs_reinduction(transitions, nothing_served=nothing_served(store, namespace)),
    }
