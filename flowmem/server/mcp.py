"""The MCP server (`flowmem mcp`): workflow memory as four tools an agent calls over stdio.

`search_workflows` before a task, `get_workflow` for one version, `record_trajectory` after
it, `report_outcome` when its outcome is known. Each tool is a thin call into `Service`, so
the server serves one namespace (`FLOWMEM_NAMESPACE`), like the HTTP API. A failure the
caller can fix (an unknown workflow or run, a rejected trajectory, an argument out of range)
comes back as a tool error (`isError: true`) with the reason; anything else as a generic tool
error, logged to stderr. The server keeps serving either way, and never writes to stdout,
which carries the protocol.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field

from flowmem import __version__
from flowmem.server.payloads import OutcomeSet, SearchHit, WorkflowDetail
from flowmem.server.service import Service
from flowmem.settings import Settings
from flowmem.storage import NotFoundError

__all__ = ["MAX_K", "build_server", "run_stdio"]

logger = logging.getLogger(__name__)

MAX_K = 20
"""Most workflows one search returns."""

INSTRUCTIONS = """\
Workflow memory: reusable step-by-step workflows induced from past runs of agents on similar
tasks. Before a task, call search_workflows with the task and follow the best workflow's
steps, filling its {placeholders} from the task. After the task, call record_trajectory with
what you did (and the workflows you were served, in `workflows_used`); when the outcome is
known later, call report_outcome with the trajectory's id. Recorded runs become new and
better workflows."""

Task = Annotated[str, Field(min_length=1, description="The task in natural language, as the user gave it.")]
K = Annotated[int, Field(ge=1, le=MAX_K, description=f"How many workflows to return (1 to {MAX_K}).")]
Agent = Annotated[
    str | None, Field(description="Only workflows induced from this agent role's runs (default: any).")
]
WorkflowId = Annotated[str, Field(min_length=1, description="The workflow's id (from search_workflows).")]
Version = Annotated[int | None, Field(ge=1, description="The version to return (default: the latest).")]
Record = Annotated[
    dict[str, Any],
    Field(
        description=(
            "One run: {task, steps: [{thought?, action, args, observation?}], success (true, false "
            "or null if not known yet), id?, agent?, final_answer?, feedback?, "
            "workflows_used?: [{id, version}]}. Unknown keys are kept in `meta`."
        )
    ),
]
RunId = Annotated[str, Field(min_length=1, description="The id record_trajectory returned.")]
Success = Annotated[bool, Field(description="Whether the run achieved its task.")]
Feedback = Annotated[
    str | None, Field(description="Why it failed or succeeded: a checker's verdict, a user's comment.")
]


class Found(BaseModel):
    """What `search_workflows` returns."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True, extra="forbid")

    workflows: list[SearchHit]
    """The workflows that fit, best first; empty when none fits yet."""


class Kept(BaseModel):
    """What `record_trajectory` returns."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True, extra="forbid")

    id: str
    """The run's id: report its outcome with it."""
    stored: bool
    """False when a run with that id was already stored (recording is idempotent by id)."""


def build_server(settings: Settings, *, service: Service | None = None) -> MCPServer:
    """The MCP server for `settings.namespace`, its tools bound to `service` (by default a
    new `Service` on the store `settings.db` names)."""
    svc = service if service is not None else Service(settings)

    @asynccontextmanager
    async def warm_up(_: MCPServer) -> AsyncIterator[None]:
        """Load the served workflows while the client connects, so the first search is fast
        (and let the loading finish before the server exits: Python refuses the lazy imports
        of lancedb and sklearn at interpreter shutdown)."""
        thread = threading.Thread(target=_warm_up, args=(svc,), name="flowmem-warm-up")
        thread.start()
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(thread.join)

    server: MCPServer = MCPServer(
        "flowmem",
        title="flowmem workflow memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=warm_up,
    )

    def search_workflows(task: Task, k: K = 3, agent: Agent = None) -> Found:
        """Find the stored workflows that fit a task, best first.

        Call it before you start a task. Each workflow has an `id`, a `version`, a `name`, a
        `description`, `steps` (each an `action` with `args`, where `{placeholders}` stand for
        values to take from your task), `parameters` (what each placeholder means),
        `pitfalls`, a `score` (higher fits better) and `text` (the workflow as prompt text).
        An empty list means no workflow fits yet: solve the task on your own.
        """
        return Found(workflows=svc.search(task, k, agent=agent))

    def get_workflow(workflow_id: WorkflowId, version: Version = None) -> WorkflowDetail:
        """One workflow by id: its latest version (or the one asked for), with its steps,
        parameters, pitfalls and usage stats, and `versions`: every version with its status.

        Fails if this memory has no such workflow or version.
        """
        try:
            return svc.get_workflow(workflow_id, version)
        except NotFoundError as exc:
            raise ToolError(str(exc)) from exc

    def record_trajectory(trajectory: Record) -> Kept:
        """Store one finished (or failed) run of yours on a task, so workflows can be
        learned from it.

        Returns `{id, stored}`: keep the id to report the outcome later; `stored` is false
        when a run with that id was already stored (recording is idempotent by id). Without
        an `id`, one is derived from the content. Fails with the reason if the run is not a
        valid trajectory (e.g. a step without an `action`) or names another namespace.
        """
        result = svc.record([trajectory], origin="mcp")
        if result.rejected:
            raise ToolError(f"trajectory rejected: {result.rejected[0].reason}")
        return Kept(id=result.ids[0], stored=result.stored == 1)

    def report_outcome(run_id: RunId, success: Success, feedback: Feedback = None) -> OutcomeSet:
        """Set the outcome of a run recorded earlier, once it is known (e.g. a user's verdict).

        Outcomes rank the workflows that were served to the run up or down. Fails if this
        memory has no run with that id.
        """
        try:
            return svc.report_outcome(run_id, success=success, feedback=feedback)
        except NotFoundError as exc:
            raise ToolError(str(exc)) from exc

    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
    tools: list[tuple[Callable[..., BaseModel], ToolAnnotations]] = [
        (search_workflows, reads),
        (get_workflow, reads),
        (record_trajectory, writes),
        (report_outcome, writes),
    ]
    for tool, hints in tools:  # the docstring, dedented, is what the agent reads
        server.add_tool(tool, description=inspect.cleandoc(tool.__doc__ or ""), annotations=hints)
    return server


def run_stdio(settings: Settings) -> None:
    """Serve the tools over stdin/stdout until the client closes stdin."""
    build_server(settings).run("stdio")


def _warm_up(service: Service) -> None:
    try:
        service.search("warm up", k=1)
    except Exception:  # the first tool call meets the same error and reports it
        logger.warning("could not load the served workflows", exc_info=True)
