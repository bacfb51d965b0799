"""What the dashboard's cluster map shows: one agent's task texts, projected to two dimensions,
with the cluster the last induction run put each in and that cluster's workflow.

Clusters are numbered per agent (an email agent's cluster 0 is not a calendar agent's), so the
map shows one agent at a time. Runs with the same task text have the same embedding and the
same cluster: they are one point, and the map states how many runs it shows of how many.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict

from flowmem.induction.plan.orchestrate import task_key
from flowmem.models import InductionRun
from flowmem.retrieval.blas import ONE_BLAS_THREAD
from flowmem.storage import NotFoundError, Store
from flowmem.storage.listings import TaskPoint, task_vectors, workflow_summaries

__all__ = ["MAX_POINTS", "ClusterMap", "MapCluster", "Point", "cluster_map"]

MAX_POINTS = 1_500
"""Most task texts drawn: beyond, an even sample of them (the page says how many runs it shows)."""

_SKETCH = 6
"""Directions the projection iterates on (2 kept, 4 to converge on them)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)


class Point(_Frozen):
    """One task text of the agent on the map: the runs that were given it."""

    x: float
    """First principal component, scaled to 0..1."""
    y: float
    """Second principal component, scaled to 0..1."""
    id: str
    """The first of its runs."""
    task: str
    """The task text (shown on hover)."""
    cluster: int | None
    """Its cluster (None: noise, or recorded after the last induction run)."""
    runs: int
    """Runs given this task."""
    failed: int
    """Of those, runs that failed."""
    workflow_id: str | None
    """The workflow induced from its cluster, if any."""


class MapCluster(_Frozen):
    """One cluster of the agent, as the legend lists it."""

    id: int
    """The cluster's id (within the agent)."""
    runs: int
    """Runs of the cluster drawn on the map."""
    workflow_id: str | None
    """The workflow induced from it (None: none yet, or its induction failed)."""
    workflow_name: str | None
    """That workflow's name."""


class ClusterMap(_Frozen):
    """The map of one agent of a namespace."""

    agent: str | None
    """The agent shown (None: the namespace has no run)."""
    agents: dict[str, int]
    """Every agent of the namespace and its runs, by name."""
    points: list[Point]
    """The task texts drawn."""
    clusters: list[MapCluster]
    """The clusters of the points drawn, by id."""
    runs: int
    """The agent's runs."""
    shown: int
    """Of those, the runs drawn (their task is one of `points`)."""
    tasks: int
    """The agent's distinct task texts."""
    clustered: bool
    """True when an induction run has clustered the namespace's tasks."""

    @property
    def noise_runs(self) -> int:
        """Runs drawn that are in no cluster."""
        return sum(p.runs for p in self.points if p.cluster is None)


def _placements(runs: Sequence[InductionRun]) -> dict[tuple[str, str], int] | None:
    """(agent, task key) -> cluster, as the latest induction run that kept clusters left them:
    the fit's memberships, then the tasks placed in them since. None: no run clustered yet."""
    for run in reversed(runs):
        state = run.state
        if run.kind != "induce" or state.clusters is None:
            continue
        where: dict[tuple[str, str], int] = {}
        for source in (state.clusters, state.placed or {}):
            for agent, ids in source.items():
                for cid, keys in ids.items():
                    where.update(dict.fromkeys(((agent, k) for k in keys), cid))
        return where
    return None


def _owners(store: Store, namespace: str, agent: str) -> dict[int, tuple[str, str]]:
    """Cluster -> (id, name) of the task workflow induced from it: a served one before a
    retired one, then the one with the most source runs."""
    best: dict[int, tuple[tuple[bool, int], str, str]] = {}
    for s in workflow_summaries(store, namespace=namespace):
        if s.agent != agent or s.kind != "task" or s.cluster_id is None:
            continue
        rank = (s.status != "retired", s.support)
        if s.cluster_id not in best or rank > best[s.cluster_id][0]:
            best[s.cluster_id] = (rank, s.id, s.name)
    return {cid: (wid, name) for cid, (_, wid, name) in best.items()}


def _top_directions(centred: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The two leading principal directions, by subspace iteration from a fixed start.

    A full SVD of 2,000 × 384 took 4-10 s on a loaded 2-core machine; this takes ~10 ms for
    690 × 384 and gives the same plane to within what a 600-pixel map can show. On one BLAS
    thread, as searches run their products (`retrieval.ranking`): two threads made it 40 ms
    typically and 400 ms at worst on that machine."""
    start = np.random.default_rng(0).standard_normal((centred.shape[1], _SKETCH))
    basis, _ = np.linalg.qr(start)
    with ONE_BLAS_THREAD:
        for _ in range(8):
            basis, _ = np.linalg.qr(centred.T @ (centred @ basis))
        _, _, vt = np.linalg.svd(centred @ basis, full_matrices=False)
    return np.asarray(basis @ vt[:2].T)


def _project(matrix: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """PCA to two dimensions, each scaled to 0..1."""
    if len(matrix) == 0:
        return np.zeros((0, 2))
    centred = np.asarray(matrix, dtype=np.float64) - matrix.mean(axis=0)
    if min(centred.shape) <= _SKETCH:
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        xy = centred @ vt[:2].T
    else:
        xy = centred @ _top_directions(centred)
    xy = np.pad(xy, ((0, 0), (0, 2 - xy.shape[1])))
    span = xy.max(axis=0) - xy.min(axis=0)
    return np.asarray((xy - xy.min(axis=0)) / np.where(span > 0, span, 1.0))


def _tasks(found: Sequence[TaskPoint], agent: str) -> dict[str, list[int]]:
    """Task text -> the rows of the agent's runs given it, in the order first seen."""
    rows: dict[str, list[int]] = {}
    for i, t in enumerate(found):
        if t.agent == agent:
            rows.setdefault(t.task, []).append(i)
    return rows


def _pick_agent(counts: Mapping[str, int], agent: str | None, namespace: str) -> str | None:
    if agent is None:
        return min(counts, key=lambda a: (-counts[a], a)) if counts else None
    if agent not in counts:
        known = ", ".join(sorted(counts)) or "none"
        raise NotFoundError(f"no agent {agent!r} has runs in namespace {namespace!r} (its agents: {known})")
    return agent


def cluster_map(
    store: Store, namespace: str, *, agent: str | None = None, limit: int | None = None
) -> ClusterMap:
    """The map of `agent`'s runs (default: the agent with the most runs): one point per task
    text (at most `limit`, default `MAX_POINTS`, evenly sampled), projected to 2-D with PCA,
    with its cluster, its runs and failures, and its cluster's workflow. An agent with no run
    raises NotFoundError."""
    found, matrix = task_vectors(store, namespace=namespace)
    counts: dict[str, int] = {}
    for t in found:
        counts[t.agent] = counts.get(t.agent, 0) + 1
    chosen = _pick_agent(counts, agent, namespace)
    if chosen is None:
        return ClusterMap(
            agent=None, agents={}, points=[], clusters=[], runs=0, shown=0, tasks=0, clustered=False
        )
    rows = _tasks(found, chosen)
    texts = list(rows)
    most = MAX_POINTS if limit is None else limit
    if len(texts) > most:
        texts = [texts[i] for i in np.linspace(0, len(texts) - 1, most).astype(int)]
    where = _placements(store.list_runs(namespace=namespace))
    owners = _owners(store, namespace, chosen) if where is not None else {}
    xy = _project(matrix[[rows[text][0] for text in texts]] if texts else matrix[:0])
    points = []
    for text, (x, y) in zip(texts, xy, strict=True):
        cid = (where or {}).get((chosen, task_key(text)), -1)
        runs = [found[i] for i in rows[text]]
        points.append(
            Point(
                x=float(x),
                y=float(y),
                id=runs[0].id,
                task=text,
                cluster=cid if cid >= 0 else None,
                runs=len(runs),
                failed=sum(r.success is False for r in runs),
                workflow_id=owners[cid][0] if cid in owners else None,
            )
        )
    return ClusterMap(
        agent=chosen,
        agents=dict(sorted(counts.items())),
        points=points,
        clusters=_legend(points, owners),
        runs=counts[chosen],
        shown=sum(p.runs for p in points),
        tasks=len(rows),
        clustered=where is not None,
    )


def _legend(points: Sequence[Point], owners: Mapping[int, tuple[str, str]]) -> list[MapCluster]:
    runs: dict[int, int] = {}
    for p in points:
        if p.cluster is not None:
            runs[p.cluster] = runs.get(p.cluster, 0) + p.runs
    return [
        MapCluster(
            id=cid,
            runs=n,
            workflow_id=owners[cid][0] if cid in owners else None,
            workflow_name=owners[cid][1] if cid in owners else None,
        )
        for cid, n in sorted(runs.items())
    ]
