"""What the dashboard's workflow page shows: a version's steps, parameters, pitfalls with the
failed runs they came from, source runs, and served / success per version."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from flowmem.induction.pitfalls.conditions import holds
from flowmem.induction.pitfalls.failures import first_divergence, pitfall_statement, states
from flowmem.induction.plan.orchestrate import task_key
from flowmem.models import Trajectory, Workflow
from flowmem.server.dashboard.views import memberships
from flowmem.storage import Store
from flowmem.storage.listings import trajectory_outcomes

__all__ = ["Pitfall", "VersionPoint", "pitfall_sources", "version_points"]

MAX_FAILED = 300
"""Most failed runs read to link pitfalls to their runs."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)


class Pitfall(_Frozen):
    """A pitfall and the failed runs that show it."""

    text: str
    """The pitfall as the workflow states it."""
    runs: list[tuple[str, str]]
    """(trajectory id, task) of the failed runs whose first divergence it names."""


class VersionPoint(_Frozen):
    """Served and success counts of one version."""

    version: int
    """The version."""
    label: str
    """`v<n>` and the day it was created."""
    served: int
    """Runs it was served to."""
    successes: int
    """Of those, runs that succeeded."""
    failures: int
    """Of those, runs that failed."""


def version_points(history: list[Workflow]) -> list[VersionPoint]:
    """One point per version, oldest first (stats as merged by the store)."""
    return [
        VersionPoint(
            version=w.version,
            label=f"v{w.version} {w.created_at:%m-%d}",
            served=w.stats.served,
            successes=w.stats.successes,
            failures=w.stats.failures,
        )
        for w in history
    ]


def _failed_runs(store: Store, workflow: Workflow) -> list[Trajectory]:
    """Failed runs of the workflow's cluster, and failed runs it was served to."""
    ns = workflow.namespace
    keys = memberships(store.list_runs(namespace=ns)).get(
        (workflow.agent, -1 if workflow.cluster_id is None else workflow.cluster_id), set()
    )
    ids = [
        t.id
        for t in trajectory_outcomes(store, namespace=ns)
        if t.success is False
        and t.agent == workflow.agent
        and (task_key(t.task) in keys or any(wid == workflow.id for wid, _ in t.used))
    ]
    return store.get_trajectories(ids[:MAX_FAILED], namespace=ns)


def pitfall_sources(store: Store, workflow: Workflow) -> list[Pitfall]:
    """Each pitfall of a version with the failed runs that show it: those that meet its
    condition, or, for a pitfall without one, those whose first divergence from its steps it
    names (recomputed with `first_divergence`, as induction found them)."""
    if not workflow.pitfalls:
        return []
    runs = _failed_runs(store, workflow)
    found: list[Pitfall] = []
    divergences = [(t, first_divergence(workflow.actions, t, set())) for t in runs]
    for p in workflow.pitfalls:
        if p.condition is not None:  # a checked pitfall: the failed runs that meet it
            linked = [(t.id, t.task) for t in runs if holds(p.condition, t)]
        else:
            statement = pitfall_statement(p.text)
            linked = [(t.id, t.task) for t, d in divergences if d is not None and states(statement, d)]
        found.append(Pitfall(text=p.text, runs=linked))
    return found
