"""Induction in bounded memory, pure: a namespace read as batches of a few columns, each agent's
clusters fitted on a bounded sample of its task texts, every other text placed with that fit,
and each cluster handed on as its members' ids (`ClusterMembers`), read by id when induced.

What a full run holds at once is then the columns it plans from (ids, agents, task texts,
outcomes, times: a few hundred bytes a run), the literal index, the sample's fit and one
cluster's runs, never every trajectory of the namespace (`jobs.induce` reads, this decides):

1. `catalog.scan`: batches of rows (`storage.scans.trajectory_batches`), each row's steps parsed into
   a light run (`LightRun`) that the literal index counts and the sub-routine shapes are cut
   from, then dropped; what stays is a `Catalog` of the columns and the segments' positions.
2. `fit_namespace`: each agent's distinct task texts; when there are more than `sample` of
   them, the clustering is fitted on `sample` of them (`hash_sample`) and every other text
   takes the cluster of the nearest clustered one in the fit's projection (`assign.
   nearest_labels`, what places an incremental run's new tasks), as a fit places its own
   noise texts (`Clustering.placed`). With `sample` or fewer texts this is a fit on every
   text (the tests' in-memory reference, `tests/inmemory.py`) exactly: the same clusters, ids,
   members, order and literal index.
3. `ClusterMembers.input`: a cluster's runs, read by id, as the `ClusterInput` an inducer
   takes; a cluster of more than `sample` runs is induced from a hash sample of `sample` of
   them (`ClusterMembers.chosen`), its fingerprint and sizes still counting every run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Literal

import numpy as np

from flowmem.induction.abstract.segments import Segment
from flowmem.induction.abstract.subroutines import keeps_shape, subroutine_key
from flowmem.induction.base import ClusterInput, workflow_id
from flowmem.induction.cluster.assign import nearest_labels
from flowmem.induction.cluster.cluster import Clustering, ClusterParams, cluster_tasks, match_clusters
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.pitfalls.contrast import Contrast
from flowmem.induction.plan.catalog import Catalog, Scan
from flowmem.induction.plan.orchestrate import ClusterPlan, fingerprint, task_key
from flowmem.models import Trajectory

__all__ = [
    "ClusterMembers",
    "Fitted",
    "fit_namespace",
    "fit_texts",
    "hash_sample",
]

_PLACE_CHUNK = 4096
"""Texts projected and placed at a time."""


@dataclass(frozen=True)
class ClusterMembers:
    """One cluster of one agent's runs as the ids of its members (in the order they are
    induced in): `input` builds the `ClusterInput` once they are read."""

    namespace: str
    agent: str
    cluster_id: int
    scope: Literal["task", "subtask"]
    successes: tuple[str, ...]
    """Successful runs' ids; for a sub-routine its segments' (`<run id>#<goal>`)."""
    failures: tuple[str, ...]
    """Failed runs' ids (segments' for a sub-routine)."""
    literals: LiteralIndex = field(repr=False, compare=False, default_factory=LiteralIndex)
    """Argument value counts of the whole namespace."""
    kind: Literal["task", "subroutine"] = "task"
    name: str | None = None
    """For a sub-routine: its stable key."""
    positions: Mapping[str, tuple[int, ...]] = field(default_factory=dict, repr=False)
    """For a sub-routine: each segment's step positions in its run."""
    cap: int | None = None
    """The most members it is induced from (`chosen`); None: every one."""
    contrast: Contrast = field(default_factory=Contrast, compare=False)
    """Runs outside the cluster its pitfalls are told from (`induction.pitfalls.contrast`), read with
    its own; not part of its fingerprint."""

    @property
    def key(self) -> str:
        """As `ClusterInput.key`."""
        return self.name or workflow_id(self.agent, self.cluster_id)

    def chosen(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The (successes, failures) it is induced from: every member, or, past `cap`, those
        of a hash sample of `cap` (`hash_sample` of their ids), in their order. Its
        fingerprint and sizes still count every member."""
        if self.cap is None or len(self.successes) + len(self.failures) <= self.cap:
            return self.successes, self.failures
        keep = set(hash_sample([*self.successes, *self.failures], self.cap))
        return tuple(i for i in self.successes if i in keep), tuple(i for i in self.failures if i in keep)

    def runs(self) -> list[str]:
        """The ids of the runs to read (each once)."""
        ok, failed = self.chosen()
        ids = (i.rsplit("#", 1)[0] if self.kind == "subroutine" else i for i in (*ok, *failed))
        return list(dict.fromkeys([*ids, *self.contrast.successes, *self.contrast.failures]))

    def fingerprint(self) -> str:
        """As `ClusterPlan.fingerprints` hashes the cluster's `ClusterInput`."""
        return fingerprint([*((i, True) for i in self.successes), *((i, False) for i in self.failures)])

    def input(self, runs: Mapping[str, Trajectory]) -> ClusterInput:
        """The cluster as an inducer takes it, from its runs read by id (a run no longer
        stored is left out)."""

        def member(i: str) -> Trajectory | None:
            if self.kind == "task":
                return runs.get(i)
            rid, goal = i.rsplit("#", 1)
            run = runs.get(rid)
            return Segment(run, self.positions[i], int(goal)).as_trajectory() if run else None

        successes, failures = self.chosen()
        ok = [t for t in map(member, successes) if t is not None]
        failed = [t for t in map(member, failures) if t is not None]
        return ClusterInput(
            self.namespace,
            self.agent,
            self.cluster_id,
            self.scope,
            ok,
            failed,
            self.literals,
            self.kind,
            self.name,
            served_to=[runs[i] for i in self.contrast.successes if i in runs],
            homed=[runs[i] for i in self.contrast.failures if i in runs],
        )


def hash_sample(texts: Iterable[str], size: int) -> list[str]:
    """`size` of the texts, sorted: those whose `task_key` (sha256) comes first. The same texts
    give the same sample whatever order they come in, and a run with a few more texts keeps
    most of the last run's sample (so its clusters keep their ids, `match_clusters`)."""
    return sorted(sorted(texts, key=task_key)[:size])


def _place(clustering: Clustering, texts: Sequence[str]) -> list[int]:
    """Labels for texts the fit did not see: the cluster of the nearest clustered text in the
    fit's projection (-1 when the fit has no cluster)."""
    clustered = np.flatnonzero(clustering.labels >= 0)
    if clustering.model is None or clustering.points is None or not len(clustered):
        return [-1] * len(texts)
    known, labels = clustering.points[clustered], clustering.labels[clustered].tolist()
    out: list[int] = []
    for start in range(0, len(texts), _PLACE_CHUNK):
        out += nearest_labels(known, labels, clustering.project(texts[start : start + _PLACE_CHUNK]))
    return out


def fit_texts(
    texts: Sequence[str], params: ClusterParams | None, *, sample: int
) -> tuple[Clustering, dict[str, int]]:
    """Cluster distinct task texts: the clustering fitted (on `sample` of them at most) and
    each text's label, a noise text's and an unfitted text's that of its nearest cluster."""
    if len(texts) <= sample:
        clustering = cluster_tasks(texts, params)
        return clustering, clustering.placed()
    clustering = cluster_tasks(hash_sample(texts, sample), params)
    placed = clustering.placed()
    rest = [t for t in texts if t not in placed]
    placed.update(zip(rest, _place(clustering, rest), strict=True))
    return clustering, placed


@dataclass
class Fitted:
    """A namespace's clusters, fitted in bounded memory (`fit_namespace`)."""

    plan: ClusterPlan
    """The clusterings, memberships and placements (its `clusters` stay empty)."""
    members: list[ClusterMembers]
    """Every cluster (sub-routines too), in one order: by agent, then as each agent's clusters are planned."""
    texts: int
    """Distinct task texts clustered or placed, every agent's."""
    trajectories: int
    """Runs read."""


def fit_namespace(
    found: Scan,
    *,
    namespace: str,
    params: ClusterParams | None = None,
    previous: Mapping[str, Mapping[int, set[str]]] | None = None,
    sample: int,
) -> Fitted:
    """Cluster each agent's runs (stable ids, noise runs placed in their nearest cluster),
    fitting on `sample` of an agent's distinct task texts at most (`fit_texts`;
    `Settings.cluster_sample`, measured in docs/scaling.md) and inducing each cluster from
    `sample` of its runs at most; sub-routines when `found` cut them."""
    catalog = found.catalog
    by_agent: dict[str, list[int]] = defaultdict(list)
    for row in catalog.order():  # each agent's rows in run order
        by_agent[catalog.agents[row]].append(row)
    fitted = Fitted(ClusterPlan(), [], 0, len(catalog.ids))
    for agent, rows in sorted(by_agent.items()):
        before = (previous or {}).get(agent, {})
        _fit_agent(
            fitted, found, agent, rows, namespace=namespace, params=params, before=before, sample=sample
        )
    return fitted


def _fit_agent(
    fitted: Fitted,
    found: Scan,
    agent: str,
    rows: Sequence[int],
    *,
    namespace: str,
    params: ClusterParams | None,
    before: Mapping[int, set[str]],
    sample: int,
) -> None:
    """One agent's clusters (`rows`, in run order) into `fitted`."""
    catalog, plan = found.catalog, fitted.plan
    texts = sorted({catalog.tasks[r] for r in rows})
    clustering, placed = fit_texts(texts, params, sample=sample)
    fitted.texts += len(texts)
    plan.clusterings[agent] = clustering
    current = {label: {task_key(t) for t in members} for label, members in clustering.members().items()}
    stable = match_clusters(before, current, next_id=max(before, default=-1) + 1)
    plan.memberships[agent] = {stable[label]: keys for label, keys in current.items()}
    fit_labels = clustering.label_of()
    others = plan.placed.setdefault(agent, {})
    for text, label in placed.items():  # noise texts of the fit, and those it did not see
        if label >= 0 and fit_labels.get(text, -1) < 0:
            others.setdefault(stable[label], set()).add(task_key(text))
    scope: Literal["task", "subtask"] = (
        "task" if any(catalog.ids[r] in catalog.parents for r in rows) else "subtask"
    )
    for cid, (ok, failed) in sorted(_runs_of(catalog, rows, placed, stable).items()):
        fitted.members.append(
            ClusterMembers(namespace, agent, cid, scope, tuple(ok), tuple(failed), found.literals, cap=sample)
        )
    if found.shapes is not None and scope == "subtask":
        cluster_of = {text: stable[label] for text, label in placed.items() if label >= 0}
        min_tasks = (params or ClusterParams()).min_cluster_size
        rank = {row: i for i, row in enumerate(rows)}
        fitted.members += _subroutines(
            found, agent, cluster_of, rank, namespace=namespace, min_tasks=min_tasks, cap=sample
        )


def _runs_of(
    catalog: Catalog, rows: Sequence[int], placed: Mapping[str, int], stable: Mapping[int, int]
) -> dict[int, tuple[list[str], list[str]]]:
    """Stable cluster id -> the ids of its successful and of its failed runs, in run order
    (a run of unknown outcome is in neither)."""
    members: dict[int, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    for r in rows:
        label, success = placed[catalog.tasks[r]], catalog.success(r)
        if label >= 0 and success is not None:
            members[stable[label]][0 if success else 1].append(catalog.ids[r])
    return members


def _subroutines(
    found: Scan,
    agent: str,
    cluster_of: Mapping[str, int],
    rank: Mapping[int, int],
    *,
    namespace: str,
    min_tasks: int,
    cap: int,
) -> list[ClusterMembers]:
    """An agent's sub-routines as `subroutines.subroutine_inputs` picks them, as members
    (`rank`: the agent's rows' places in run order)."""
    catalog, shapes = found.catalog, found.shapes
    if shapes is None:
        return []
    out = []
    for shape, cuts in sorted(shapes.ok.get(agent, {}).items()):
        ordered = sorted(cuts, key=lambda c: rank[c[0]])  # stable: a run's segments stay in order
        tasks = [catalog.tasks[c[0]] for c in ordered]
        if not keeps_shape(
            shape, tasks, whole=sum(c[3] for c in ordered), min_tasks=min_tasks, cluster_of=cluster_of
        ):
            continue
        failed = sorted(shapes.failed.get(agent, {}).get(shape, ()), key=lambda c: rank[c[0]])
        members = ClusterMembers(
            namespace,
            agent,
            -1,
            "subtask",
            tuple(f"{catalog.ids[c[0]]}#{c[1]}" for c in ordered),
            tuple(f"{catalog.ids[c[0]]}#{c[1]}" for c in failed),
            found.literals,
            kind="subroutine",
            name=subroutine_key(agent, shape),
            cap=cap,
        )
        named = zip(chain(members.successes, members.failures), chain(ordered, failed), strict=True)
        out.append(replace(members, positions={i: c[2] for i, c in named}))  # the same keys, shared
    return out
