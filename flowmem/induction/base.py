"""The contracts of induction: what an inducer takes and returns, and the LLM it may call.

`ClusterInput` is one cluster of one agent's runs; an `Inducer` turns it into workflow drafts
(`Induced`); an `LLM` answers a prompt with a pydantic model (`Parsed`; the SDK lives in
`flowmem.providers`, the fake for tests in `flowmem.induction.inducers.testing`). Every call returns
the `Usage` it spent, and an `LLMError` carries the usage spent up to the failure: callers add
the values up, nothing is read back from counters.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from flowmem.induction.literals import LiteralIndex, LiteralSet
from flowmem.models import Trajectory, Workflow, WorkflowStep

__all__ = [
    "LLM",
    "ClusterInput",
    "Induced",
    "Inducer",
    "InductionRefused",
    "LLMError",
    "M",
    "Parsed",
    "Usage",
    "cluster_key",
    "split_outcomes",
    "variant_id",
    "with_agent",
    "workflow_id",
]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class ClusterInput:
    """One cluster of one agent's runs, ready for an inducer."""

    namespace: str
    """The namespace the runs belong to."""
    agent: str
    """The agent whose runs these are."""
    cluster_id: int
    """Stable cluster id."""
    scope: Literal["task", "subtask"]
    """`task` for an orchestrator's plans, `subtask` for a task agent."""
    successes: list[Trajectory]
    """Successful runs."""
    failures: list[Trajectory]
    """Failed runs."""
    literals: LiteralIndex = field(default_factory=LiteralIndex)
    """Argument value counts of the whole namespace (for the de-specification check)."""
    kind: Literal["task", "subroutine"] = "task"
    """`task`: whole runs of one kind of task; `subroutine`: segments of one shape cut from
    many different tasks' runs (`induction/abstract/subroutines.py`); their runs are the segments."""
    name: str | None = None
    """For a sub-routine: its stable key (the id of its first workflow)."""
    served_to: list[Trajectory] = field(default_factory=list)
    """Other clusters' successful runs its workflow would be served to: its pitfalls must not
    hold on them either (`induction.pitfalls.contrast`)."""
    homed: list[Trajectory] = field(default_factory=list)
    """Failed runs of tasks that no run succeeded at, served this cluster's workflow: its
    pitfalls are told from them too (`induction.pitfalls.contrast`)."""

    @property
    def key(self) -> str:
        """The id of the cluster's first workflow (`agent-c<id>`, or a sub-routine's name)."""
        return self.name or workflow_id(self.agent, self.cluster_id)

    @property
    def example_literals(self) -> LiteralSet:
        """Values no workflow of this cluster may contain."""
        return self.literals.example_literals([*self.successes, *self.failures])


@dataclass(frozen=True)
class Usage:
    """What LLM calls spent; `a + b` adds two. The rule inducer spends nothing (`Usage()`)."""

    calls: int = 0
    """Requests to the model (one per `LLM.parse`, whatever the client retried underneath)."""
    retries: int = 0
    """Follow-up prompts after rejected or unusable answers."""
    prompt_tokens: int = 0
    """Prompt tokens the responses reported."""
    completion_tokens: int = 0
    """Completion tokens the responses reported."""
    rejected: dict[str, int] = field(default_factory=dict)
    """Every rejected output, first answers and retries alike, by reason:
    `flowmem.induction.inducers.validate.REASONS` for a workflow, `LLMError.reason` for a whole reply."""
    dropped: tuple[str, ...] = ()
    """Outputs dropped for good (still invalid after their retry, left out by it, or a reply
    still unusable), each described after its cluster key (`emailer-c7 leaky: ...`)."""

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            retries=self.retries + other.retries,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            rejected=dict(Counter(self.rejected) + Counter(other.rejected)),
            dropped=self.dropped + other.dropped,
        )


@dataclass(frozen=True)
class Parsed(Generic[M]):
    """An LLM's answer to one prompt, with what the call spent."""

    output: M
    """The structured answer."""
    usage: Usage
    """One call, with the tokens its response reported."""


@dataclass(frozen=True)
class Induced:
    """What inducing one cluster gave, with what it spent."""

    workflows: list[Workflow]
    """Drafts (version 1); [] when the cluster has no successful run."""
    usage: Usage = field(default_factory=Usage)
    """The LLM usage of every call made for them (none for the rule inducer)."""


class Inducer(Protocol):
    """Turns one cluster into workflow drafts (version 1; merging assigns versions)."""

    kind: str
    """`rule` or `llm`: recorded in each workflow's provenance."""

    def induce(self, cluster: ClusterInput) -> Induced:
        """Induce the cluster's workflows; none when it has no successful run.

        Raises:
            LLMError: if the LLM left the cluster with no valid workflow, or a request failed;
                its `usage` is what the cluster's calls spent. (Any other error fails the
                cluster too, with no usage known.)
        """
        ...


class LLM(Protocol):
    """A chat model that answers a prompt with an instance of a pydantic model."""

    def parse(self, prompt: str, output: type[M]) -> Parsed[M]:
        """Answer `prompt` with structured output of type `output`, and the call's usage.

        Raises:
            LLMError: if the reply is unusable; its `usage` is the call's. (A request that
                fails raises the client's own error.)
        """
        ...


class LLMError(RuntimeError):
    """The model gave no usable answer (a refusal, an empty, truncated or malformed reply).

    `reason` says which: `refusal`, `empty`, `truncated`, `malformed` (not JSON), `schema`
    (JSON off the schema), `rejected` (no valid workflow after the retry), or `unavailable`
    (the request itself failed, e.g. rate limited after the client's retries; the original
    error is its `__cause__`). `usage` is what was spent up to the failure, so a failed
    cluster still reports its calls and tokens.
    """

    def __init__(self, message: str, *, reason: str = "empty", usage: Usage | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.usage = usage if usage is not None else Usage()


class InductionRefused(ValueError):
    """An inducer refused a cluster: what it would produce fails a check.

    `reason` says which, to count refusals by: `example_values` (an example's value would
    reach the workflow), `injection` (instruction-like text from the data would)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def workflow_id(agent: str, cluster_id: int) -> str:
    """The stable id of the workflow induced from a cluster (its cluster key: `agent-c3`)."""
    return re.sub(r"[^A-Za-z0-9_.:-]+", "_", agent) + f"-c{cluster_id}"


def variant_id(key: str, number: int) -> str:
    """The id of a cluster's further workflow: `agent-c3-2` (number 0 is the key itself)."""
    return key if number == 0 else f"{key}-{number}"


_VARIANT = re.compile(r"^(?P<key>.+-(?:c\d+|h[0-9a-f]+))-(?P<number>\d+)$")
"""A variant id: a cluster key (`<agent>-c<n>`, or a sub-routine's `<agent>-s-<goal>-h<hash>`)
and `-<number>`."""


def cluster_key(wid: str, keys: Collection[str] = ()) -> str:
    """The cluster key a workflow id belongs to: itself when it is one of `keys` (the run's
    cluster keys) or no variant id, else the key before its `-<number>` (`agent-c3-2` ->
    `agent-c3`; `agent-s-return_items-h3f9a1c-2` -> `agent-s-return_items-h3f9a1c`). The one
    parser of the format `workflow_id`, `variant_id` and `subroutines.subroutine_key` write."""
    if wid in keys:
        return wid
    found = _VARIANT.match(wid)
    return found["key"] if found else wid


def split_outcomes(runs: Sequence[Trajectory]) -> tuple[list[Trajectory], list[Trajectory]]:
    """(successes, failures); runs with an unknown outcome are in neither."""
    return [t for t in runs if t.success is True], [t for t in runs if t.success is False]


def with_agent(step: WorkflowStep) -> WorkflowStep:
    """A plan step delegated to the agent its literal `agent` argument names."""
    agent = step.args.get("agent")
    if isinstance(agent, str) and "{" not in agent:
        return step.model_copy(update={"agent": agent})
    return step
