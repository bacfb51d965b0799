"""What the dashboard's list pages show, read from the store: the workflows table (cached per
store version) and the learning curve (the cluster map is `clustermap`)."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from flowmem.induction.plan.orchestrate import task_key
from flowmem.models import InductionRun
from flowmem.server.dashboard.compare import differences
from flowmem.storage import Store
from flowmem.storage.listings import (
    RunOutcome,
    data_version,
    served_summaries,
    trajectory_outcomes,
    workflow_shapes,
    workflow_summaries,
)

__all__ = [
    "Bucket",
    "HomeCache",
    "WorkflowRow",
    "learning_curve",
    "memberships",
]

Cluster = tuple[str, int]
"""(agent, cluster id): clusters are numbered per agent."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)


class WorkflowRow(_Frozen):
    """One line of the workflows table."""

    id: str
    """The workflow's id."""
    name: str
    """The shown version's name."""
    description: str
    """The shown version's description (when to use it)."""
    kind: str
    """`task` or `subroutine`."""
    agent: str
    """The agent role it is for."""
    status: str
    """The shown version's live status."""
    version: int
    """The shown version: the one agents are served (its active version, else the candidate
    search serves: `Store.served_rows`), or the latest when none is served."""
    serving: bool
    """Whether agents are served a version of it (False: every version deprecated or retired)."""
    latest: int
    """The latest version."""
    latest_status: str
    """The latest version's live status."""
    trial: int | None
    """A newer candidate served to a share of requests beside `version` (None: none)."""
    trial_served: int
    """Runs the candidate on trial was served to."""
    versions: int
    """How many versions are stored."""
    support: int
    """Source trajectories of the shown version."""
    served: int
    """Runs the shown version was served to."""
    served_rate: float | None
    """Success rate of the runs it was served to (None: no outcome yet)."""
    unserved_runs: int
    """Runs of its cluster, with an outcome, that were not served it."""
    unserved_rate: float | None
    """Their success rate (None: none)."""
    changed_at: datetime
    """When the latest version was created."""
    differs: str | None = None
    """What tells it apart from the workflows that share its name, those not retired when it
    is not (`compare.differences`; None: no other has its name)."""


def _rate(successes: int, total: int) -> float | None:
    return successes / total if total else None


def memberships(runs: Sequence[InductionRun]) -> dict[Cluster, set[str]]:
    """The task keys of every cluster, as the latest induction run that kept them left them."""
    for run in reversed(runs):
        clusters = run.state.clusters
        if run.kind == "induce" and clusters is not None:
            return {(agent, cid): set(keys) for agent, ids in clusters.items() for cid, keys in ids.items()}
    return {}


def _cluster_of(members: Mapping[Cluster, set[str]]) -> dict[tuple[str, str], Cluster]:
    return {(agent, key): (agent, cid) for (agent, cid), keys in members.items() for key in keys}


def workflow_rows(store: Store, namespace: str) -> list[WorkflowRow]:
    """Every workflow of a namespace with its served and not-served success rates, newest change first."""
    summaries = workflow_summaries(store, namespace=namespace)
    cluster_of = _cluster_of(memberships(store.list_runs(namespace=namespace)))
    known: dict[Cluster, list[int]] = defaultdict(lambda: [0, 0])  # runs with an outcome, successes
    served_it: dict[tuple[Cluster, str], list[int]] = defaultdict(lambda: [0, 0])
    for t in trajectory_outcomes(store, namespace=namespace) if cluster_of else []:
        cluster = cluster_of.get((t.agent, task_key(t.task)))
        if cluster is None or t.success is None:
            continue
        known[cluster][0] += 1
        known[cluster][1] += int(t.success)
        for wid in {wid for wid, _ in t.used}:
            served_it[(cluster, wid)][0] += 1
            served_it[(cluster, wid)][1] += int(t.success)
    served = served_summaries(store, namespace=namespace)
    out = []
    for s in summaries:
        home = (s.agent, s.cluster_id) if s.cluster_id is not None else None
        total, ok = known.get(home, [0, 0]) if home is not None else [0, 0]
        mine = served_it.get((home, s.id), [0, 0]) if home is not None else [0, 0]
        shown, trial = served.get(s.id, (None, None))
        v = shown or s  # the version agents are served, else the latest
        # model_construct: 10,000 rows from the store's own columns need no validation (~3x faster).
        out.append(
            WorkflowRow.model_construct(
                id=s.id,
                name=v.name,
                description=v.description,
                kind=s.kind,
                agent=s.agent,
                status=v.status,
                version=v.version,
                serving=shown is not None,
                latest=s.version,
                latest_status=s.status,
                trial=trial.version if trial else None,
                trial_served=trial.served if trial else 0,
                versions=s.versions,
                support=v.support,
                served=v.served,
                served_rate=_rate(v.successes, v.successes + v.failures),
                unserved_runs=total - mine[0],
                unserved_rate=_rate(ok - mine[1], total - mine[0]),
                changed_at=s.created_at,
            )
        )
    out.sort(key=lambda r: (r.changed_at, r.id), reverse=True)
    return _told_apart(store, namespace, out)


def _told_apart(store: Store, namespace: str, found: list[WorkflowRow]) -> list[WorkflowRow]:
    """The rows, those that share a name with what tells each apart (`compare.differences`):
    a workflow not retired from the others not retired (the home page lists those), a retired
    one from all; only these versions' steps are read."""
    names = Counter(r.name for r in found)
    shared = [r for r in found if names[r.name] > 1]
    shapes = workflow_shapes(store, [(r.id, r.version) for r in shared], namespace=namespace)
    retired = {r.id for r in shared if r.status == "retired"}
    lines = {wid: line for wid, line in differences(shared, shapes).items() if wid in retired}
    lines.update(differences([r for r in shared if r.id not in retired], shapes))
    return [r.model_copy(update={"differs": lines[r.id]}) if r.id in lines else r for r in found]


class HomeCache:
    """The workflow rows of each namespace, rebuilt only when a table they come from moved:
    filtering and paging 10,000 rows in memory is fast, reading them is not.

    A new workflow version, status or usage count rebuilds them at once. New runs alone (the
    trajectories and runs tables move with every run an agent finishes) only change the
    "success when not served" figures: those are rebuilt at most every `runs_max_age`
    seconds, so a store written to all the time still serves its home page from memory."""

    def __init__(self, store: Store, *, runs_max_age: float = 30.0) -> None:
        self.store = store
        self.runs_max_age = runs_max_age
        self._lock = threading.Lock()
        self._cached: dict[str, tuple[tuple[int, ...], float, list[WorkflowRow]]] = {}

    def rows(self, namespace: str) -> list[WorkflowRow]:
        """The namespace's workflow rows, newest change first."""
        version = data_version(self.store, namespace=namespace)
        served = version[:3]  # workflows, usage, lifecycle (`Store.served_version`)
        now = time.monotonic()
        with self._lock:
            hit = self._cached.get(namespace)
            if hit is not None and (
                hit[0] == version or (hit[0][:3] == served and now - hit[1] < self.runs_max_age)
            ):
                return hit[2]
        found = workflow_rows(self.store, namespace)
        with self._lock:
            self._cached[namespace] = (version, now, found)
        return found


class Bucket(_Frozen):
    """Runs of one period (an induction run's interval, or a day), served a workflow or not."""

    label: str
    """The run id or the day."""
    tick: str
    """Its name on the chart's x axis: `before`, `run 3` (the third induction run), or `11-26`."""
    served_runs: int
    """Runs served at least one workflow, with an outcome."""
    served_rate: float | None
    """Their success rate."""
    served_steps: float | None
    """Their mean number of steps."""
    other_runs: int
    """Runs served none, with an outcome."""
    other_rate: float | None
    """Their success rate."""
    other_steps: float | None
    """Their mean number of steps."""


def _bucket(label: str, tick: str, runs: Iterable[RunOutcome]) -> Bucket:
    served = [r for r in runs if r.success is not None and r.used]
    other = [r for r in runs if r.success is not None and not r.used]

    def mean(values: list[int]) -> float | None:
        return sum(values) / len(values) if values else None

    return Bucket(
        label=label,
        tick=tick,
        served_runs=len(served),
        served_rate=mean([int(r.success is True) for r in served]),
        served_steps=mean([r.n_steps for r in served]),
        other_runs=len(other),
        other_rate=mean([int(r.success is True) for r in other]),
        other_steps=mean([r.n_steps for r in other]),
    )


def learning_curve(store: Store, namespace: str, *, by: str = "run") -> list[Bucket]:
    """Success rate and steps per task of served vs not-served runs, per induction run (the
    runs recorded after it and before the next one) or per day, oldest first."""
    found = sorted(trajectory_outcomes(store, namespace=namespace), key=lambda t: t.created_at)
    groups: dict[tuple[str, str], list[RunOutcome]] = {}
    if by == "day":
        for t in found:
            day = t.created_at
            groups.setdefault((day.strftime("%Y-%m-%d"), day.strftime("%m-%d")), []).append(t)
    else:
        runs = [r for r in store.list_runs(namespace=namespace) if r.kind == "induce"]
        starts = [r.finished_at or r.started_at for r in runs]
        for t in found:
            i = sum(1 for s in starts if s <= t.created_at) - 1
            key = ("before any run", "before") if i < 0 else (f"after {runs[i].id}", f"run {i + 1}")
            groups.setdefault(key, []).append(t)
    return [_bucket(label, tick, runs) for (label, tick), runs in groups.items()]
