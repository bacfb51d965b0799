"""OpenAI Agents SDK integration: record a `Runner.run` as a flowmem run; serve workflows.

`FlowmemHooks` is a `RunHooks` that records each tool call as a step (tool name, parsed
arguments, result or error), each handoff as a `handoff` step, and the final output as the
outcome. `with_memory(agent, memory)` clones an agent so its instructions end with the
workflows that fit the task (`memory.context`).

Example:
    agent = with_memory(Agent(name="mail", instructions="You handle email.", tools=[...]), memory)
    with FlowmemHooks(memory, task) as hooks:  # one trajectory; an exception stores a failure
        result = await Runner.run(agent, task, hooks=hooks)
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from types import TracebackType
from typing import Any, TypeVar

from agents import Agent, RunContextWrapper, RunHooks, Tool, default_tool_error_function
from agents.items import TResponseInputItem
from agents.run_config import ToolErrorFormatterArgs
from agents.run_context import AgentHookContext
from agents.tool_context import ToolContext

from flowmem.agents.memory import WorkflowMemory
from flowmem.agents.recording import Run, current_run

__all__ = ["FlowmemHooks", "with_memory"]

TContext = TypeVar("TContext")


def _parse_arguments(raw: str) -> dict[str, Any]:
    """A tool call's JSON arguments as a dict (non-objects under `value`, bad JSON under `raw`)."""
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"raw": raw}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _task_from(items: list[TResponseInputItem]) -> str | None:
    """The text of the first user message of a turn's input."""
    for item in items:
        if not isinstance(item, dict) or item.get("role") != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
            return "\n".join(texts) or None
    return None


def _default_error(context: RunContextWrapper[Any]) -> str:
    """The fixed message the SDK returns to the model when a function tool raises."""
    return default_tool_error_function(context, RuntimeError())


class FlowmemHooks(RunHooks[Any]):
    """Records one `Runner.run` as one flowmem run of `task`.

    Use it as a `with` block around `Runner.run`: the run is then the current run (so
    `with_memory` notes the workflows it serves on it), and an exception — a tool error the
    SDK re-raises, `MaxTurnsExceeded`, a guardrail tripwire — stores the run as failed. Passed
    without `with`, the hooks open the run when the first agent starts and store it when the
    final output arrives; a run that raises is then not stored.

    The SDK hands the model a fixed message when a tool raises; to record the exception
    itself, also pass `RunConfig(tool_error_formatter=hooks.tool_error_formatter)`.

    Example:
        task = "Forward the latest email about X to olga"
        with FlowmemHooks(memory, task) as hooks:
            result = await Runner.run(agent, task, hooks=hooks)
        memory.flush()  # the trajectory has one step per tool call and success=True
    """

    def __init__(
        self, memory: WorkflowMemory, task: str, *, agent_name: str | None = None, **record: Any
    ) -> None:
        """`agent_name` defaults to the name of the first agent; `record` goes to `memory.record`."""
        self.memory, self.task, self.agent_name = memory, task, agent_name
        self._record = record
        self._run: Run | None = None
        self._entered = self._named = False
        # tool_call_id -> (action, args, perf_counter at start)
        self._pending: dict[str, tuple[str, dict[str, Any], float]] = {}
        self._errors: dict[str, str] = {}

    @property
    def run(self) -> Run | None:
        """The flowmem run being recorded (None before the first agent starts, without `with`)."""
        return self._run

    def _open(self) -> Run:
        return self.memory.record(self.task, agent=self.agent_name or "agent", **self._record)

    def _ensure_run(self, agent: Agent[Any]) -> Run:
        if self._run is None or (self._run.finished and not self._entered):
            self._run, self._named = self._open(), self.agent_name is not None  # one per Runner.run
        if not self._named:
            self._run.agent, self._named = agent.name, True  # the first agent names the run
        return self._run

    def __enter__(self) -> FlowmemHooks:
        self._run, self._named = self._open(), self.agent_name is not None
        self._entered = True
        self._run.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        run, self._entered = self._run, False
        if run is not None:
            run.__exit__(exc_type, exc, tb)

    def tool_error_formatter(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        """A `RunConfig.tool_error_formatter` that keeps the exception of a failed tool call for
        its step; the model still gets the SDK's default message."""
        if args.kind == "tool_exception" and args.error is not None:
            self._errors[args.call_id] = f"{type(args.error).__name__}: {args.error}"
        return None

    async def on_agent_start(self, context: AgentHookContext[Any], agent: Agent[Any]) -> None:
        self._ensure_run(agent)

    async def on_handoff(
        self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]
    ) -> None:
        self._ensure_run(from_agent).step("handoff", {"from": from_agent.name, "to": to_agent.name})

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool) -> None:
        key, args = self._call(context, tool)
        self._pending[key] = (tool.name, args, time.perf_counter())

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        key, args = self._call(context, tool)
        action, args, started = self._pending.pop(key, (tool.name, args, time.perf_counter()))
        elapsed = (time.perf_counter() - started) * 1000
        error = self._errors.pop(key, None)
        if error is None and isinstance(result, str) and result == _default_error(context):
            error = result
        run = self._ensure_run(agent)
        if error is not None:
            run.step(action, args, error=error, duration_ms=elapsed)
        else:
            run.step(action, args, observation=result, duration_ms=elapsed)

    async def on_agent_end(self, context: AgentHookContext[Any], agent: Agent[Any], output: Any) -> None:
        answer = output if isinstance(output, str) or output is None else str(output)
        self._ensure_run(agent).finish(success=True, final_answer=answer)

    @staticmethod
    def _call(context: RunContextWrapper[Any], tool: Tool) -> tuple[str, dict[str, Any]]:
        """The key of a tool call and its arguments (only function tools carry both)."""
        if isinstance(context, ToolContext):
            return context.tool_call_id, _parse_arguments(context.tool_arguments)
        return f"{tool.name}@{id(context)}", {}


def with_memory(
    agent: Agent[TContext], memory: WorkflowMemory, *, k: int = 3, for_agent: str | None = None
) -> Agent[TContext]:
    """A clone of `agent` whose instructions end with the `k` workflows fitting the task.

    The task is the current run's (inside `FlowmemHooks` or `memory.record`, where the served
    versions are noted on the run), else the first user message of the turn. `for_agent`
    limits the workflows to those induced from one agent's runs.

    Example:
        agent = with_memory(Agent(name="mail", instructions="You handle email."), memory)
    """
    base = agent.instructions

    async def instructions(context: RunContextWrapper[TContext], current: Agent[TContext]) -> str:
        if callable(base):
            made = base(context, current)
            text: str | None = await made if inspect.isawaitable(made) else made
        else:
            text = base
        run = current_run()
        task = run.task if run is not None else _task_from(context.turn_input)
        # Off the event loop: the search embeds the task and may reload the index.
        block = await asyncio.to_thread(memory.context, task, k, agent=for_agent) if task else ""
        return "\n\n".join(part for part in (text, block) if part)

    return agent.clone(instructions=instructions)
