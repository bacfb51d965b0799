"""Whom a cluster's pitfalls are told from: the successful runs its workflow will be served to,
and the failed runs of tasks no workflow is made for.

A cluster's checked pitfalls (`checked.checked_pitfalls`) contrast its failed runs with its
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

import hashlib
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
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


def _sample(ids: Sequence[str], size: int | None) -> list[str]:
    """`size` of the ids (all when there are no more): those whose sha256 comes first, the
    same whatever order they come in."""
    if size is None or len(ids) <= size:
        return list(ids)
    return sorted(sorted(ids, key=lambda i: hashlib.sha256(i.encode()).digest())[:size])


CHUNK = 128
"""Tasks scored against every cluster's keys at a time: the scores held at once stay
`CHUNK` × keys, whatever the namespace's size."""


Embed = Callable[[Sequence[str]], "npt.ArrayLike"]
"""Texts -> their unit vectors, one a row (`Embedder.embed`)."""


class _Index:
    """Every cluster's key vectors, and the vectors of the tasks scored against them."""

    def __init__(self, keyed: Sequence[Sequence[str]], tasks: Collection[str], embed: Embed) -> None:
        texts = sorted({t for ks in keyed for t in ks} | set(tasks))
        vectors = np.asarray(embed(texts), dtype=np.float64) if texts else np.zeros((0, 1))
        self.row = {t: n for n, t in enumerate(texts)}
        self.vectors = vectors
        self.keys = vectors[[self.row[t] for ks in keyed for t in ks]]
        self.starts = np.cumsum([0, *(len(ks) for ks in keyed[:-1])]).astype(np.intp)

    def best(self, tasks: Sequence[str]) -> Iterator[tuple[int, npt.NDArray[np.float64]]]:
        """(offset, each task's best cosine with each cluster's keys) a chunk of tasks at a time."""
        for at in range(0, len(tasks), CHUNK):
            rows = self.vectors[[self.row[t] for t in tasks[at : at + CHUNK]]]
            scores = np.round(rows @ self.keys.T, 6)  # in float64, rounded: ties alike on any BLAS
            yield at, np.maximum.reduceat(scores, self.starts, axis=1)


def _served_to(
    served: Sequence[Members], chosen: Collection[str], task_of: Mapping[str, str], index: _Index, k: int
) -> dict[str, list[str]]:
    """Cluster key -> the other clusters' successful runs (of `chosen`) whose `k` best clusters
    include it."""
    pairs = sorted({(task_of[i], own) for own, c in enumerate(served) for i in c.successes if i in chosen})
    reached: dict[tuple[str, int], list[int]] = {}
    for at, best in index.best([t for t, _ in pairs]):
        top = np.argsort(-best, axis=1, kind="stable")[:, :k]
        for n, row in enumerate(top):  # never a workflow it shares nothing with (the floor is above 0)
            task, own = pairs[at + n]
            reached[(task, own)] = [int(j) for j in row if j != own and best[n, j] > 0]
    out: dict[str, list[str]] = defaultdict(list)
    for own, c in enumerate(served):
        for i in (i for i in c.successes if i in chosen):
            for j in reached[(task_of[i], own)]:
                out[served[j].key].append(i)
    return out


def _homed(
    lost: Sequence[str], served: Sequence[Members], task_of: Mapping[str, str], index: _Index
) -> dict[str, list[str]]:
    """Cluster key -> the failed runs (`lost`: of clusters without a successful run) whose best
    cluster it is."""
    tasks = sorted({task_of[i] for i in lost})
    home: dict[str, int] = {}
    for at, best in index.best(tasks):
        for n, (j, score) in enumerate(zip(best.argmax(axis=1), best.max(axis=1), strict=True)):
            if score > 0:
                home[tasks[at + n]] = int(j)
    out: dict[str, list[str]] = defaultdict(list)
    for i in lost:
        if task_of[i] in home:
            out[served[home[task_of[i]]].key].append(i)
    return out


def contrast_sets(
    clusters: Sequence[Members],
    task_of: Mapping[str, str],
    embed: Embed,
    *,
    k: int,
    limit: int | None = None,
    sample: int | None = None,
) -> dict[str, Contrast]:
    """Each cluster's `Contrast` (clusters that get none are left out). `task_of`: run id ->
    task text; `embed`: texts -> unit vectors (only the texts it scores are embedded); `k`: how
    many workflows search serves a task; `limit`: the most runs a cluster's contrast holds (its
    failed runs first, then successful ones, each the first by id), so that a cluster induced
    from a bounded sample reads a bounded contrast too; `sample`: the most successful runs,
    and the most failed runs of clusters without a success, that are served (`_sample`), as a
    fit is made on a bounded sample of a namespace: the work and the memory stay bounded
    (`CHUNK`, `KEYS`) whatever the namespace's size."""
    served = [c for c in clusters if c.successes]
    if not served:
        return {}
    chosen = set(_sample([i for c in served for i in c.successes], sample))
    lost = _sample([i for c in clusters if not c.successes for i in c.failures], sample)
    keyed = [_keys([task_of[i] for i in c.successes], KEYS) for c in served]
    index = _Index(keyed, {task_of[i] for i in (*chosen, *lost)}, embed)
    ok = _served_to(served, chosen, task_of, index, k)
    failed = _homed(lost, served, task_of, index)
    out: dict[str, Contrast] = {}
    for key in sorted(ok.keys() | failed.keys()):
        f = sorted(set(failed.get(key, ())))[:limit]
        room = None if limit is None else limit - len(f)
        out[key] = Contrast(tuple(sorted(set(ok.get(key, ())))[:room]), tuple(f))
    return out


def with_contrast(
    clusters: Sequence[ClusterInput],
    embed: Embed,
    *,
    k: int = SERVED,
    limit: int | None = None,
    sample: int | None = None,
) -> list[ClusterInput]:
    """Clusters held as runs (`ClusterInput`) with their `Contrast` as runs
    (`ClusterInput.served_to`, `.homed`): what `jobs.induce.with_contrast` gives clusters held
    as ids. `embed`: texts -> unit vectors."""
    tasks = [c for c in clusters if c.kind == "task"]
    runs = {t.id: t for c in tasks for t in (*c.successes, *c.failures)}
    members = [Members(c.key, [t.id for t in c.successes], [t.id for t in c.failures]) for c in tasks]
    task_of = {i: t.task for i, t in runs.items()}
    found = contrast_sets(members, task_of, embed, k=k, limit=limit, sample=sample)
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
