"""The domain model: trajectories agents log, workflows induced from them, induction runs.

Pure pydantic. No storage or SDK types appear here; `flowmem.storage` maps these models to
LanceDB rows and `flowmem.interchange` maps them to the JSONL interchange format.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    model_serializer,
    model_validator,
)

from flowmem.docstrings import attribute_descriptions

__all__ = [
    "DEMONSTRATION",
    "as_demonstration",
    "is_demonstration",
    "RUN_STATE_VERSION",
    "PROCEDURE",
    "NAMESPACE_PATTERN",
    "Condition",
    "Pitfall",
    "Repeat",
    "InductionRun",
    "Fit",
    "FrozenMemberships",
    "PriorOutcome",
    "Provenance",
    "Retirement",
    "RunState",
    "Step",
    "Trajectory",
    "UsageStats",
    "Workflow",
    "WorkflowRef",
    "WorkflowStep",
    "now",
    "placeholders_in",
]

NAMESPACE_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
"""Namespaces name tables and tags, so they are restricted to these characters."""

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""A `{name}` placeholder inside an abstract workflow argument."""


def now() -> datetime:
    """The current time, timezone-aware UTC (every timestamp in flowmem is)."""
    return datetime.now(UTC)


def placeholders_in(value: Any) -> list[str]:
    """Placeholder names in a (possibly nested) value, in order of first appearance."""
    found: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            for name in PLACEHOLDER.findall(v):
                if name not in found:
                    found.append(name)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item)

    walk(value)
    return found


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=attribute_descriptions)


class Step(_Frozen):
    """One action an agent took, with what it saw."""

    action: str = Field(min_length=1)
    """Tool or action name, e.g. `email.search_emails`."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The arguments the action was called with."""
    thought: str | None = None
    """The agent's reasoning before the action, when it logged one."""
    observation: str | None = None
    """What the action returned, as text."""
    error: str | None = None
    """The error the action raised, if it failed."""
    started_at: datetime | None = None
    """When the action started."""
    duration_ms: float | None = None
    """How long the action took."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Anything else logged with the step (unknown interchange keys land here)."""


class WorkflowRef(_Frozen):
    """A reference to one version of a workflow, as served to a run."""

    id: str
    """The workflow's stable id."""
    version: int = Field(ge=1)
    """The version that was served."""


class PriorOutcome(_Frozen):
    """What a run's outcome was before it was set again (`Store.set_outcome`): all an outcome's
    report needs to move the stats of the versions it was served, without its steps."""

    success: bool | None
    """The outcome it had (None: unknown)."""
    workflows_used: list[WorkflowRef]
    """The workflow versions it was served."""


class Trajectory(_Frozen):
    """One run of an agent on one task: the steps and the outcome."""

    id: str = Field(min_length=1)
    """Unique id within the namespace; storing the same id twice stores it once."""
    task: str = Field(min_length=1)
    """The natural-language task the agent was given."""
    agent: str = "agent"
    """The role that ran it (LEGOMem: the orchestrator or a task agent)."""
    parent_id: str | None = None
    """For a subtask run: the orchestrator's trajectory id."""
    namespace: str = Field("default", pattern=NAMESPACE_PATTERN)
    """Tenant or project; induction never mixes two namespaces."""
    steps: list[Step] = Field(default_factory=list)
    """The actions, in order."""
    success: bool | None = Field(None, strict=True)
    """The outcome: True, False, or None when unknown (yet); "yes" or 1 is not accepted."""
    score: float | None = None
    """An optional graded outcome."""
    final_answer: str | None = None
    """What the agent answered at the end."""
    feedback: str | None = None
    """Feedback on the outcome (a checker's verdict, a user's comment, an error)."""
    workflows_used: list[WorkflowRef] = Field(default_factory=list)
    """The workflow versions that were served to this run."""
    source: str | None = None
    """Where the trajectory came from (a benchmark run, `hook`, `demo`, ...)."""
    group: str | None = None
    """A known task family or template, when there is one (used for evaluation only)."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Everything else; unknown interchange keys are kept here."""
    created_at: datetime = Field(default_factory=now)
    """When the trajectory was recorded or ingested."""

    @property
    def actions(self) -> list[str]:
        """The action names, in order."""
        return [s.action for s in self.steps]

    def content_hash(self) -> str:
        """SHA-256 of what the run did: its canonical JSON without the fields set at or after
        ingest — `created_at` (defaulted when a record has none), `success` and `feedback`
        (`report_outcome` sets them later) and the `demonstration` mark (`ingest --from`).

        The same id sent again with another hash is another run under a taken id.
        """
        content = self.model_dump(mode="json", exclude={"created_at", "success", "feedback"})
        content["meta"].pop(DEMONSTRATION, None)
        blob = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


class Repeat(_Frozen):
    """A loop: the steps that carry it are done once per item of a collection, in order
    (consecutive steps with an equal `Repeat` are one loop's body)."""

    over: str = Field(min_length=1)
    """The placeholder that takes each item in turn (`reservation_id`)."""
    source: str = "task"
    """Where the items come from: `task`, or `result of <action>` (an earlier step's result)."""

    def says(self) -> str:
        """The loop's head as a person writes it: `for each {reservation_id} from get_user_details`."""
        origin = "the task" if self.source == "task" else self.source.removeprefix("result of ")
        return f"for each {{{self.over}}} from {origin}"


ConditionKind = Literal["does", "skips", "before", "fails", "after_failed", "missing_arg", "unseen_arg"]
"""What a `Condition` checks; `action` is X, `other` Y, `arg` an argument name of X:

- `does`: the run calls X (at least `times` times), holding at that call;
- `skips`: the run calls Y without having called X (at that call of Y), or, without Y, ends
  without having called X (holding when it ends);
- `before`: the run calls X before its first call of Y (holding at that call of Y);
- `fails`: a call of X fails (returns an error);
- `after_failed`: the run calls X after its latest call of Y failed (X may be Y: a retry);
- `missing_arg`: the run calls X without the argument `arg`;
- `unseen_arg`: the run calls X with an `arg` value that neither the task nor an earlier
  step's result shows (with Y: no earlier result of Y shows): a value made up or taken from
  the wrong result."""

_NEEDS_OTHER = frozenset({"before", "after_failed"})
_NEEDS_ARG = frozenset({"missing_arg", "unseen_arg"})


class Condition(_Frozen):
    """A pattern over a run's steps that can be checked as the steps arrive, one at a time
    (`induction.pitfalls.conditions.Watch`); a pitfall's condition is what the failed runs did."""

    kind: ConditionKind
    """What it checks (see `ConditionKind`)."""
    action: str = Field(min_length=1)
    """X: the action it is about."""
    other: str | None = None
    """Y: the second action, for `before`, `after_failed`, `skips` (the call it skips X
    ahead of; none: the run's end) and `unseen_arg` (the action whose results count)."""
    arg: str | None = None
    """The argument of X, for `missing_arg` and `unseen_arg`."""
    times: int = Field(1, ge=1)
    """For `does`: how many calls of X make it hold."""
    within: tuple[str, ...] | None = None
    """The actions of the kind of task it was learnt on: a run that has called any other
    action is doing something else, and the condition no longer holds for it (None: any
    run)."""

    @model_validator(mode="after")
    def _check_parts(self) -> Condition:
        if self.kind in _NEEDS_OTHER and self.other is None:
            raise ValueError(f"a {self.kind} condition needs `other`")
        if self.kind in ("skips", "before") and self.other == self.action:
            raise ValueError(f"a {self.kind} condition needs two different actions")
        if self.kind in _NEEDS_ARG and not self.arg:
            raise ValueError(f"a {self.kind} condition needs `arg`")
        if self.kind in ("does", "fails", "missing_arg") and self.other is not None:
            raise ValueError(f"a {self.kind} condition takes no `other`")
        if self.kind not in _NEEDS_ARG and self.arg is not None:
            raise ValueError(f"a {self.kind} condition takes no `arg`")
        if self.kind != "does" and self.times != 1:
            raise ValueError("only a `does` condition counts calls")
        return self

    def says(self) -> str:
        """The condition as a pitfall states it: actions and arguments, never values, and not
        the words "before", "after", "first", "last" (values of time slots and list positions,
        which a cluster's example-value check would refuse)."""
        x, y = self.action, self.other
        if self.kind == "does":
            return f"called {x}" + (
                "" if self.times == 1 else " again" if self.times == 2 else f" {self.times} times"
            )
        if self.kind == "skips":
            return f"called {y} without calling {x}" if y else f"ended without calling {x}"
        if self.kind == "before":
            return f"called {x} ahead of {y}"
        if self.kind == "fails":
            return f"{x} failed"
        if self.kind == "after_failed":
            return f"retried {x} once it had failed" if x == y else f"called {x} once {y} had failed"
        if self.kind == "missing_arg":
            return f"called {x} without argument {self.arg}"
        return f"called {x} with argument {self.arg} not seen " + (f"in {y}'s results" if y else "earlier")


class Pitfall(_Frozen):
    """A mistake learnt from failed runs: its text and, when it can be checked, the condition
    over a run's steps that the failed runs met. A pitfall without a condition (written by
    hand, by an LLM, or stored before conditions existed) is stored and hashed as its text
    alone, and a plain string is read as one."""

    text: str = Field(min_length=1)
    """What an agent is told: `Pitfall: {text}`."""
    condition: Condition | None = None
    """What the failed runs did, checkable on a run's steps; None: text only."""

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        return {"text": value} if isinstance(value, str) else value

    @model_serializer(mode="wrap")
    def _as_text(self, handler: SerializerFunctionWrapHandler) -> Any:
        if isinstance(self, str):  # put in unvalidated (`model_copy(update=...)`): a text
            return self
        return self.text if self.condition is None else handler(self)

    def __str__(self) -> str:
        return self.text


class WorkflowStep(_Frozen):
    """One abstract step of a workflow; argument values may hold `{placeholders}`."""

    action: str = Field(min_length=1)
    """The tool or action to call (for a task-scope plan: the subtask to delegate)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Arguments; example-specific values appear only as `{placeholder}`."""
    note: str | None = None
    """Why or how to take this step."""
    agent: str | None = None
    """For a task-scope workflow (a plan): the agent that carries out this step."""
    choices: dict[str, list[str]] = Field(default_factory=dict)
    """Placeholder -> the few common values it took in the source runs (a categorical
    argument: a cabin class, a status), rendered `{cabin: business|economy}`."""
    subroutine: str | None = None
    """In a task-level workflow: the id of the sub-routine workflow this step is part of
    (composition, `induction.abstract.subroutines.compose_workflows`); a prompt that shows the
    sub-routine too refers to it by name instead of repeating its steps."""
    repeat: Repeat | None = None
    """Set on each step of a loop's body: the steps are done once per item (`Repeat`); a
    run that repeats the body n times follows this one step (or body) n times."""


class UsageStats(_Frozen):
    """How a workflow version fared when it was served."""

    served: int = 0
    """Runs it was served to."""
    successes: int = 0
    """Of those, runs that succeeded."""
    failures: int = 0
    """Of those, runs that failed."""


DEMONSTRATION = "demonstration"
"""The `Trajectory.meta` key that marks a run as a curated demonstration (ingested with
`flowmem induce --from`): a workflow induced from demonstrations alone is `offline`."""


def is_demonstration(run: Trajectory) -> bool:
    """Whether a run is a curated demonstration (`DEMONSTRATION`), not an agent's own."""
    return run.meta.get(DEMONSTRATION) is True


def as_demonstration(run: Trajectory) -> Trajectory:
    """The run marked as a curated demonstration, as `flowmem induce --from` stores it."""
    return run.model_copy(update={"meta": {**run.meta, DEMONSTRATION: True}})


PROCEDURE = "add_workflow"
"""The `Trajectory.source` of a procedure written by hand (`add_workflow`): its outcome is
stated, not observed, so its failure is a lesson on its own (`induction.pitfalls.failures`)."""


class Provenance(_Frozen):
    """How a workflow version was made."""

    inducer: str = "manual"
    """`rule`, `llm` or `manual`."""
    model: str | None = None
    """The LLM that abstracted it, if any."""
    prompt_hash: str | None = None
    """Hash of the prompt template used, if any."""
    mode: Literal["online", "offline"] = "online"
    """Online (from the agents' own runs) or offline (from demonstrations)."""
    run_id: str | None = None
    """The induction run that created this version."""


class Workflow(_Frozen):
    """One version of a reusable, abstract sub-routine induced from trajectories."""

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    """Stable id across versions."""
    version: int = Field(1, ge=1)
    """1, 2, ...; a version is never overwritten."""
    parent_version: int | None = None
    """The version this one revises (None for version 1)."""
    name: str = Field(min_length=1)
    """A short name, e.g. `forward_latest_email`."""
    description: str = ""
    """When to use it."""
    steps: list[WorkflowStep] = Field(min_length=1)
    """Abstract, reusable steps; example-specific values appear only as {placeholders}."""
    parameters: dict[str, str] = Field(default_factory=dict)
    """Placeholder name -> what value to put there."""
    pitfalls: list[Pitfall] = Field(default_factory=list)
    """Mistakes learned from failed runs (a plain string is read as a pitfall without a
    condition)."""
    scope: Literal["task", "subtask"] = "subtask"
    """`task`: a full-task memory for an orchestrator; `subtask`: for a task agent."""
    kind: Literal["task", "subroutine"] = "task"
    """`task`: induced from a cluster of whole runs of one kind of task; `subroutine`: a few
    steps with one goal that recur across many different tasks."""
    agent: str = "agent"
    """The agent role this workflow is for."""
    namespace: str = Field("default", pattern=NAMESPACE_PATTERN)
    """Tenant or project."""
    status: Literal["candidate", "active", "deprecated", "retired"] = "candidate"
    """Lifecycle: candidates are on trial, active ones are served, deprecated ones (worse or
    failing) and retired ones (their cluster gone or induced without them) are not."""
    cluster_id: int | None = None
    """The trajectory cluster it was induced from."""
    source_trajectory_ids: list[str] = Field(default_factory=list)
    """The trajectories it was induced from."""
    stats: UsageStats = Field(default_factory=UsageStats)
    """Usage statistics of this version."""
    provenance: Provenance = Field(default_factory=Provenance)
    """How this version was made."""
    created_at: datetime = Field(default_factory=now)
    """When this version was created."""

    @model_validator(mode="after")
    def _check_version_chain(self) -> Workflow:
        if self.parent_version is not None and self.parent_version >= self.version:
            raise ValueError("parent_version must be lower than version")
        return self

    @property
    def placeholders(self) -> list[str]:
        """Placeholder names used in the steps, in order of first appearance."""
        return placeholders_in([s.args for s in self.steps])

    @property
    def actions(self) -> list[str]:
        """The action names of the steps, in order."""
        return [s.action for s in self.steps]

    @property
    def pattern(self) -> list[str | tuple[str, ...]]:
        """The action names with each loop as the tuple of its body's actions: what a run
        following the workflow does, a loop's body done once or more (`align.pattern_pairs`)."""
        out: list[str | tuple[str, ...]] = []
        for i, s in enumerate(self.steps):
            if s.repeat is None:
                out.append(s.action)
            elif i > 0 and self.steps[i - 1].repeat == s.repeat and isinstance(out[-1], tuple):
                out[-1] = (*out[-1], s.action)
            else:
                out.append((s.action,))
        return out

    @property
    def composed_actions(self) -> list[str]:
        """The action names, a run of steps that is one sub-routine counted as one step
        (`subroutine:<id>`): how `redundancy` counts a workflow composed of sub-routines."""
        out: list[str] = []
        for i, s in enumerate(self.steps):
            if s.subroutine is None:
                out.append(s.action)
            elif i == 0 or self.steps[i - 1].subroutine != s.subroutine:
                out.append(f"subroutine:{s.subroutine}")
        return out

    def content_hash(self) -> str:
        """Hash of what an agent is served (not ids, versions, stats or provenance).

        Two versions with the same hash say the same thing, so re-inducing one creates nothing.
        """
        content = self.model_dump(
            mode="json",
            include={"name", "description", "steps", "parameters", "pitfalls", "scope", "agent"},
        )
        for step in content["steps"]:  # a version without these hashes as before they existed
            if not step["choices"]:
                del step["choices"]
            if step["subroutine"] is None:
                del step["subroutine"]
            if step["repeat"] is None:
                del step["repeat"]
        blob = json.dumps(content, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


RUN_STATE_VERSION: Literal[1] = 1
"""The version of `RunState` this flowmem writes (stored in it as `version`)."""

FrozenMemberships = dict[str, dict[int, frozenset[str]]]
"""Agent -> stable cluster id -> the task keys (`induction.plan.orchestrate.task_key`) in it."""


class Fit(_Frozen):
    """What a run keeps of the fit its clusters come from, for the next run to judge new
    tasks against (a refit makes a new one; placing tasks keeps it)."""

    trajectories: int
    """Trajectories in the namespace when the clusters were fitted."""
    texts: int
    """Distinct task texts the fit clustered (noise included)."""
    agents: tuple[str, ...]
    """The agents it clustered, sorted."""
    settings: str
    """The clustering settings it used (`jobs.incremental.settings_signature`)."""


class Retirement(NamedTuple):
    """A version a run retired, with the status a rollback of the run gives it back."""

    workflow_id: str
    version: int
    old: Literal["candidate", "active", "deprecated", "retired"]


class RunState(_Frozen):
    """What an induction run leaves for the next one of its namespace: every field the next
    run reads. Stored as JSON through `to_stored` / `from_stored` (the one codec), which also
    reads the untyped dict runs kept before this model (schema version 3 and earlier)."""

    version: int = RUN_STATE_VERSION
    """The version of this model the state was written with."""
    fingerprints: dict[str, str] = Field(default_factory=dict)
    """Cluster key -> a hash of its runs when it was last induced successfully (a cluster
    that failed or has none is induced again)."""
    sizes: dict[str, tuple[int, int]] = Field(default_factory=dict)
    """Cluster key -> its (successes, failures) when it was last induced."""
    failed: tuple[str, ...] = ()
    """The clusters whose induction failed (induced again by the next run)."""
    clusters: FrozenMemberships | None = None
    """The memberships the last fit made (None: the run kept none)."""
    placed: FrozenMemberships | None = None
    """The task keys placed in the fitted clusters since (and noise texts no fit clustered);
    None: the run kept none."""
    fit: Fit | None = None
    """The fit the clusters come from (None: the run kept none, so the next one refits)."""
    refit: str | None = None
    """Why the run fitted the clusters again (None: it placed the new tasks)."""
    subroutines: tuple[str, ...] = ()
    """The sub-routines' cluster keys, sorted (cut at a fit, kept until the next one)."""
    retired: tuple[Retirement, ...] = ()
    """The versions the run retired, so a rollback of it serves them again."""

    @field_serializer("clusters", "placed")
    def _sorted(self, value: FrozenMemberships | None) -> dict[str, dict[int, list[str]]] | None:
        if value is None:
            return None
        return {
            agent: {cid: sorted(keys) for cid, keys in sorted(ids.items())} for agent, ids in value.items()
        }

    def to_stored(self) -> str:
        """The JSON text a run row keeps (`from_stored` reads it back)."""
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_stored(cls, raw: str | Mapping[str, Any] | None) -> RunState:
        """The state a run row keeps: JSON text or its parsed form, typed (`version`) or the
        untyped dict of schema version 3 and earlier, whose absent keys take their defaults."""
        data = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
        if "version" not in data:
            return cls.model_validate(_untyped(data))
        if data["version"] > RUN_STATE_VERSION:
            raise ValueError(f"run state version {data['version']} is newer than {RUN_STATE_VERSION}")
        return cls.model_validate(data)


_UNTYPED_KEYS = (
    "fingerprints",
    "sizes",
    "failed",
    "clusters",
    "placed",
    "fit",
    "refit",
    "subroutines",
    "retired",
)


def _untyped(data: Mapping[str, Any]) -> dict[str, Any]:
    """A `RunState`'s fields from the dict runs kept before it was typed. A run that kept no
    memberships (not a dict) or no sizes kept no usable fit either: its next run refits."""
    out = {key: data[key] for key in _UNTYPED_KEYS if key in data}
    for key in ("clusters", "placed", "fit"):
        if not isinstance(out.get(key), dict):
            out.pop(key, None)
    if "sizes" not in data:
        out.pop("fit", None)
    return out


class InductionRun(_Frozen):
    """One induction run (or a rollback), committed to the store as a tagged version."""

    id: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    """Run id; also the tag of the workflows table version the run committed."""
    namespace: str = Field("default", pattern=NAMESPACE_PATTERN)
    """The namespace the run induced."""
    kind: Literal["induce", "rollback", "manual"] = "induce"
    """What the run did."""
    started_at: datetime = Field(default_factory=now)
    """When it started."""
    finished_at: datetime | None = None
    """When it committed."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Figures such as trajectories, clusters_changed, versions_created."""
    tag: str | None = None
    """The store tag it committed (the workflows table version it produced)."""
    table_version: int | None = None
    """The workflows table version the run produced."""
    base_version: int | None = None
    """The workflows table version before the run (what a rollback restores)."""
    rolled_back_run: str | None = None
    """For a rollback: the run it undid."""
    note: str | None = None
    """Free text, e.g. why a rollback was made."""
    state: RunState = Field(default_factory=lambda: RunState())
    """What the next run starts from (`RunState`)."""
