"""Incremental planning, the reads: new tasks join the stored clusters, and only the clusters
whose runs changed materially are read and induced again (`induction.plan.runplan` decides).

`prepare_run` (jobs/induce.py) asks `assign_run` first; when the stored clustering cannot take
the new runs it gets back why, and refits every cluster instead (that reason is the run's
`refit`). What a run reads here: a few columns of every trajectory (task, agent, outcome, the
task's embedding); only when some cluster is to be induced, the steps' JSON of every trajectory
(for the literal index, unsorted) and whole trajectories of the clusters it induces.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import replace
from typing import Any, Literal, cast

from flowmem.induction.base import ClusterInput, cluster_key, split_outcomes
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.plan.catalog import light_run
from flowmem.induction.plan.increment import Columns
from flowmem.induction.plan.orchestrate import InductionResult, in_run_order, merge_duplicates
from flowmem.induction.plan.runplan import Limits, Opening, RunPlan, place, placed_plan
from flowmem.induction.render.naming import distinct
from flowmem.models import Trajectory, UsageStats, Workflow, now
from flowmem.policy.lifecycle import NOT_SERVED
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = [
    "assign_run",
    "merge_with_current",
    "settings_signature",
]

_COLUMNS = ["id", "agent", "task", "success", "parent_id", "vector"]
_LITERAL_COLUMNS = ["id", "agent", "task", "steps"]


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
    clusters must be fitted again instead. This reads the columns of every run, which
    `runplan.place` decides from, then the runs of the clusters it chose; `current`: the latest
    version of every workflow."""
    namespace = opening.run.namespace
    cols = store.trajectory_columns(_COLUMNS, namespace=namespace)
    columns = Columns(cols["id"], cols["agent"], cols["task"], cols["success"], cols["vector"])
    placement = place(opening, columns, limits)
    if isinstance(placement, str):
        return placement
    inputs = (
        _inputs(store, cols, placement.chosen, namespace=namespace, literal_share=settings.literal_share)
        if placement.chosen
        else []
    )
    task_of = dict(zip(cols["id"], cols["task"], strict=True))
    return placed_plan(opening, current, placement, inputs, task_of=task_of)


def _inputs(
    store: Store,
    cols: Mapping[str, Any],
    runs: Mapping[tuple[str, int], list[int]],
    *,
    namespace: str,
    literal_share: float,
) -> list[ClusterInput]:
    """The inputs of the clusters to induce, as `plan_clusters` makes them: runs in
    `in_run_order`, the literal index of the whole namespace, `task` scope for an orchestrator."""
    ids, agents = cols["id"], cols["agent"]
    literals = _literal_index(store, set(ids), namespace=namespace, literal_share=literal_share)
    parents = {p for p in cols["parent_id"] if p}
    orchestrators = {agent for rid, agent in zip(ids, agents, strict=True) if rid in parents}
    loaded = {
        t.id: t
        for t in store.get_trajectories([ids[i] for rows in runs.values() for i in rows], namespace=namespace)
    }
    out = []
    for (agent, cid), rows in runs.items():
        # In the order `plan_clusters` puts a cluster's runs in.
        successes, failures = split_outcomes(in_run_order(loaded[ids[i]] for i in rows if ids[i] in loaded))
        scope: Literal["task", "subtask"] = "task" if agent in orchestrators else "subtask"
        out.append(ClusterInput(namespace, agent, cid, scope, successes, failures, literals))
    return out


def _literal_index(store: Store, ids: Set[str], *, namespace: str, literal_share: float) -> LiteralIndex:
    """The literal index of the trajectories `ids` (those the run placed): their steps are read
    apart, unsorted, and only by a run that induces (the index does not depend on the order)."""
    scan = store.trajectory_scan(_LITERAL_COLUMNS, namespace=namespace)
    rows = zip(scan["id"], scan["agent"], scan["task"], scan["steps"], strict=True)
    light = (light_run(rid, agent, task, steps) for rid, agent, task, steps in rows if rid in ids)
    return LiteralIndex.build(cast("Iterable[Trajectory]", light), max_share=literal_share)


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
