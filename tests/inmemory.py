"""An in-memory reference of the production planner, for the tests: every run held at once,
each agent's clusters fitted on all its task texts (`plan_clusters`), then every cluster induced
(`induce_drafts`). Production plans in bounded memory (`flowmem.induction.plan.bounded`, read by
`flowmem.jobs.induce.run_induction`): with a sample that covers every text it makes the same
clusters and workflows (tests/test_bounded_induction.py), so unit tests of clustering, naming,
pitfalls and determinism can induce from a list of runs without a store."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Literal

from flowmem.induction.abstract.subroutines import subroutine_inputs
from flowmem.induction.base import ClusterInput, Inducer, split_outcomes
from flowmem.induction.cluster.cluster import ClusterParams, cluster_tasks, match_clusters
from flowmem.induction.literals import LiteralIndex
from flowmem.induction.pitfalls.contrast import with_contrast
from flowmem.induction.plan.orchestrate import (
    ClusterPlan,
    InductionResult,
    assemble,
    in_run_order,
    induce_cluster,
    task_key,
)
from flowmem.models import Trajectory
from flowmem.retrieval.embed import Embedder

__all__ = ["induce_drafts", "plan_clusters"]


def _parents(trajectories: Sequence[Trajectory]) -> set[str]:
    return {t.parent_id for t in trajectories if t.parent_id}


def plan_clusters(
    trajectories: Sequence[Trajectory],
    *,
    params: ClusterParams | None = None,
    literal_share: float = 0.1,
    previous: Mapping[str, Mapping[int, set[str]]] | None = None,
    subroutines: bool = False,
) -> ClusterPlan:
    """Cluster each agent's runs; one namespace at a time. With `subroutines`, a task agent's
    recurring segments become inputs too (`induction/abstract/subroutines.py`).

    `previous` gives, per agent, the task keys (`task_key`) of each cluster id of the last
    run: a new cluster takes the id of the old one it overlaps most, so a workflow's id (and
    lineage) continues when the clusters are refit.

    Raises:
        ValueError: if the trajectories span several namespaces (tenants are never mixed).
    """
    namespaces = {t.namespace for t in trajectories}
    if len(namespaces) > 1:
        raise ValueError(f"one namespace at a time, got {sorted(namespaces)}")
    plan = ClusterPlan()
    if not trajectories:
        return plan
    namespace = namespaces.pop()
    literals = LiteralIndex.build(trajectories, max_share=literal_share)
    parents = _parents(trajectories)
    by_agent: dict[str, list[Trajectory]] = defaultdict(list)
    # A cluster's runs in one order whatever order they were read in, so that a tie among them
    # (a medoid, a variant's centre, an equally common pitfall) goes the same way: the store's
    # order (`in_run_order`), newest first, as the way a task is done now wins a tie.
    for t in in_run_order(trajectories):
        by_agent[t.agent].append(t)
    for agent, runs in sorted(by_agent.items()):
        _plan_agent(
            plan,
            agent,
            runs,
            namespace=namespace,
            literals=literals,
            parents=parents,
            params=params,
            before=(previous or {}).get(agent, {}),
            subroutines=subroutines,
        )
    return plan


def _plan_agent(
    plan: ClusterPlan,
    agent: str,
    runs: Sequence[Trajectory],
    *,
    namespace: str,
    literals: LiteralIndex,
    parents: Collection[str],
    params: ClusterParams | None,
    before: Mapping[int, set[str]],
    subroutines: bool,
) -> None:
    """Cluster one agent's runs into `plan` (see `plan_clusters`); `before`: the agent's
    clusters of the last run, by id."""
    clustering = cluster_tasks([t.task for t in runs], params)
    plan.clusterings[agent] = clustering
    current = {label: {task_key(t) for t in texts} for label, texts in clustering.members().items()}
    stable = match_clusters(before, current, next_id=max(before, default=-1) + 1)
    plan.memberships[agent] = {stable[label]: texts for label, texts in current.items()}
    placed = clustering.placed()  # noise runs join their nearest cluster
    noise = plan.placed.setdefault(agent, {})
    for text, label in clustering.label_of().items():
        if label < 0 <= placed[text]:
            noise.setdefault(stable[placed[text]], set()).add(task_key(text))
    scope: Literal["task", "subtask"] = "task" if any(t.id in parents for t in runs) else "subtask"
    for label, cluster_runs in sorted(_members(runs, placed, stable).items()):
        successes, failures = split_outcomes(cluster_runs)
        plan.clusters.append(ClusterInput(namespace, agent, label, scope, successes, failures, literals))
    if subroutines and scope == "subtask":
        min_tasks = (params or ClusterParams()).min_cluster_size
        plan.clusters += subroutine_inputs(
            runs,
            namespace=namespace,
            agent=agent,
            literals=literals,
            min_tasks=min_tasks,
            cluster_of={text: stable[label] for text, label in placed.items() if label >= 0},
        )


def _members(
    runs: Sequence[Trajectory], placed: Mapping[str, int], stable: Mapping[int, int]
) -> dict[int, list[Trajectory]]:
    """The runs of each cluster, by stable id (a noise run in the cluster it is placed in)."""
    members: dict[int, list[Trajectory]] = defaultdict(list)
    for t in runs:
        if placed[t.task] >= 0:
            members[stable[placed[t.task]]].append(t)
    return members


def induce_drafts(
    trajectories: Sequence[Trajectory],
    inducer: Inducer,
    *,
    params: ClusterParams | None = None,
    literal_share: float = 0.1,
    previous: Mapping[str, Mapping[int, set[str]]] | None = None,
    subroutines: bool = False,
    embedder: Embedder | None = None,
) -> InductionResult:
    """Cluster each agent's runs and induce every cluster (see `plan_clusters`); with an
    `embedder`, each cluster's pitfalls are told from its `contrast.Contrast` too, as
    `flowmem induce` tells them."""
    plan = plan_clusters(
        trajectories, params=params, literal_share=literal_share, previous=previous, subroutines=subroutines
    )
    clusters = plan.clusters
    if embedder is not None:
        clusters = with_contrast(clusters, embedder.embed)
    return assemble(plan, [induce_cluster(c, inducer) for c in clusters])
