"""The rule-based inducer (the default; no LLM)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from flowmem.induction.abstract.abstract import abstract_runs, fresh_name
from flowmem.induction.abstract.loops import folded
from flowmem.induction.abstract.noise import working_steps
from flowmem.induction.abstract.segments import is_read
from flowmem.induction.base import ClusterInput, Induced, InductionRefused, Usage, variant_id, with_agent
from flowmem.induction.injection import find_injection, tainted_destinations
from flowmem.induction.literals import find_literals, scalars
from flowmem.induction.pitfalls.checked import ClusterPitfalls
from flowmem.induction.render.describe import describe, name_for, step_intents
from flowmem.induction.render.render import render_workflow
from flowmem.models import Provenance, Trajectory, Workflow, WorkflowStep, is_demonstration
from flowmem.retrieval.align import lcs_len, lcs_pairs, medoid

__all__ = ["RuleInducer", "changes", "consensus", "is_demonstration", "repaired", "variants"]


class RuleInducer:
    """Per solution variant of a cluster: its medoid run, abstracted; pitfalls from failures.
    Variants and templates are made of the runs' working steps (`noise.working_steps`); pitfalls
    see the raw runs."""

    kind = "rule"

    def __init__(self, *, max_pitfalls: int = 2, min_variant_runs: int = 1) -> None:
        self.max_pitfalls = max_pitfalls
        self.min_variant_runs = min_variant_runs

    def induce(self, cluster: ClusterInput) -> Induced:
        """One workflow per way the cluster's successful runs solve its tasks (see `variants`),
        their repeats folded into loops (`loops.folded`); no LLM, so no usage. A variant that
        would carry an example value has it made a placeholder, and one that still fails a
        check is left out alone: the cluster is refused only when every variant is."""
        runs = [t for t in map(working_steps, cluster.successes) if t.steps]
        if cluster.scope == "subtask":  # a plan's delegations are its subtasks, in order: no loop
            runs = folded(runs)
        if not runs:
            return Induced([], Usage())
        tainted = tainted_destinations([*cluster.successes, *cluster.failures])
        lessons = self._lessons(cluster)
        out: list[Workflow] = []
        refused: InductionRefused | None = None
        for j, members in enumerate(variants(runs, min_runs=self.min_variant_runs)):
            wid = variant_id(cluster.key, 0 if j == 0 else j + 1)
            try:
                out.append(self._variant(cluster, members, wid, tainted, lessons))
            except InductionRefused as err:
                refused = refused or err
        if not out and refused is not None:
            raise refused
        return Induced(out, Usage())

    def _variant(
        self,
        cluster: ClusterInput,
        members: list[Trajectory],
        wid: str,
        tainted: AbstractSet[str],
        lessons: ClusterPitfalls,
    ) -> Workflow:
        """The workflow of one variant, checked (`_checked`)."""
        literals = cluster.example_literals
        # A demonstration says what to change; the agent's own runs show how it gets there.
        basis = [t for t in members if not is_demonstration(t)] or members
        template = consensus(basis[medoid([t.actions for t in basis])], basis)
        abstraction = abstract_runs(template, members, cluster.literals, literals)
        steps, parameters = repaired(abstraction.steps, abstraction.parameters, literals)
        if cluster.scope == "task":
            steps = [with_agent(s) for s in steps]
        notes = step_intents(steps, parameters, literals)
        steps = [s.model_copy(update={"note": note}) for s, note in zip(steps, notes, strict=True)]
        workflow = Workflow(
            id=wid,
            name=name_for(steps, members, literals, cluster),
            description=describe(steps, parameters, literals, members, cluster),
            steps=steps,
            parameters=parameters,
            pitfalls=lessons.pitfalls(limit=self.max_pitfalls, own={t.id for t in members}),
            scope=cluster.scope,
            agent=cluster.agent,
            namespace=cluster.namespace,
            cluster_id=cluster.cluster_id if cluster.kind == "task" else None,
            kind=cluster.kind,
            source_trajectory_ids=sorted(t.id for t in members),
            provenance=Provenance(inducer=self.kind),
        )
        _checked(workflow, notes, literals, tainted)
        return workflow

    def _lessons(self, cluster: ClusterInput) -> ClusterPitfalls:
        """The conditions that tell the cluster's failed runs (and those of tasks nothing
        succeeded at that are served its workflow) from every successful one, its own and those
        of other tasks it is served to (`induction.pitfalls.contrast`; a
        failure that solves the task like another variant is no pitfall; `checked_pitfalls`),
        none that reads as an example's value: worked out once for the cluster. The contrast is
        of whole runs, not of their alignment to one variant's steps; a condition that half of
        a variant's own runs or more meet is not its pitfall (its steps would meet it)."""
        return ClusterPitfalls.of(
            cluster.successes,
            [*cluster.failures, *cluster.homed],
            cluster.example_literals,
            served_to=cluster.served_to,
        )


def repaired(
    steps: Sequence[WorkflowStep], parameters: Mapping[str, str], literals: AbstractSet[str]
) -> tuple[list[WorkflowStep], dict[str, str]]:
    """The steps with every argument that still names an example value (`literals`) made a
    placeholder of the task, named as abstraction names one (`abstract.fresh_name`): a value
    the abstraction kept as written (the same in every run it saw) that another run of the
    cluster names in its task."""
    params = dict(parameters)
    out: list[WorkflowStep] = []
    for step in steps:
        args = dict(step.args)
        for key, value in step.args.items():
            if any(find_literals(t, literals) for t in scalars(value)):
                name = fresh_name(key, step.action, params.keys(), literals)
                args[key], params[name] = "{" + name + "}", "task"
        out.append(step if args == step.args else step.model_copy(update={"args": args}))
    return out, params


def _checked(
    workflow: Workflow, notes: Sequence[str | None], literals: AbstractSet[str], tainted: AbstractSet[str]
) -> None:
    """Refuse a workflow that would carry an example value or instruction-like text (runs
    that obeyed injected text all alike would make it a constant)."""
    text = "\n".join([render_workflow(workflow, description=True), *(n for n in notes if n)])
    leaked = find_literals(text, literals)
    if leaked:
        message = f"workflow {workflow.id} would carry example values: {leaked[:3]}"
        raise InductionRefused(message, reason="example_values")
    injected = find_injection(text) or next((d for d in sorted(tainted) if d in text.lower()), None)
    if injected:
        raise InductionRefused(
            f"workflow {workflow.id} would carry instruction-like text: {injected[:40]!r}",
            reason="injection",
        )


def variants(
    runs: Sequence[Trajectory], *, min_runs: int = 1, overlap_above: float = 2 / 3
) -> list[list[Trajectory]]:
    """Group successful runs by how they solve the task: repeatedly take the medoid of the runs
    left and the runs whose actions overlap it by more than `overlap_above` (Dice over the
    LCS: with the default, a one-step run is not a variant of a two-step one). The first
    group always exists; later ones need `min_runs` distinct tasks.

    A run left alone in its group whose changes (`changes`) are those of a run of an earlier
    group joins that group: it made the same changes in the same order with other look-ups
    (a detour, a retry, one more order looked up), which is no way of its own. A group of
    demonstrations only (`is_demonstration`) whose changes are those of an earlier group's own
    run (an agent's) joins that group too: the demonstrations said what to change, the agent's
    runs show how it finds what to change; one that holds a task an agent's own run of the
    cluster holds joins that run's group first. Measured in docs/induction.md ("Variants")."""
    groups = _medoid_groups(runs, min_runs=min_runs, overlap_above=overlap_above)
    # Agents' own runs first, then groups of demonstrations only, each in the order found.
    ordered = sorted(groups, key=lambda g: all(is_demonstration(t) for t in g))
    kept: list[list[Trajectory]] = []
    homes = _Homes()
    for members in ordered:
        home = homes.of(members)
        if home is not None:
            home.extend(members)
            continue
        kept.append(members)
        homes.add(members)
    order = {id(g): i for i, g in enumerate(groups)}
    return sorted(kept, key=lambda g: order[id(g)])


def _medoid_groups(
    runs: Sequence[Trajectory], *, min_runs: int, overlap_above: float
) -> list[list[Trajectory]]:
    """The groups of `variants` before any joins another, in the order found."""
    left = list(runs)
    groups: list[list[Trajectory]] = []
    while left:
        center = left[medoid([t.actions for t in left])]
        members = [t for t in left if _dice(center.actions, t.actions) > overlap_above or t is center]
        if groups and len({t.task for t in members}) < min_runs:
            break
        groups.append(members)
        taken = {id(t) for t in members}  # by identity: comparing runs field by field costs O(n²)
        left = [t for t in left if id(t) not in taken]
    return groups


class _Homes:
    """The groups `variants` keeps, found by what a later group has in common with them."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, ...], list[Trajectory]] = {}
        """By the changes of any of their runs."""
        self.own: dict[tuple[str, ...], list[Trajectory]] = {}
        """By the changes of an agent's own run."""
        self.by_task: dict[str, list[Trajectory]] = {}
        """By the task of an agent's own run."""

    def of(self, members: list[Trajectory]) -> list[Trajectory] | None:
        """The kept group a new group joins, if any (see `variants`)."""
        home = self.seen.get(changes(members[0].actions)) if len(members) == 1 else None
        if all(is_demonstration(t) for t in members):
            home = (
                next((self.by_task[t.task] for t in members if t.task in self.by_task), None)
                or self.own.get(changes(members[0].actions))
                or home
            )
        return home

    def add(self, members: list[Trajectory]) -> None:
        """Keep a group: later groups may join it."""
        for t in members:
            self.seen.setdefault(changes(t.actions), members)
            if not is_demonstration(t):
                self.own.setdefault(changes(t.actions), members)
                self.by_task.setdefault(t.task, members)


def changes(actions: Sequence[str]) -> tuple[str, ...]:
    """What a run does, as opposed to what it looks up: its state-changing actions
    (`segments.is_read`), each once, in the order first called; a run that changes nothing
    is its look-ups, each once."""
    done = [a for a in actions if not is_read(a)]
    return tuple(dict.fromkeys(done or actions))


def consensus(template: Trajectory, members: Sequence[Trajectory], *, min_support: float = 0.5) -> Trajectory:
    """The template run without the steps that fewer than `min_support` of the members take
    (a retry or detour of the medoid run is not part of the routine)."""
    if len(members) < 3:
        return template
    support = [0] * len(template.steps)
    for run in members:
        for i, _ in lcs_pairs(template.actions, run.actions):
            support[i] += 1
    keep = [s for s, n in zip(template.steps, support, strict=True) if n >= min_support * len(members)]
    return template.model_copy(update={"steps": keep}) if keep else template


def _dice(a: Sequence[str], b: Sequence[str]) -> float:
    return 2 * lcs_len(a, b) / (len(a) + len(b)) if a or b else 1.0
