"""Incremental planning, the reads: new tasks join the stored clusters, and only the clusters
whose runs changed materially are read and induced again (`induction.plan.runplan` decides).

`prepare_run` (jobs/induce.py) asks `assign_run` first; when the stored clustering cannot take
the new runs it gets back why, and refits every cluster instead (that reason is the run's
`refit`). Every read is in batches (`storage.scans.trajectory_batches`), as a full run reads:
a few columns of every trajectory (task, agent, outcome, parent, time: `_COLUMNS`, never the
steps nor the vectors); only when there are new task texts to place, the vectors in two more
passes (`StoredVectors`: the new texts' rows, then the known texts' rows compared a batch at a
time); only when some cluster is to be induced, the steps' JSON for the literal index (counted
a batch at a time). The clusters to induce are planned as their members' ids
(`ClusterMembers`) and read by id a group at a time when induced (`jobs.induce.induce_all`),
so a run holds at most a group of the changed clusters' runs, never every trajectory.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt

from flowmem.induction.base import cluster_key
from flowmem.induction.cluster.assign import NearestLabels
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.plan.bounded import ClusterMembers
from flowmem.induction.plan.catalog import Catalog, light_run
from flowmem.induction.plan.increment import Ask, Columns
from flowmem.induction.plan.orchestrate import InductionResult, merge_duplicates
from flowmem.induction.plan.runplan import Limits, Opening, RunPlan, place, placed_plan
from flowmem.induction.render.naming import distinct
from flowmem.models import Trajectory, UsageStats, Workflow, now
from flowmem.policy.lifecycle import NOT_SERVED
from flowmem.settings import Settings
from flowmem.storage import Store
from flowmem.storage.scans import trajectory_batches

__all__ = [
    "StoredVectors",
    "assign_run",
    "merge_with_current",
    "settings_signature",
]

_COLUMNS = ("id", "agent", "task", "success", "parent_id", "created_at")
"""What a run reads of every trajectory first (a `Catalog`'s columns): never the steps nor the vectors."""
_VECTORS = ("id", "vector")
"""What placing new task texts reads, in two passes."""
_LITERAL_COLUMNS = ("id", "agent", "task", "steps")
"""What the literal index reads, when a cluster is to be induced."""


def settings_signature(settings: Settings) -> str:
    """What the stored clustering depends on besides the tasks (a change refits)."""
    p = settings.cluster_params
    return json.dumps([p.__dict__, settings.literal_share, settings.subroutines], sort_keys=True, default=str)


def assign_run(
    store: Store,
    settings: Settings,
    opening: Opening,
    current: Mapping[str, Workflow],
    *,
    limits: Limits,
) -> RunPlan | str:
    """The plan of a run that places its new runs in the last run's clusters; or why the
    clusters must be fitted again instead. This reads a few columns of every run in batches,
    which `runplan.place` decides from (the vectors only of the texts it places and of those
    it compares them with, `StoredVectors`), and plans the clusters it chose as their members'
    ids; `current`: the latest version of every workflow."""
    namespace = opening.run.namespace
    catalog = Catalog()
    for batch in trajectory_batches(store, _COLUMNS, namespace=namespace):
        catalog.add(batch)
    catalog.close()
    order = catalog.order()  # as `Store.list_trajectories` sorts them: newest first, then by id
    columns = Columns(
        [catalog.ids[r] for r in order],
        [catalog.agents[r] for r in order],
        [catalog.tasks[r] for r in order],
        [catalog.success(r) for r in order],
        StoredVectors(store, namespace, catalog.ids, order),
    )
    placement = place(opening, columns, limits)
    if isinstance(placement, str):
        return placement
    share = settings.literal_share
    members = _members(store, columns, catalog.parents, placement.chosen, namespace=namespace, share=share)
    task_of = dict(zip(columns.ids, columns.tasks, strict=True))
    return placed_plan(opening, current, placement, members, task_of=task_of)


@dataclass
class StoredVectors:
    """The task vectors of a namespace's rows, read in batches of their id and vector when
    new texts are placed (`increment.Embeddings`): first the new texts' rows, kept; then the
    known texts' rows, each batch compared with them and dropped (`assign.NearestLabels`).
    What it holds: the new texts' vectors, and a few numbers a row."""

    store: Store
    namespace: str
    ids: Sequence[str]
    """Every row's id, in the order the columns were first read (a `Catalog`'s)."""
    order: Sequence[int]
    """The placement's rows (`Columns`) as rows of `ids`."""
    batch_size: int | None = None
    """Rows a batch (None: `trajectory_batches`' own)."""
    _index: dict[str, int] | None = field(default=None, repr=False)

    def nearest(self, asks: Mapping[str, Ask]) -> dict[str, list[int]]:
        """As `increment.Embeddings.nearest`, in two passes over the vectors."""
        agents = sorted(asks)
        dim = self.store.embedder.dim
        new = [np.zeros((len(asks[agent].new), dim), dtype=np.float32) for agent in agents]
        for a, slots, vectors in self._read({a: asks[agent].new for a, agent in enumerate(agents)}):
            new[a][slots] = vectors
        found = [NearestLabels(new[a], asks[agent].labels) for a, agent in enumerate(agents)]
        del new
        for a, ranks, vectors in self._read({a: asks[agent].known for a, agent in enumerate(agents)}):
            found[a].add(ranks, vectors)
        return {agent: found[a].labels() for a, agent in enumerate(agents)}

    def _read(
        self, wanted: Mapping[int, Sequence[int]]
    ) -> Iterator[tuple[int, npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
        """One pass over the vectors: for each batch, each group's rows found in it, as (group,
        the rows' places in the group's list, their vectors). `wanted`: group -> placement rows."""
        tag = np.full(len(self.ids), -1, dtype=np.int64)
        place = np.zeros(len(self.ids), dtype=np.int64)
        for group, asked in wanted.items():
            at = np.asarray([self.order[r] for r in asked], dtype=np.int64)
            tag[at], place[at] = group, np.arange(len(at))
        start = 0
        for batch in self._batches():
            rows = self._rows(batch["id"], start)
            start += len(rows)
            groups = np.where(rows >= 0, tag[np.maximum(rows, 0)], -1)
            for group in np.unique(groups[groups >= 0]).tolist():
                hit = groups == group
                yield group, place[rows[hit]], batch["vector"][hit]

    def _batches(self) -> Iterable[dict[str, Any]]:
        if self.batch_size is None:
            return trajectory_batches(self.store, _VECTORS, namespace=self.namespace)
        return trajectory_batches(self.store, _VECTORS, namespace=self.namespace, batch_size=self.batch_size)

    def _rows(self, ids: Sequence[str], start: int) -> npt.NDArray[np.int64]:
        """The rows of a batch's ids in `ids` (-1: stored since the columns were read): where
        a pass reads the rows in the order the columns were read, by position; else by id."""
        if self._index is None and list(self.ids[start : start + len(ids)]) == list(ids):
            return np.arange(start, start + len(ids), dtype=np.int64)
        if self._index is None:
            self._index = {rid: row for row, rid in enumerate(self.ids)}
        index = self._index
        return np.asarray([index.get(rid, -1) for rid in ids], dtype=np.int64)


def _members(
    store: Store,
    columns: Columns,
    parents: Set[str],
    runs: Mapping[tuple[str, int], list[int]],
    *,
    namespace: str,
    share: float,
) -> list[ClusterMembers]:
    """The clusters to induce as their members' ids, as a full run plans them (`induction.plan.bounded`):
    runs in `in_run_order` (the columns' order), the literal index of the whole namespace,
    `task` scope for an orchestrator. Their runs are read by id when they are induced; no
    cluster to induce reads nothing."""
    if not runs:
        return []
    ids, agents, success = columns.ids, columns.agents, columns.success
    literals = _literal_index(store, set(ids), namespace=namespace, literal_share=share)
    orchestrators = {agent for rid, agent in zip(ids, agents, strict=True) if rid in parents}
    out = []
    for (agent, cid), rows in runs.items():
        scope: Literal["task", "subtask"] = "task" if agent in orchestrators else "subtask"
        successes = tuple(ids[i] for i in rows if success[i] is True)
        failures = tuple(ids[i] for i in rows if success[i] is False)
        out.append(ClusterMembers(namespace, agent, cid, scope, successes, failures, literals))
    return out


def _literal_index(store: Store, ids: Set[str], *, namespace: str, literal_share: float) -> LiteralIndex:
    """The literal index of the trajectories `ids` (those the run placed): their steps read in
    batches, each counted and dropped (the index does not depend on the order)."""

    def light() -> Iterator[Trajectory]:
        for batch in trajectory_batches(store, _LITERAL_COLUMNS, namespace=namespace):
            rows = zip(batch["id"], batch["agent"], batch["task"], batch["steps"], strict=True)
            for rid, agent, task, steps in rows:
                if rid in ids:
                    yield cast("Trajectory", light_run(rid, agent, task, steps))

    return LiteralIndex.build(light(), max_share=literal_share)


def merge_with_current(
    result: InductionResult,
    current: Mapping[str, Workflow],
    *,
    keys: Set[str],
    induced: Set[str],
    task_of: Mapping[str, str],
) -> tuple[InductionResult, set[str]]:
    """Merge a run's drafts with the current workflows of the clusters it did not induce, as a
    run inducing every cluster merges near-duplicates (`merge_duplicates`): a draft shaped like
    a workflow held by a bigger cluster joins it instead of becoming a workflow of its own
    (`keys`: every cluster; the workflows of the `induced` ones are never carried).
    Names and descriptions are then told apart (`naming.distinct`), among the run's workflows
    and from those that stay served as they are.
    Returns the result with them, and the ids of the workflows carried in (a current one equal
    to its draft makes no new version; one merged into a draft is retired as replaced)."""
    if not result.workflows:
        return result, set()
    fresh = {"version": 1, "parent_version": None, "status": "candidate", "stats": UsageStats()}
    carried = []
    shares = dict(result.keys)
    for w in current.values():
        key = cluster_key(w.id, keys)
        if w.provenance.run_id is None or w.status == "retired" or key not in keys or key in induced:
            continue
        carried.append(w.model_copy(update={**fresh, "created_at": now()}))
        # A sub-routine's sources are segments, `<run id>#<goal position>`.
        runs = (i if i in task_of else i.rsplit("#", 1)[0] for i in w.source_trajectory_ids)
        shares[w.id] = dict(sorted(Counter(task_of[i] for i in runs if i in task_of).items()))
    merged = merge_duplicates([*result.workflows, *carried], shares)
    # What stays served as it is (put by hand; of a cluster whose induction failed) keeps its
    # name and description, the run's workflows told apart from it too; a workflow told apart
    # in an earlier run keeps the name it is served with.
    drafted, failed = {w.id for w in merged}, set(result.failed)
    stay = [w for w in current.values() if w.status not in NOT_SERVED and w.id not in drafted]
    stay = [w for w in stay if w.provenance.run_id is None or cluster_key(w.id, keys) in failed]
    told_apart = distinct(merged, fixed=stay, served=current)
    return replace(result, workflows=told_apart, keys=shares), {w.id for w in carried}
