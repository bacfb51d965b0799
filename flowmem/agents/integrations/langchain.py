"""LangChain integration: a callback handler that records tool calls as flowmem steps.

Example:
    with memory.record("Forward the latest email about X to olga", agent="mail") as run:
        handler = FlowmemCallbackHandler()  # records into the current run
        agent_executor.invoke({"input": run.task}, config={"callbacks": [handler]})
        run.finish(success=True)
"""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import ToolMessage

from flowmem.agents.recording import Run, current_run

__all__ = ["FlowmemCallbackHandler"]


class FlowmemCallbackHandler(BaseCallbackHandler):
    """Records every tool call LangChain reports as a step of a flowmem run.

    The step holds the tool name, its arguments (`{"input": text}` for a tool called with
    text), the output as observation, and the error if the tool raised or returned a handled
    error (`handle_tool_error`). The run is the one given, else the run current when the tool
    starts; tool calls outside any run are not recorded. The handler holds no state between
    calls other than the calls in flight, so one handler can serve many runs and threads.

    Example:
        handler = FlowmemCallbackHandler(run)
        search_emails.invoke({"query": "roadmap"}, config={"callbacks": [handler]})
    """

    run_inline = True
    """Called on the event loop for async tools: recording only appends to a list."""

    def __init__(self, run: Run | None = None) -> None:
        super().__init__()
        self.run = run
        self._pending: dict[UUID, tuple[Run, str, dict[str, Any], float]] = {}
        self._lock = threading.Lock()

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        run = self.run if self.run is not None else current_run()
        if run is None:
            return
        name = kwargs.get("name") or serialized.get("name") or "tool"
        args = dict(inputs) if inputs is not None else {"input": input_str}
        with self._lock:
            self._pending[run_id] = (run, str(name), args, time.perf_counter())

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        if isinstance(output, ToolMessage):
            if output.status == "error":  # a ToolException the tool's handle_tool_error turned into text
                self._close(run_id, error=str(output.text))
                return
            output = output.content
        self._close(run_id, observation=output)

    def on_tool_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._close(run_id, error=f"{type(error).__name__}: {error}")

    def _close(self, run_id: UUID, *, observation: Any = None, error: str | None = None) -> None:
        """Record the pending call `run_id` as a step with its result or error."""
        with self._lock:
            pending = self._pending.pop(run_id, None)
        if pending is None:
            return
        run, action, args, started = pending
        elapsed = (time.perf_counter() - started) * 1000
        run.step(action, args, observation=observation, error=error, duration_ms=elapsed)
