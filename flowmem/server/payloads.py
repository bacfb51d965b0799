"""The typed results of the API and the MCP server: a workflow version, a search hit, a
version's history, a status change, an induction run, a recorded batch. Each is a frozen model
the route declares as its `response_model` (its OpenAPI schema), the MCP tool returns, and
`flowmem search --json` prints (`model_dump(mode="json")`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, computed_field

from flowmem.induction.render.diff import WorkflowDiff
from flowmem.induction.render.render import render_workflow
from flowmem.jobs.induce import RunSummary
from flowmem.jobs.status import Verb
from flowmem.models import InductionRun, Provenance, Repeat, UsageStats, Workflow, WorkflowStep
from flowmem.policy.lifecycle import Cause, Status, Transition
from flowmem.retrieval.search import Hit
from flowmem.storage import LoggedTransition

__all__ = [
    "Conflict",
    "DiffOut",
    "Health",
    "History",
    "InducedRun",
    "LoggedTransitionOut",
    "OutcomeSet",
    "Recorded",
    "RejectedRecord",
    "RunOut",
    "SearchHit",
    "StatusChanged",
    "StepOut",
    "TransitionOut",
    "VersionOut",
    "VersionRef",
    "WorkflowDetail",
    "WorkflowOut",
]

IsoTime = Annotated[datetime, PlainSerializer(lambda d: d.isoformat(), return_type=str, when_used="json")]
"""A time as `datetime.isoformat()` writes it (`+00:00`, not pydantic's `Z`), as the API
always wrote it."""


def _none(value: object) -> bool:
    return value is None


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True, extra="forbid")


class StepOut(WorkflowStep):
    """A workflow step as the API shows it: its optional fields left out when unset."""

    note: str | None = Field(None, exclude_if=_none)
    """Why or how to take this step."""
    agent: str | None = Field(None, exclude_if=_none)
    """For a task-scope workflow (a plan): the agent that carries out this step."""
    subroutine: str | None = Field(None, exclude_if=_none)
    """The id of the sub-routine workflow this step is part of."""
    repeat: Repeat | None = Field(None, exclude_if=_none)
    """Set on each step of a loop's body: the steps are done once per item."""


class WorkflowOut(_Out):
    """A workflow version: what an agent needs to follow it, and its state."""

    id: str
    """Stable id across versions."""
    version: int
    """1, 2, ..."""
    name: str
    """A short name."""
    description: str
    """When to use it."""
    status: Status
    """candidate, active, deprecated or retired."""
    scope: Literal["task", "subtask"]
    """`task`: a full-task memory for an orchestrator; `subtask`: for a task agent."""
    kind: Literal["task", "subroutine"]
    """`task`: induced from whole runs of one kind of task; `subroutine`: steps that recur across tasks."""
    agent: str
    """The agent role it is for."""
    steps: list[StepOut]
    """Abstract steps; example-specific values appear only as {placeholders}."""
    parameters: dict[str, str]
    """Placeholder name -> what value to put there."""
    pitfalls: list[str]
    """Mistakes learned from failed runs."""
    stats: UsageStats
    """Usage statistics of this version."""
    parent_version: int | None
    """The version this one revises (None for version 1)."""
    created_at: IsoTime
    """When this version was created."""

    @staticmethod
    def of(w: Workflow) -> WorkflowOut:
        """The API's view of a version (built from a valid `Workflow`: not validated again)."""
        return WorkflowOut.model_construct(
            id=w.id,
            version=w.version,
            name=w.name,
            description=w.description,
            status=w.status,
            scope=w.scope,
            kind=w.kind,
            agent=w.agent,
            steps=[StepOut.model_construct(**dict(s)) for s in w.steps],
            parameters=w.parameters,
            pitfalls=[p.text for p in w.pitfalls],
            stats=w.stats,
            parent_version=w.parent_version,
            created_at=w.created_at,
        )


class SearchHit(WorkflowOut):
    """A search result: the served version, its score and its prompt text."""

    score: float
    """similarity × rank factor (higher fits better)."""
    similarity: float
    """Cosine similarity of the task and the workflow's nearest source task."""
    text: str
    """The workflow as prompt text."""

    @classmethod
    def of_hit(cls, h: Hit) -> SearchHit:
        """The hit's view, scores rounded to 4 places."""
        return cls.model_construct(
            **dict(WorkflowOut.of(h.workflow)),
            score=round(h.score, 4),
            similarity=round(h.similarity, 4),
            text=render_workflow(h.workflow, description=True),
        )


class VersionRef(_Out):
    """One version in the list of a workflow's versions."""

    version: int
    """The version."""
    status: Status
    """Its status."""
    created_at: IsoTime
    """When it was created."""


class WorkflowDetail(WorkflowOut):
    """One version of a workflow and the list of all its versions."""

    versions: list[VersionRef]
    """Every version, oldest first."""

    @classmethod
    def of_history(cls, chosen: Workflow, history: list[Workflow]) -> WorkflowDetail:
        """The version chosen, with every version of its history."""
        versions = [VersionRef(version=w.version, status=w.status, created_at=w.created_at) for w in history]
        return cls.model_construct(**dict(WorkflowOut.of(chosen)), versions=versions)


class VersionOut(WorkflowOut):
    """A version in a workflow's history: where it came from and its cluster."""

    provenance: Provenance
    """How this version was made."""
    cluster_id: int | None
    """The trajectory cluster it was induced from."""
    source_trajectories: int
    """How many trajectories it was induced from."""
    content_hash: str
    """Hash of what it serves (`Workflow.content_hash`)."""

    @classmethod
    def of_version(cls, w: Workflow) -> VersionOut:
        """A version with its provenance."""
        return cls.model_construct(
            **dict(WorkflowOut.of(w)),
            provenance=w.provenance,
            cluster_id=w.cluster_id,
            source_trajectories=len(w.source_trajectory_ids),
            content_hash=w.content_hash(),
        )


class TransitionOut(_Out):
    """A status change of one version."""

    version: int
    """The version whose status changed."""
    old: Status
    """Its status before."""
    new: Status
    """Its status after."""
    cause: Cause
    """Why, as a value code can branch on."""
    reason: str
    """Why, for people, with the figures."""

    @classmethod
    def of(cls, t: Transition) -> TransitionOut:
        """A change just made."""
        return cls(version=t.version, old=t.old, new=t.new, cause=t.cause, reason=t.reason)


class LoggedTransitionOut(TransitionOut):
    """A status change read from the lifecycle log."""

    at: IsoTime
    """When it was logged."""

    @classmethod
    def of_logged(cls, t: LoggedTransition) -> LoggedTransitionOut:
        """A row of the lifecycle log."""
        return cls(version=t.version, old=t.old, new=t.new, cause=t.cause, reason=t.reason, at=t.at)


class History(_Out):
    """Every version of a workflow and every status transition it went through."""

    id: str
    """The workflow."""
    versions: list[VersionOut]
    """Its versions, oldest first."""
    transitions: list[LoggedTransitionOut]
    """Its status changes, oldest first."""


class DiffOut(WorkflowDiff):
    """A step-level diff between two versions, and whether they serve the same content."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def unchanged(self) -> bool:
        """True when the two versions serve the same content (`WorkflowDiff.unchanged`)."""
        return super().unchanged

    @classmethod
    def of(cls, d: WorkflowDiff) -> DiffOut:
        """The diff, with `unchanged` in its JSON."""
        return cls.model_construct(**dict(d))


class StatusChanged(_Out):
    """A manual status change and the transitions it made (none: it had that status)."""

    id: str
    """The workflow."""
    action: Verb
    """promote, deprecate or retire."""
    transitions: list[TransitionOut]
    """The transitions made, logged with who and why."""


class RunOut(_Out):
    """An induction run or rollback with its full id (what a rollback takes), its tag and
    counts, and the workflows it retired. Its internal state (cluster fingerprints and
    memberships) is left out."""

    id: str
    """Run id; also the store tag."""
    namespace: str
    """The namespace the run induced."""
    kind: Literal["induce", "rollback", "manual"]
    """What the run did."""
    started_at: datetime
    """When it started."""
    finished_at: datetime | None
    """When it committed."""
    counts: dict[str, int]
    """Figures such as trajectories, clusters_changed, versions_created."""
    tag: str | None
    """The store tag it committed."""
    table_version: int | None
    """The workflows table version the run produced."""
    base_version: int | None
    """The workflows table version before the run (what a rollback restores)."""
    rolled_back_run: str | None
    """For a rollback: the run it undid."""
    note: str | None
    """Free text, e.g. why a rollback was made."""
    retired: list[str]
    """The workflows the run retired (sorted)."""

    @classmethod
    def of(cls, r: InductionRun) -> RunOut:
        """The API's view of a run."""
        return cls(
            **dict(r.model_dump(exclude={"state"})),
            retired=sorted({str(wid) for wid, _, _ in r.state.retired}),
        )


class InducedRun(RunSummary):
    """An induction run started through the API: its figures and the inducer it used."""

    inducer: Literal["rule", "llm"]
    """The inducer used."""


class RejectedRecord(_Out):
    """A record of a batch that was not stored."""

    index: int
    """Its position in the request (0-based)."""
    reason: str
    """Why it was rejected."""


class Conflict(_Out):
    """A valid record whose id is stored with other content: not stored."""

    index: int
    """Its position in the request (0-based)."""
    id: str
    """The trajectory id."""
    stored_hash: str
    """The content hash of the stored trajectory."""
    sent_hash: str
    """The content hash of the one sent."""


class Recorded(_Out):
    """What a batch of trajectories did: stored, already stored, rejected, in conflict."""

    received: int
    """Records in the request."""
    stored: int
    """Newly stored."""
    duplicates: int
    """Valid, and already stored with the same content."""
    rejected: list[RejectedRecord]
    """Invalid records, each with its reason (also written to the quarantine file)."""
    conflicts: list[Conflict]
    """Valid records whose id is stored with other content."""
    ids: list[str]
    """The ids of the valid records, in request order."""

    @property
    def all_rejected(self) -> bool:
        """Whether the request had records and none was valid (the API answers 422)."""
        return self.received > 0 and not self.ids


class OutcomeSet(_Out):
    """A run's outcome, as stored."""

    id: str
    """The run."""
    success: bool
    """Whether it reached its goal."""


class Health(_Out):
    """Liveness, version and the namespace served."""

    status: Literal["ok"]
    """Always `ok` when the server answers."""
    version: str
    """flowmem's version."""
    namespace: str
    """The namespace this server serves."""
