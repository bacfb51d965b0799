"""Whom a cluster's pitfalls are told from: the successful runs its workflow will be served to,
and the failed runs of tasks no workflow is made for.

A cluster's checked pitfalls (`failures.checked_pitfalls`) contrast its failed runs with its
successful ones. Two kinds of runs outside the cluster belong in that contrast:

- **The runs it is served to.** Search serves a workflow to every task whose `k` best
  workflows include it (scored by their nearest source task), not only to its own cluster's
  tasks. A warning that holds on the successful runs of a neighbouring kind of task is a false
  alarm there. So each successful run of the namespace is served, here, as search serves it
  (its `k` nearest clusters by their nearest successful task), and counts among the successful
  runs of every other cluster it reaches: the false-alarm budget is spent on the runs a warning
  will actually be checked on.
- **Failed runs of tasks nothing succeeded at.** A cluster with no successful run makes no
  workflow, and its failures would teach nothing served. Its tasks are served the workflow of
  their nearest successful task: each of its failed runs joins that cluster's failed runs, so
  that the workflow an agent gets for such a task carries what went wrong on it.

Both are run ids; the runs are read with the cluster's own (`bounded.ClusterMembers`). Every
rule is the serving rule (nearest task, `k` served), not a threshold of the data.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from flowmem.induction.base import ClusterInput

__all__ = ["SERVED", "Contrast", "Members", "contrast_sets", "with_contrast"]

SERVED = 3
"""How many workflows search serves a task by default (`WorkflowMemory.search`, k = 3)."""

KEYS = 16
"""Task texts that stand for a cluster at most (evenly spread over its sorted distinct
successful tasks), as a workflow's retrieval keys do (`jobs.induce.key_vectors`); a bound on
the work, not on what is found: a cluster's tasks are alike."""


Vector = npt.NDArray[np.float32]
"""A unit vector (or a matrix of them, one a row)."""


@dataclass(frozen=True)
class Members:
    """One cluster as this module needs it."""

    key: str
    """The cluster's key (`ClusterInput.key`)."""
    successes: Sequence[str]
    """Its successful runs' ids."""
    failures: Sequence[str]
    """Its failed runs' ids."""


@dataclass(frozen=True)
class Contrast:
    """The runs outside a cluster that its pitfalls are told from."""

    successes: tuple[str, ...] = ()
    """Other clusters' successful runs that search would serve this cluster's workflow to."""
    failures: tuple[str, ...] = ()
    """Failed runs of clusters without a successful run, whose nearest successful task is this
    cluster's."""


def _keys(tasks: Sequence[str], limit: int) -> list[str]:
    distinct = sorted(set(tasks))
    step = max(1, -(-len(distinct) // limit))
    return distinct[::step][:limit]


def _best(vectors: Vector, keys: Vector, starts: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
    """Each vector's best cosine with each cluster's keys (clusters' keys contiguous from `starts`)."""
    scores = np.round(vectors.astype(np.float64) @ keys.astype(np.float64).T, 6)  # ties alike on any BLAS
    return np.maximum.reduceat(scores, starts, axis=1)


def _vectors(tasks: Sequence[str], vector_of: Mapping[str, Vector]) -> Vector:
    return np.asarray([vector_of[t] for t in tasks], dtype=np.float32)


def _served_to(
    served: Sequence[Members],
    task_of: Mapping[str, str],
    vector_of: Mapping[str, Vector],
    index: tuple[Vector, npt.NDArray[np.intp]],
    k: int,
) -> dict[str, list[str]]:
    """Cluster key -> the other clusters' successful runs whose `k` best clusters include it."""
    out: dict[str, list[str]] = defaultdict(list)
    for own, c in enumerate(served):
        tasks = sorted({task_of[i] for i in c.successes})
        best = _best(_vectors(tasks, vector_of), *index)
        top = np.argsort(-best, axis=1, kind="stable")[:, :k]
        reached = {  # never a workflow it shares nothing with (search's floor is above 0)
            t: [int(j) for j in row if j != own and best[n, j] > 0]
            for n, (t, row) in enumerate(zip(tasks, top, strict=True))
        }
        for i in c.successes:
            for j in reached[task_of[i]]:
                out[served[j].key].append(i)
    return out


def _homed(
    clusters: Sequence[Members],
    served: Sequence[Members],
    task_of: Mapping[str, str],
    vector_of: Mapping[str, Vector],
    index: tuple[Vector, npt.NDArray[np.intp]],
) -> dict[str, list[str]]:
    """Cluster key -> the failed runs of clusters without a successful run whose best cluster it is."""
    out: dict[str, list[str]] = defaultdict(list)
    for c in clusters:
        if c.successes or not c.failures:
            continue
        tasks = sorted({task_of[i] for i in c.failures})
        best = _best(_vectors(tasks, vector_of), *index)
        home = {
            t: int(j) for t, j, s in zip(tasks, best.argmax(axis=1), best.max(axis=1), strict=True) if s > 0
        }
        for i in c.failures:
            if task_of[i] in home:
                out[served[home[task_of[i]]].key].append(i)
    return out


def contrast_sets(
    clusters: Sequence[Members],
    task_of: Mapping[str, str],
    vector_of: Mapping[str, Vector],
    *,
    k: int,
    limit: int | None = None,
) -> dict[str, Contrast]:
    """Each cluster's `Contrast` (clusters that get none are left out). `task_of`: run id ->
    task text; `vector_of`: task text -> unit vector (every task of `clusters`); `k`: how many
    workflows search serves a task; `limit`: the most runs a cluster's contrast holds (its
    failed runs first, then successful ones, each the first by id), so that a cluster induced
    from a bounded sample reads a bounded contrast too."""
    served = [c for c in clusters if c.successes]
    if not served:
        return {}
    keyed = [_vectors(_keys([task_of[i] for i in c.successes], KEYS), vector_of) for c in served]
    starts = np.cumsum([0, *(len(v) for v in keyed[:-1])]).astype(np.intp)
    index = (np.concatenate(keyed), starts)
    ok = _served_to(served, task_of, vector_of, index, k)
    failed = _homed(clusters, served, task_of, vector_of, index)
    out: dict[str, Contrast] = {}
    for key in sorted(ok.keys() | failed.keys()):
        f = sorted(set(failed.get(key, ())))[:limit]
        room = None if limit is None else limit - len(f)
        out[key] = Contrast(tuple(sorted(set(ok.get(key, ())))[:room]), tuple(f))
    return out


def with_contrast(
    clusters: Sequence[ClusterInput],
    vector_of: Mapping[str, Vector],
    *,
    k: int = SERVED,
    limit: int | None = None,
) -> list[ClusterInput]:
    """Clusters held as runs (`orchestrate.plan_clusters`) with their `Contrast` as runs
    (`ClusterInput.served_to`, `.homed`): what `jobs.induce.with_contrast` gives clusters held
    as ids. `vector_of`: task text -> unit vector, every task of the clusters'."""
    tasks = [c for c in clusters if c.kind == "task"]
    runs = {t.id: t for c in tasks for t in (*c.successes, *c.failures)}
    members = [Members(c.key, [t.id for t in c.successes], [t.id for t in c.failures]) for c in tasks]
    found = contrast_sets(members, {i: t.task for i, t in runs.items()}, vector_of, k=k, limit=limit)
    none = Contrast()
    return [
        replace(
            c,
            served_to=[runs[i] for i in found.get(c.key, none).successes],
            homed=[runs[i] for i in found.get(c.key, none).failures],
        )
        if c.kind == "task" and c.key in found
        else c
        for c in clusters
    ]
