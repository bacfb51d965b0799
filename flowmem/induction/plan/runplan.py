"""The plan of an induction run: what it refits, induces, defers and revives, and the state it
leaves, decided from the last run's state and what `jobs/` read of the namespace. Pure: every
input is plain data, every plan one frozen value built at once.

A run is planned in the order of what its reads cost (`jobs.induce.prepare_run` reads, this
decides):

1. `open_run`: the last run, how many trajectories are stored and the workflows the lifecycle
   sends back to induction give the clusters `pending` and whether anything is to do
   (`Opening.nothing_new`: the plan is `skipped_plan`, nothing more is read).
2. `refit_reason`: the first run, a forced one and a state with no usable fit refit at once.
3. `place` (the columns of every run, the vectors only of the texts it places and those it
   compares them with): the new runs placed in the stored clusters
   (`increment.place_new_runs`), or why the clusters must be fitted again; `placed_plan` then
   takes the clusters it chose, as their members' ids (read when each is induced).
4. `fitted_plan`: the plan after a fit of every run in bounded memory (`bounded.fit_namespace`,
   given the memberships to keep ids from, `clusters_before`): its clusters are their members'
   ids, read when each is induced.

`RunPlan.next_state` is what the run leaves for the next one, once its clusters are induced.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace

from flowmem.induction.base import ClusterInput, cluster_key
from flowmem.induction.cluster.assign import MIN_CHANGE
from flowmem.induction.plan.bounded import ClusterMembers, Fitted
from flowmem.induction.plan.increment import (
    REFIT_SHARE,
    Columns,
    Memberships,
    Placement,
    next_state,
    place_new_runs,
    stored_clustering_unusable,
    thaw,
    to_induce_after_refit,
)
from flowmem.induction.plan.orchestrate import ClusterPlan, task_key
from flowmem.models import Fit, InductionRun, Retirement, RunState, Trajectory, Workflow

__all__ = [
    "FIRST_RUN",
    "FORCED",
    "Limits",
    "Opening",
    "RunPlan",
    "clusters_before",
    "fitted_plan",
    "open_run",
    "place",
    "placed_plan",
    "previous_clusters",
    "refit_reason",
    "skipped_plan",
]

FIRST_RUN = "the first run"
"""The refit reason of a namespace's first run."""
FORCED = "every cluster is induced again"
"""The refit reason of a forced run."""


@dataclass(frozen=True)
class Limits:
    """What a run's decisions depend on besides the state and the columns."""

    signature: str
    """The clustering settings now (`Fit.settings`): a fit made with others is not reused."""
    min_tasks: int
    """An agent with no cluster yet is clustered (by a refit) once it has this many task texts."""
    refit_share: float = REFIT_SHARE
    """New task texts since the fit, as a share of those it clustered, that refit."""
    min_change: float = MIN_CHANGE
    """A cluster's new runs, as a share of its runs, worth inducing it again for."""


@dataclass(frozen=True)
class Opening:
    """What a run knows before it reads a column: the first stage of its plan (`open_run`)."""

    run: InductionRun
    """The run being planned (not yet committed)."""
    last: InductionRun | None
    """The previous induction run still in effect (None: this is the first)."""
    total: int
    """Trajectories in the namespace."""
    new_trajectories: int
    """Stored since the last run."""
    pending: frozenset[str]
    """Clusters induced whatever their new runs: failed in the last run, or holding a workflow
    deprecated for its own failures since."""
    revive: frozenset[str]
    """Workflows deprecated for their own failures that nothing serves."""
    force: bool
    """Refit and induce every cluster."""

    @property
    def nothing_new(self) -> bool:
        """True when the run has nothing to do: there was a run, it is not forced, no
        trajectory is new and no cluster waits for a retry."""
        return self.last is not None and not self.force and self.new_trajectories == 0 and not self.pending


@dataclass(frozen=True)
class RunPlan:
    """What an induction run is about to do, decided at once (`skipped_plan`, `placed_plan`,
    `fitted_plan`).

    A frozen dataclass, not a pydantic model: it carries `ClusterInput`s (dataclasses holding
    every run of a cluster) and a `ClusterPlan` (with the clusterings' arrays), which pydantic
    would validate and copy field by field, and the Prefect flow hands the plan between tasks
    whole (`flows.pipeline.Parcel`)."""

    run: InductionRun
    """The run being prepared (not yet committed)."""
    total: int
    """Trajectories in the namespace."""
    new_trajectories: int
    """Stored since the last run."""
    last: InductionRun | None = None
    """The previous induction run."""
    revive: frozenset[str] = frozenset()
    """Workflows a new version of which is committed even when re-induction gives the same
    content: deprecated for their own failures with nothing served, or retired."""
    current: Mapping[str, Workflow] = field(default_factory=dict)
    """The latest version of every workflow (empty when the run is skipped)."""
    clusters: ClusterPlan = field(default_factory=ClusterPlan)
    """The clusterings and memberships (after placing new tasks, the stored memberships);
    its `clusters` hold the inputs given with their runs, if any (empty when every cluster is
    planned as its members' ids, and when the run is skipped)."""
    changed: tuple[ClusterInput | ClusterMembers, ...] = ()
    """The clusters to induce: with their runs, or as their members' ids (read when each is
    induced, `jobs.induce.cluster_input`)."""
    fingerprints: Mapping[str, str] = field(default_factory=dict)
    """Every cluster's fingerprint (a hash of its runs) now."""
    sizes: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Every cluster's (successes, failures) now."""
    placed: Memberships = field(default_factory=dict)
    """Agent -> stable cluster id -> the task keys in it that no fit clustered (noise texts,
    and the tasks placed since the fit)."""
    fit: Fit | None = None
    """The fit the clusters come from."""
    refit: str | None = None
    """Why the clusters were fitted again; None when the new tasks were placed in the stored
    clusters (or the run is skipped)."""
    deferred: tuple[str, ...] = ()
    """Clusters with too few new runs to be induced again yet."""
    task_of: Mapping[str, str] = field(default_factory=dict)
    """Trajectory id -> its task text, for every trajectory of the namespace."""
    members: tuple[ClusterMembers, ...] = ()
    """After a fit in bounded memory (`fitted_plan`): every cluster, as its members' ids."""

    @property
    def skipped(self) -> bool:
        """True when nothing changed: no cluster to induce, none with runs waiting (a run
        that only defers is recorded, with the placements it made)."""
        return not self.changed and not self.deferred

    def next_state(self, *, failed: Sequence[str], retired: Iterable[Retirement]) -> RunState:
        """What the run leaves for the next one once its clusters are induced (`failed`: those
        whose induction failed; `retired`: the versions it retires), `increment.next_state`."""
        return next_state(
            self.last.state if self.last else None,
            fingerprints=self.fingerprints,
            sizes=self.sizes,
            deferred=self.deferred,
            failed=failed,
            clusters=self.clusters.memberships,
            placed=self.placed,
            fit=self.fit,
            refit=self.refit,
            subroutines=[
                *(c.key for c in self.clusters.clusters if c.kind == "subroutine"),
                *(c.key for c in self.members if c.kind == "subroutine"),
            ],
            retired=retired,
        )


def open_run(
    run: InductionRun, last: InductionRun | None, *, total: int, reinduce: Set[str], force: bool
) -> Opening:
    """The first stage of `run`'s plan, from the `last` run still in effect, the `total` of
    trajectories stored and the workflows to induce again (`lifecycle.needs_reinduction`):
    their clusters and those whose induction failed last are pending."""
    seen = int(last.counts.get("trajectories", 0)) if last else 0
    pending = set(last.state.failed) if last else set()
    pending |= {cluster_key(wid) for wid in reinduce}
    return Opening(
        run=run,
        last=last,
        total=total,
        new_trajectories=max(0, total - seen),
        pending=frozenset(pending),
        revive=frozenset(reinduce),
        force=force,
    )


def skipped_plan(opening: Opening) -> RunPlan:
    """The plan of a run with nothing to do (`Opening.nothing_new`)."""
    return RunPlan(
        run=opening.run,
        total=opening.total,
        new_trajectories=opening.new_trajectories,
        last=opening.last,
        revive=opening.revive,
    )


def refit_reason(opening: Opening, *, signature: str) -> str | None:
    """Why the run fits the clusters again before reading a column (None: it tries to place
    the new runs in the stored clusters first, `place`)."""
    if opening.last is None:
        return FIRST_RUN
    if opening.force:
        return FORCED
    return stored_clustering_unusable(opening.last.state, signature=signature)


def place(opening: Opening, columns: Columns, limits: Limits) -> Placement | str:
    """The runs new since the last run placed in its clusters, with the clusters to induce
    and those deferred; or why the clusters must be fitted again instead."""
    why = refit_reason(opening, signature=limits.signature)
    if why is not None or opening.last is None:
        return why or FIRST_RUN
    return place_new_runs(
        opening.last.state,
        columns,
        signature=limits.signature,
        min_tasks=limits.min_tasks,
        pending=opening.pending,
        refit_share=limits.refit_share,
        min_change=limits.min_change,
    )


def _revived(opening: Opening, current: Mapping[str, Workflow]) -> frozenset[str]:
    """A retired workflow whose cluster is back gets a new version even when it says the same."""
    return opening.revive | {w.id for w in current.values() if w.status == "retired"}


def placed_plan(
    opening: Opening,
    current: Mapping[str, Workflow],
    placement: Placement,
    inputs: Sequence[ClusterInput | ClusterMembers],
    *,
    task_of: Mapping[str, str],
) -> RunPlan:
    """The plan of a run that placed its new runs in the stored clusters (`place`): it
    induces the `inputs` of the clusters `placement` chose (`jobs.incremental` gives them as
    their members' ids), keeps the last fit and records the clusters deferred. `current`: the
    latest version of every workflow."""
    state = opening.last.state if opening.last else RunState()
    return replace(
        skipped_plan(opening),
        revive=_revived(opening, current),
        current=current,
        clusters=ClusterPlan(
            [c for c in inputs if isinstance(c, ClusterInput)], memberships=thaw(state.clusters) or {}
        ),
        changed=tuple(inputs),
        fingerprints=placement.fingerprints,
        sizes=placement.sizes,
        placed=placement.placed,
        fit=state.fit,
        refit=None,
        deferred=tuple(placement.deferred),
        task_of=task_of,
    )


def previous_clusters(
    workflows: Iterable[Workflow], trajectories: Iterable[Trajectory] | Mapping[str, str]
) -> dict[str, dict[int, set[str]]]:
    """Per agent, the task keys of each cluster that current workflows were induced from (for
    a store whose last run kept no memberships); `trajectories`: the runs, or run id -> task."""
    pairs = (
        trajectories.items() if isinstance(trajectories, Mapping) else ((t.id, t.task) for t in trajectories)
    )
    task_of = {rid: task_key(task) for rid, task in pairs}
    found: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    for w in workflows:
        if w.cluster_id is not None:
            found[w.agent][w.cluster_id].update(task_of[i] for i in w.source_trajectory_ids if i in task_of)
    return {agent: dict(clusters) for agent, clusters in found.items()}


def clusters_before(
    opening: Opening, current: Mapping[str, Workflow], trajectories: Sequence[Trajectory] | Mapping[str, str]
) -> Memberships:
    """The memberships a refit keeps cluster ids from: the last run's fitted ones, or, when it
    kept none, those the current workflows were induced from (`previous_clusters`)."""
    kept = thaw(opening.last.state.clusters) if opening.last else None
    return kept or previous_clusters(current.values(), trajectories)


def fitted_plan(
    opening: Opening,
    current: Mapping[str, Workflow],
    fitted: Fitted,
    *,
    task_of: Mapping[str, str],
    why: str,
    signature: str,
) -> RunPlan:
    """The plan of a run that fitted every agent's clusters again, in bounded memory
    (`bounded.fit_namespace`), for the reason `why`: it induces the clusters whose runs changed
    since the last run (every one when forced) and the pending ones, handed on as their
    members' ids. `task_of`: run id -> task, every run's."""
    fingerprints = {c.key: c.fingerprint() for c in fitted.members}
    before = opening.last.state if opening.last and not opening.force else None
    redo = to_induce_after_refit(fingerprints, before, pending=opening.pending)
    return replace(
        skipped_plan(opening),
        revive=_revived(opening, current),
        current=current,
        clusters=fitted.plan,
        changed=tuple(c for c in fitted.members if c.key in redo),
        fingerprints=fingerprints,
        sizes={c.key: (len(c.successes), len(c.failures)) for c in fitted.members},
        placed=fitted.plan.placed,
        fit=Fit(
            trajectories=fitted.trajectories,
            texts=fitted.texts,
            agents=tuple(sorted(fitted.plan.clusterings)),
            settings=signature,
        ),
        refit=why,
        task_of=task_of,
        members=tuple(fitted.members),
    )
