"""Learn: fold the outcomes of served runs into per-version stats, then promote and demote."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from flowmem.jobs.induce import nothing_served
from flowmem.policy.lifecycle import DEFAULT_PARAMS, LifecycleParams, Transition, decide, needs_reinduction
from flowmem.policy.usage import usage_from
from flowmem.storage import NotFoundError, Store

__all__ = ["Learned", "LearnedTransition", "learn"]


class LearnedTransition(BaseModel):
    """A status change that learning made."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    id: str
    """The workflow's id."""
    version: int
    """The version whose status changed."""
    old: str
    """Its status before."""
    new: str
    """Its status now."""
    reason: str
    """Why (the rule and the figures that met it)."""


class Learned(BaseModel):
    """What a `learn` pass did: the same object for `flowmem learn`, the learn flow's result
    and a cycle's summary."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    versions_with_outcomes: int
    """Served versions that have reported outcomes."""
    runs_served: int
    """Runs that were served a workflow, all versions together."""
    transitions: list[LearnedTransition]
    """The status changes made, in order."""
    reinduce: list[str]
    """Workflows deprecated for their own failures that nothing serves: their clusters are
    induced again by the next run."""


def learn(store: Store, *, namespace: str, params: LifecycleParams = DEFAULT_PARAMS) -> Learned:
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
    return Learned(
        versions_with_outcomes=len(usage),
        runs_served=sum(u.served for u in usage.values()),
        transitions=[
            LearnedTransition(id=t.workflow_id, version=t.version, old=t.old, new=t.new, reason=t.reason)
            for t in transitions
        ],
        reinduce=needs_reinduction(transitions, nothing_served=nothing_served(store, namespace)),
    )
