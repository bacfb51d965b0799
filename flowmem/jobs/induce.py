"""Induce: one incremental induction run over a namespace, versioned, committed at once.

A run (1) counts the trajectories stored since the last run and stops there when nothing is
new and no cluster is waiting for a retry; (2) places the new tasks in the stored clusters
(`jobs/incremental.py` reads the columns), or, when they change the clustering materially
(many new tasks, a new agent, other settings), refits the clusters, keeping their ids, and
says why (`refit`); (3) induces only the clusters whose member runs changed since the last run
(placed runs: changed materially, `induction.cluster.assign.material`) or whose induction failed then;
(4) stores changed workflows as new versions in one commit tagged with the run id; (5) retires
the workflows of earlier runs whose cluster is gone or was induced again without them
(`retirements`). What to do is decided in the core (`induction.plan.runplan`: a frozen `RunPlan`,
from the last run's state and what this module reads); this module reads and writes.
A refit reads the namespace in bounded memory (`induction.plan.bounded`): batches of a few columns,
each agent's clusters fitted on a sample of its task texts (`Settings.cluster_sample`) and
every other text placed with that fit; a cluster to induce is planned as its members' ids and
read by id when it is induced (`induce_one`), so a run holds one cluster's runs at a time.
`run_induction` runs it in this process; the Prefect flow (`flows.pipeline.induce_flow`) runs
`prepare_run`, `induce_one` per cluster and `commit_outcomes` as tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from pydantic import BaseModel, ConfigDict

from flowmem.induction.abstract.subroutines import compose_workflows
from flowmem.induction.base import ClusterInput, Inducer, cluster_key
from flowmem.induction.cluster.assign import MIN_CHANGE
from flowmem.induction.pitfalls.contrast import SERVED, Members, contrast_sets
from flowmem.induction.pitfalls.contrast import with_contrast as contrasted
from flowmem.induction.plan.bounded import ClusterMembers, fit_namespace
from flowmem.induction.plan.catalog import SCAN_COLUMNS, scan
from flowmem.induction.plan.increment import REFIT_SHARE
from flowmem.induction.plan.orchestrate import (
    ClusterOutcome,
    InductionResult,
    assemble,
    induce_cluster,
    plan_versions,
)
from flowmem.induction.plan.runplan import (
    Limits,
    Opening,
    RunPlan,
    clusters_before,
    fitted_plan,
    open_run,
    refit_reason,
    skipped_plan,
)
from flowmem.jobs.incremental import assign_run, merge_with_current, settings_signature
from flowmem.models import InductionRun, Retirement, Trajectory, Workflow
from flowmem.policy.lifecycle import NOT_SERVED, Cause, Transition, needs_reinduction
from flowmem.retrieval.embed import Vectors
from flowmem.settings import Settings
from flowmem.storage import NotFoundError, Store, scans
from flowmem.storage.scans import one_pass, spill_groups, spilled, trajectories_by_id, trajectory_batches

__all__ = [
    "RunPlan",
    "RunReport",
    "RunSummary",
    "cluster_input",
    "commit_outcomes",
    "induce_all",
    "induce_one",
    "key_vectors",
    "nothing_served",
    "prepare_run",
    "retirements",
    "run_induction",
]


class RunSummary(BaseModel):
    """An induction run's figures: what `flowmem induce` prints (`--json`: this model's JSON),
    what `POST /v1/induction/runs` returns, the induce flow's artifact and `flowmem eval
    --online`'s batches read."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    run: str | None
    """The committed run's id (its store tag); None when the run was skipped."""
    tag: str | None
    """The store tag of the run committed, or of the last one when this run was skipped."""
    skipped: bool
    """Nothing new since the last run and no cluster waiting for a retry: no run was made."""
    trajectories: int
    """Trajectories in the namespace."""
    new_trajectories: int
    """Of those, stored since the last run."""
    clusters: int
    """Clusters of the namespace after the run."""
    clusters_changed: int
    """Clusters induced by this run (changed since the last run, or failed then)."""
    clusters_deferred: int
    """Clusters whose new runs wait until they change the cluster materially."""
    refit: str | None
    """Why the clusters were fitted again; None when the new tasks were placed in the stored ones."""
    versions_created: int
    """New workflow versions stored."""
    new_workflows: int
    """Of those, first versions of a new workflow."""
    pitfalls: int
    """Pitfalls in the versions created."""
    checkable_pitfalls: int
    """Of those, pitfalls with a condition an agent's step can be checked against."""
    pitfall_notes: int
    """Clusters of failed runs only, given pitfall notes instead of a workflow."""
    retired: list[str]
    """Ids of the workflows whose versions the run retired (sorted)."""
    failed_clusters: dict[str, str]
    """Cluster key -> why its induction failed (it is induced again by the next run)."""
    llm_calls: int
    """LLM calls made."""
    llm_tokens: int
    """LLM tokens used."""
    llm_retries: int
    """LLM calls retried."""
    llm_rejected: dict[str, int]
    """Rejected LLM outputs per reason (`leak`, ...)."""

    @property
    def every_cluster_failed(self) -> bool:
        """Whether the run tried clusters and every one failed (e.g. the LLM was unreachable):
        nothing could be induced, so the run is not a success (the CLI exits 1, the API answers 502)."""
        return bool(self.failed_clusters) and len(self.failed_clusters) == self.clusters_changed

    @property
    def rejected_outputs(self) -> int:
        """LLM outputs rejected, every reason together."""
        return sum(self.llm_rejected.values())


@dataclass
class RunReport:
    """What an induction run committed."""

    run: InductionRun
    """The committed run (its id is the store tag), or the last one if this run was skipped."""
    result: InductionResult
    """Everything induced, including pitfall notes and failed clusters."""
    versions: list[Workflow]
    """The new workflow versions it stored."""
    plan: RunPlan
    """What it set out to do."""
    retired: list[Transition] = field(default_factory=list)
    """The versions it retired (`retirements`): still readable, never served."""

    def summary(self) -> RunSummary:
        """The run's figures (`RunSummary`)."""
        counts = self.run.counts if not self.plan.skipped else {}
        return RunSummary(
            run=self.run.id if not self.plan.skipped else None,
            tag=self.run.tag,
            skipped=self.plan.skipped,
            trajectories=self.plan.total,
            new_trajectories=self.plan.new_trajectories,
            clusters=len(self.plan.fingerprints),
            clusters_changed=len(self.plan.changed),
            clusters_deferred=len(self.plan.deferred),
            refit=self.plan.refit,
            versions_created=len(self.versions),
            new_workflows=sum(w.version == 1 for w in self.versions),
            pitfalls=sum(len(w.pitfalls) for w in self.versions),
            checkable_pitfalls=sum(p.condition is not None for w in self.versions for p in w.pitfalls),
            pitfall_notes=len(self.result.notes),
            retired=sorted({t.workflow_id for t in self.retired}),
            failed_clusters=self.result.failed,
            llm_calls=counts.get("llm_calls", 0),
            llm_tokens=counts.get("llm_tokens", 0),
            llm_retries=counts.get("llm_retries", 0),
            llm_rejected=rejected_counts(counts),
        )


REJECTED = "llm_rejected_"
"""Prefix of the run counts of rejected LLM outputs, one per reason (`llm_rejected_leak`)."""


def rejected_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """The rejected LLM outputs per reason, of a run's counts (`REJECTED` keys)."""
    return {k.removeprefix(REJECTED): n for k, n in counts.items() if k.startswith(REJECTED)}


def nothing_served(store: Store, namespace: str) -> Callable[[str], bool]:
    """Whether every version of a workflow is deprecated (False for an unknown id), read from
    the store: the `nothing_served` of `needs_reinduction`."""

    def check(workflow_id: str) -> bool:
        try:
            return all(w.status == "deprecated" for w in store.history(workflow_id, namespace=namespace))
        except NotFoundError:
            return False

    return check


def _last_induction(store: Store, namespace: str) -> InductionRun | None:
    """The latest induction run still in effect: one that was rolled back is not (the store
    holds the workflows from before it, so what it induced is to be induced again)."""
    found = store.list_runs(namespace=namespace)
    undone = {r.rolled_back_run for r in found if r.kind == "rollback"}
    runs = [r for r in found if r.kind == "induce" and r.id not in undone]
    return runs[-1] if runs else None


def prepare_run(
    store: Store,
    settings: Settings,
    *,
    namespace: str,
    force: bool = False,
    refit_share: float = REFIT_SHARE,
    min_change: float = MIN_CHANGE,
) -> RunPlan:
    """Decide what the next run of `namespace` induces (`force`: refit, every cluster).

    This reads, `induction.plan.runplan` decides: each read only when the decision before it asks
    for it. `settings` gives the clustering parameters; every read and the run itself use
    `namespace`. New tasks join the stored clusters until those since the fit reach
    `refit_share` of the fitted ones; a cluster's new runs wait until they reach `min_change`
    of its runs.
    """
    last = _last_induction(store, namespace)
    opening = open_run(
        InductionRun(id=Store.new_run_id(), namespace=namespace),
        last,
        total=store.count_trajectories(namespace=namespace),
        reinduce=_to_reinduce(store, namespace, last),
        force=force,
    )
    if opening.nothing_new:
        return skipped_plan(opening)
    current = {w.id: w for w in store.list_workflows(namespace=namespace)}
    limits = Limits(
        signature=settings_signature(settings),
        min_tasks=settings.min_cluster_size,
        refit_share=refit_share,
        min_change=min_change,
    )
    why = refit_reason(opening, signature=limits.signature)
    if why is None:
        placed = assign_run(store, settings, opening, current, limits=limits)
        if isinstance(placed, RunPlan):
            return with_contrast(store, placed, cap=settings.cluster_sample)
        why = placed
    plan = _refit(store, settings, opening, current, why=why, signature=limits.signature)
    return with_contrast(store, plan, cap=settings.cluster_sample)


def with_contrast(store: Store, plan: RunPlan, *, cap: int) -> RunPlan:
    """The plan with each changed cluster's `Contrast` (`induction.pitfalls.contrast`): the
    successful runs of other clusters its workflow would be served to, and the failed runs of
    clusters with no successful run whose nearest successful task is its own; at most `cap`
    runs per cluster, over a sample of `cap` successful runs (and of `cap` failed ones) of the
    namespace (`contrast_sets`). Computed over every cluster the plan knows the members of: a
    refit, all of them; a run that placed its new runs (`jobs.incremental`), the changed
    clusters only, so the contrast is taken among them (as among clusters that hold their runs,
    `ClusterInput`)."""
    inputs = [c for c in plan.changed if isinstance(c, ClusterInput)]
    if inputs and len(inputs) == len(plan.changed):
        found = contrasted(inputs, store.embedder.embed, k=SERVED, limit=cap, sample=cap)
        return replace(plan, changed=tuple(found))
    return _member_contrast(store, plan, cap=cap)


def _member_contrast(store: Store, plan: RunPlan, *, cap: int) -> RunPlan:
    """`with_contrast` for clusters planned as their members' ids."""
    known = [c for c in (plan.members or plan.changed) if isinstance(c, ClusterMembers) and c.kind == "task"]
    known = [c for c in known if all(i in plan.task_of for i in (*c.successes, *c.failures))]
    if not known or not any(isinstance(c, ClusterMembers) for c in plan.changed):
        return plan
    members = [Members(c.key, c.successes, c.failures) for c in known]
    found = contrast_sets(members, plan.task_of, store.embedder.embed, k=SERVED, limit=cap, sample=cap)
    changed = tuple(
        replace(c, contrast=found[c.key]) if isinstance(c, ClusterMembers) and c.key in found else c
        for c in plan.changed
    )
    return replace(plan, changed=changed)


def _to_reinduce(store: Store, namespace: str, last: InductionRun | None) -> set[str]:
    """The workflows deprecated for their own failures, since the last run, that nothing
    serves (`needs_reinduction`, from the transitions logged and the versions stored)."""
    since = last.finished_at if last else None
    logged = [t.transition for t in store.transitions(namespace=namespace) if since is None or t.at > since]
    return set(needs_reinduction(logged, nothing_served=nothing_served(store, namespace)))


def _refit(
    store: Store,
    settings: Settings,
    opening: Opening,
    current: Mapping[str, Workflow],
    *,
    why: str,
    signature: str,
) -> RunPlan:
    """Read every run in batches of its columns, fit every agent's clusters again (ids kept;
    on `settings.cluster_sample` task texts at most, the others placed) and plan from them."""
    namespace = opening.run.namespace
    found = scan(
        trajectory_batches(store, SCAN_COLUMNS, namespace=namespace),
        literal_share=settings.literal_share,
        subroutines=settings.subroutines,
    )
    task_of = found.catalog.task_of()
    fitted = fit_namespace(
        found,
        namespace=namespace,
        params=settings.cluster_params,
        previous=clusters_before(opening, current, task_of),
        sample=settings.cluster_sample,
    )
    return fitted_plan(opening, current, fitted, task_of=task_of, why=why, signature=signature)


def cluster_input(store: Store, cluster: ClusterInput | ClusterMembers) -> ClusterInput:
    """A planned cluster with its runs: those of a `ClusterMembers` read by id."""
    if isinstance(cluster, ClusterInput):
        return cluster
    return cluster.input(trajectories_by_id(store, cluster.runs(), namespace=cluster.namespace))


def induce_one(store: Store, cluster: ClusterInput | ClusterMembers, inducer: Inducer) -> ClusterOutcome:
    """Induce one planned cluster, its runs read first if the plan holds only their ids (the
    runs are dropped once induced)."""
    return induce_cluster(cluster_input(store, cluster), inducer)


def _read_groups(
    clusters: Sequence[ClusterInput | ClusterMembers], size: int
) -> Iterator[list[ClusterInput | ClusterMembers]]:
    """Consecutive clusters whose runs together stay within `size` (one larger alone)."""
    group: list[ClusterInput | ClusterMembers] = []
    held = 0
    for c in clusters:
        n = len(c.runs()) if isinstance(c, ClusterMembers) else 0
        if group and held + n > size:
            yield group
            group, held = [], 0
        group.append(c)
        held += n
    if group:
        yield group


@contextmanager
def _group_reads(
    store: Store, wanted: Sequence[Sequence[str]], namespace: str
) -> Iterator[Callable[[int], dict[str, Trajectory]]]:
    """A reader of each group of ids' runs: by id (`trajectories_by_id`), or, when the groups
    read most of the namespace (`scans.one_pass`), from one pass over it (`spill_groups`) whose
    local file is removed on exit."""
    if not one_pass(store, wanted, namespace=namespace):
        yield lambda g: trajectories_by_id(store, wanted[g], namespace=namespace) if wanted[g] else {}
        return
    with spill_groups(store, wanted, namespace=namespace) as spill:
        yield lambda g: spilled(spill, g)


def induce_all(
    store: Store,
    clusters: Sequence[ClusterInput | ClusterMembers],
    inducer: Inducer,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[ClusterOutcome]:
    """Induce planned clusters in order. The runs of those planned as ids are read a group of
    clusters at a time (up to `scans.READ_CHUNK` runs, or one larger cluster, the queries
    `trajectories_by_id` makes), and dropped once the group is induced: a read scans the
    namespace's ids, so thousands of small clusters are not read one query each. When the
    groups read most of the namespace (a full run), they are read in one pass over it first
    (`scans.spill_groups`), each group then from a local file. `progress(done, total)` is
    called before each cluster."""
    outcomes: list[ClusterOutcome] = []
    groups = list(_read_groups(clusters, scans.READ_CHUNK))
    wanted = [
        list(dict.fromkeys(i for c in group if isinstance(c, ClusterMembers) for i in c.runs()))
        for group in groups
    ]
    namespace = groups[0][0].namespace if groups else ""
    with _group_reads(store, wanted, namespace) as read:
        for k, group in enumerate(groups):
            runs = read(k)
            for c in group:
                if progress is not None:
                    progress(len(outcomes), len(clusters))
                outcomes.append(induce_cluster(c if isinstance(c, ClusterInput) else c.input(runs), inducer))
            del runs
    return outcomes


def key_vectors(
    store: Store, shares: Mapping[str, Mapping[str, float]], *, limit: int = 32
) -> tuple[dict[str, Vectors], dict[str, list[float]]]:
    """Each workflow's retrieval keys: the embeddings of (at most `limit`, evenly spread) of
    its distinct source tasks, and each one's share (`InductionResult.key_shares`). Search
    scores a workflow by its best key (`retrieval.nearest`)."""
    vectors: dict[str, Vectors] = {}
    weights: dict[str, list[float]] = {}
    for wid, tasks in shares.items():
        distinct = sorted(tasks)
        step = max(1, -(-len(distinct) // limit))
        chosen = distinct[::step][:limit]
        vectors[wid] = store.embedder.embed(chosen)
        weights[wid] = [tasks[t] for t in chosen]
    return vectors, weights


def retirements(
    store: Store, plan: RunPlan, result: InductionResult, *, carried: Set[str] = frozenset()
) -> list[Transition]:
    """The versions a run retires: every served version (candidate or active) of a workflow an
    earlier induction run made, whose cluster no longer exists after the re-clustering
    (`gone`), or whose cluster this run induced again, successfully, without it (`replaced`:
    a variant that no longer exists, a near-duplicate merged into another), or, `carried` into
    the run from a cluster it did not induce, merged into a near-duplicate of this run. A
    cluster whose induction failed keeps its workflows."""
    keys = set(plan.fingerprints)
    redone = {c.key for c in plan.changed} - set(result.failed)
    drafted = {w.id for w in result.workflows}
    out: list[Transition] = []
    for w in plan.current.values():
        if w.id in drafted or w.provenance.run_id is None:  # not induced (put by hand): kept
            continue
        key = cluster_key(w.id, keys)
        cause: Cause
        if key not in keys:
            cause, reason = "gone", f"its cluster {key} no longer exists after run {plan.run.id}"
        elif key in redone or w.id in carried:
            cause, reason = "replaced", f"run {plan.run.id} induced its cluster {key} without it"
        else:
            continue
        for v in store.history(w.id, namespace=plan.run.namespace):
            if v.status not in NOT_SERVED:
                out.append(Transition(w.id, v.version, v.status, "retired", reason, cause))
    return out


def commit_outcomes(store: Store, plan: RunPlan, outcomes: Sequence[ClusterOutcome]) -> RunReport:
    """Version what changed and commit it as the run (nothing is written for a skipped run)."""
    result = assemble(plan.clusters, outcomes)
    if plan.skipped:
        last = plan.last or plan.run
        return RunReport(last, result, [], plan)
    result, carried = merge_with_current(
        result,
        plan.current,
        keys=set(plan.fingerprints),
        induced={c.key for c in plan.changed},
        task_of=plan.task_of,
    )
    alive = set(plan.fingerprints)  # composed with every sub-routine the run keeps, induced or not
    known = [w for w in plan.current.values() if w.kind == "subroutine" and w.status not in NOT_SERVED]
    composed = compose_workflows(
        result.workflows, known=[w for w in known if cluster_key(w.id, alive) in alive]
    )
    result = replace(result, workflows=composed)
    failed = sorted(result.failed)
    usage = result.usage
    counts = {
        "trajectories": plan.total,
        "new_trajectories": plan.new_trajectories,
        "clusters_changed": len(plan.changed),
        "llm_calls": usage.calls,
        "llm_tokens": usage.tokens,
        "llm_retries": usage.retries,
        **{REJECTED + reason: n for reason, n in sorted(usage.rejected.items())},
        **result.counts,
    }
    if plan.refit is None:  # no fit: every cluster, not only those induced
        counts["clusters"] = len(plan.fingerprints)
    counts["clusters_deferred"] = len(plan.deferred)
    retired = retirements(store, plan, result, carried=carried)
    state = plan.next_state(
        failed=failed,
        # Kept in the run, so a rollback of it can give the retired versions their status back.
        retired=[Retirement(t.workflow_id, t.version, t.old) for t in retired],
    )
    counts["retired"] = len({t.workflow_id for t in retired})
    run = plan.run.model_copy(update={"counts": counts, "state": state})
    versions = plan_versions(result.workflows, plan.current, run_id=run.id, revive=plan.revive)
    shares = result.key_shares()  # over every draft: an unchanged variant holds runs too
    keys, weights = key_vectors(store, {w.id: shares[w.id] for w in versions})
    committed = store.commit_run(run, versions, keys=keys, shares=weights)
    # After the commit: a crash in between leaves them served, and the next run retires them.
    store.record_transitions(retired, namespace=plan.run.namespace)
    return RunReport(committed, result, versions, plan, retired)


def run_induction(
    store: Store,
    settings: Settings,
    inducer: Inducer,
    *,
    namespace: str,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> RunReport:
    """One whole induction run of `namespace` in this process (the flow runs the same steps as
    tasks). `progress(done, total)` is called once the run is planned and after each cluster."""
    plan = prepare_run(store, settings, namespace=namespace, force=force)
    outcomes = induce_all(store, plan.changed, inducer, progress=progress)
    if progress is not None:
        progress(len(plan.changed), len(plan.changed))
    return commit_outcomes(store, plan, outcomes)
