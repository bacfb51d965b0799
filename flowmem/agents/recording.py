"""Recording runs: what an agent calls while it works, kept off disk and network.

`Run.step` appends a tuple to an in-memory list; a finished run is handed to a background
writer that builds the `Trajectory` and stores runs in batches. Nothing on the agent's thread
waits for I/O.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from flowmem.models import Step, Trajectory, WorkflowRef

__all__ = ["Run", "current_run"]

log = logging.getLogger("flowmem.recording")

_current: contextvars.ContextVar[Run | None] = contextvars.ContextVar("flowmem_run", default=None)

# (action, args, observation, thought, error, started_at epoch seconds, duration_ms)
_RawStep = tuple[str, Any, Any, str | None, str | None, float, float | None]


def current_run() -> Run | None:
    """The run recorded by the innermost open `record` block in this context, if any."""
    return _current.get()


def _json_safe(value: Any) -> Any:
    """Arguments as plain JSON values (objects become their text), so any call can be stored."""
    try:
        return json.loads(json.dumps(value, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return str(value)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


class Run:
    """One task being recorded. Use as a context manager from `WorkflowMemory.record`."""

    def __init__(
        self,
        submit: Callable[[Run], None],
        *,
        id: str,
        task: str,
        agent: str,
        namespace: str,
        parent_id: str | None = None,
        source: str | None = None,
        group: str | None = None,
        meta: dict[str, Any] | None = None,
        journal: Callable[[Run], None] | None = None,
    ) -> None:
        if not task:
            raise ValueError("a run needs a non-empty task")
        self.id, self.task, self.agent, self.namespace = id, task, agent, namespace
        self.parent_id, self.source, self.group = parent_id, source, group
        self.meta: dict[str, Any] = dict(meta or {})
        self.created_at = datetime.now(UTC)
        self._submit = submit
        self._steps: list[_RawStep] = []
        self._used: list[WorkflowRef] = []
        self._lock = threading.RLock()  # re-entered by a SIGTERM handler (agents/shutdown.py)
        self._outcome: dict[str, Any] = {}
        self._finished = False
        self._submitted = False
        self._entered = False
        self._token: contextvars.Token[Run | None] | None = None
        self._journal = journal
        self._journaled: tuple[int, int, dict[str, Any]] | None = None  # the state last journaled

    def step(
        self,
        action: str,
        /,
        args: dict[str, Any] | None = None,
        *,
        observation: Any = None,
        thought: str | None = None,
        error: str | None = None,
        duration_ms: float | None = None,
    ) -> None:
        """Record one action. Cheap and non-blocking: the step is validated and stored later."""
        if not action or not isinstance(action, str):
            raise ValueError("a step needs a non-empty action name")
        raw = (action, args, observation, thought, error, time.time(), duration_ms)
        with self._lock:
            if self._submitted:
                raise RuntimeError(f"run {self.id} is already stored; steps can no longer be added")
            self._steps.append(raw)

    def use(self, *refs: WorkflowRef) -> None:
        """Note workflow versions that were served to this run."""
        with self._lock:
            for ref in refs:
                if ref not in self._used:
                    self._used.append(ref)

    def finish(
        self,
        *,
        success: bool | None,
        final_answer: str | None = None,
        score: float | None = None,
        feedback: str | None = None,
    ) -> None:
        """Set the outcome. Outside a `with` block this also hands the run to the writer."""
        with self._lock:
            self._outcome = {
                "success": success,
                "final_answer": final_answer,
                "score": score,
                "feedback": feedback,
            }
            self._finished = True
        if self._journal is not None:
            self._journal_now()
        if not self._entered:
            self._hand_over()

    def _journal_now(self) -> None:
        """Durable mode: write the run as it is now to the journal unless it already holds
        this state (steps, workflows used, outcome)."""
        assert self._journal is not None
        state = (len(self._steps), len(self._used), self._outcome)
        if state != self._journaled:
            self._journal(self)
            self._journaled = state

    @property
    def finished(self) -> bool:
        """Whether `finish` was called."""
        return self._finished

    @property
    def n_steps(self) -> int:
        """Steps recorded so far."""
        return len(self._steps)

    def _hand_over(self) -> None:
        with self._lock:
            if self._submitted:
                return
            self._submitted = True
        self._submit(self)

    def __enter__(self) -> Run:
        self._entered = True
        self._token = _current.set(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _current.reset(self._token)
        if exc is not None:
            # Failures are data too: the run is stored as failed, then the error propagates.
            error = f"{type(exc).__name__}: {exc}"
            with self._lock:
                self._outcome = {**self._outcome, "success": False, "feedback": error}
                self.meta["error"] = error
                self._finished = True
        if self._journal is not None:
            self._journal_now()
        self._hand_over()

    def to_trajectory(self) -> Trajectory:
        """Build the trajectory (done by the background writer, off the agent's thread)."""
        with self._lock:
            raw_steps, used, outcome = list(self._steps), list(self._used), dict(self._outcome)
        steps = [
            Step(
                action=action,
                args=_json_safe(args)
                if isinstance(args, dict)
                else ({} if args is None else {"value": _json_safe(args)}),
                observation=_text(observation),
                thought=thought,
                error=_text(error),
                started_at=datetime.fromtimestamp(started, UTC),
                duration_ms=duration,
            )
            for action, args, observation, thought, error, started, duration in raw_steps
        ]
        return Trajectory(
            id=self.id,
            task=self.task,
            agent=self.agent,
            parent_id=self.parent_id,
            namespace=self.namespace,
            steps=steps,
            workflows_used=used,
            source=self.source,
            group=self.group,
            meta=_json_safe(self.meta),
            created_at=self.created_at,
            **outcome,
        )
