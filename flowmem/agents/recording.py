"""Recording runs: what an agent calls while it works, kept off disk and network.

`Run.step` appends a tuple to an in-memory list, without a lock (a step that comes with the
run's hand-over is settled under the run's lock: it is in the stored trajectory and returns, or
it is refused); a finished run is handed to a background writer that builds the `Trajectory`
and stores runs in batches. Nothing on the agent's thread waits for I/O.

Warnings: the pitfalls of the workflows served to a run (`Run.watch`, which
`WorkflowMemory.context` calls) that have a condition are checked as steps arrive
(`induction.pitfalls.conditions.Watch`); `Run.step` returns those that now hold and passes each to
the run's `on_warning` callback. A run that was served no checkable pitfall does nothing more
than before but look at two attributes.
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
from typing import Any, NamedTuple

from flowmem.induction.pitfalls.conditions import Watch
from flowmem.models import Pitfall, Step, Trajectory, Workflow, WorkflowRef

__all__ = ["Run", "RunWarning", "current_run"]

log = logging.getLogger("flowmem.recording")

_current: contextvars.ContextVar[Run | None] = contextvars.ContextVar("flowmem_run", default=None)

# (action, args, observation, thought, error, started_at epoch seconds, duration_ms)
_RawStep = tuple[str, Any, Any, str | None, str | None, float, float | None]


class RunWarning(NamedTuple):
    """A served pitfall whose condition the run now meets: it is going the way failed runs
    went."""

    workflow: WorkflowRef
    """The workflow version whose pitfall it is."""
    pitfall: Pitfall
    """The pitfall (`pitfall.text` says what the failed runs did)."""
    step: int
    """How many steps the run had taken when it held (the run's end: all of them)."""

    def __str__(self) -> str:
        return f"Pitfall of {self.workflow.id}: {self.pitfall.text}"


class _Outcome(NamedTuple):
    """A run's outcome as `finish` (or an error leaving its `with` block) set it."""

    success: bool | None = None
    final_answer: str | None = None
    score: float | None = None
    feedback: str | None = None


class _Watching:
    """The served pitfalls with a condition and their `Watch`, fed every step of the run."""

    def __init__(self, served: list[tuple[WorkflowRef, Pitfall]], task: str) -> None:
        self.served = served
        self.watch = Watch([p.condition for _, p in served if p.condition is not None], task)
        self.fed = 0
        """How many of the run's steps (in order) it has been fed."""

    def step(self, action: str, args: Any, observation: Any, error: Any) -> list[int]:
        """Feed one recorded step; the served pitfalls (positions) that now hold."""
        return self.watch.step(action, args if isinstance(args, dict) else None, observation, error)

    def warnings(self, held: list[int], step: int) -> list[RunWarning]:
        return [RunWarning(self.served[i][0], self.served[i][1], step) for i in held]


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
        on_warning: Callable[[RunWarning], None] | None = None,
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
        self._outcome = _Outcome()
        self._finished = False
        self._submitted = False
        self._stored: int | None = None  # steps in the trajectory built once handed over
        self._entered = False
        self._token: contextvars.Token[Run | None] | None = None
        self._journal = journal
        self._journaled: tuple[int, int, _Outcome] | None = None  # the state last journaled
        self.on_warning = on_warning
        """Called with each warning as it holds (on the thread that recorded the step)."""
        self._watching: _Watching | None = None  # None until a checkable pitfall is served

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
    ) -> list[RunWarning]:
        """Record one action. Cheap and non-blocking: the step is validated and stored later.

        Returns the warnings that hold from this step on (usually none): the served pitfalls
        whose condition the run now meets, each once; each is passed to `on_warning` too."""
        if not action or not isinstance(action, str):
            raise ValueError("a step needs a non-empty action name")
        raw = (action, args, observation, thought, error, time.time(), duration_ms)
        # No lock on the way a run without checkable pitfalls takes (list.append is atomic):
        # a hand-over or a `watch` that comes with or before it is settled under the lock.
        self._steps.append(raw)
        if self._submitted or self._watching is not None:
            return self._settle(raw)
        return []

    def _settle(self, raw: _RawStep) -> list[RunWarning]:
        """A step appended to a run that is handed over (refused unless the stored
        trajectory holds it) or watched (the served pitfalls fed every step not yet fed)."""
        with self._lock:
            if self._submitted:
                self._refuse(raw)
                return []
            found = self._catch_up()
        return self._tell(found) if found else []

    def _refuse(self, raw: _RawStep) -> None:
        """Raise for a step appended once the run was handed over, taking it out again, unless
        the trajectory stored was built with it (it came in just before the hand-over)."""
        steps = self._steps
        at = next(i for i in range(len(steps) - 1, -1, -1) if steps[i] is raw)
        if self._stored is not None and at < self._stored:
            return
        del steps[at]
        raise RuntimeError(f"run {self.id} is already stored; steps can no longer be added")

    def _catch_up(self) -> list[RunWarning]:
        """Feed the watch every step it has not seen, in order; the warnings that now hold.
        Called with the lock held."""
        watching = self._watching
        if watching is None:
            return []
        found: list[RunWarning] = []
        while watching.fed < len(self._steps):
            action, args, observation, _, error, _, _ = self._steps[watching.fed]
            watching.fed += 1
            held = watching.step(action, args, observation, error)
            if held:
                found += watching.warnings(held, watching.fed)
        return found

    def watch(self, *served: Workflow) -> list[RunWarning]:
        """Check the pitfalls of these served workflow versions (those with a condition) on
        this run's steps from now on; returns those the steps so far already meet (passed to
        `on_warning` too). `WorkflowMemory.context` calls it inside a `record` block."""
        new = [
            (WorkflowRef(id=w.id, version=w.version), p)
            for w in served
            for p in w.pitfalls
            if p.condition is not None
        ]
        with self._lock:
            known = self._watching.served if self._watching is not None else []
            fresh = [pair for pair in new if pair not in known]
            if not fresh:
                return []
            old = self._watching
            watching = _Watching([*known, *fresh], self.task)
            fired = old.watch.fired if old is not None else frozenset()
            found: list[RunWarning] = []
            for n, (action, args, observation, _, error, _, _) in enumerate(list(self._steps), 1):
                held = watching.step(action, args, observation, error)
                found += watching.warnings([i for i in held if i not in fired], n)
                watching.fed = n
            self._watching = watching
        return self._tell(found)

    def _tell(self, found: list[RunWarning]) -> list[RunWarning]:
        """Pass each warning to `on_warning` (an error there is logged: a callback never
        breaks the agent's run); returns them."""
        if self.on_warning is not None:
            for w in found:
                try:
                    self.on_warning(w)
                except Exception:
                    log.exception("on_warning failed for %s", w)
        return found

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
    ) -> list[RunWarning]:
        """Set the outcome. Outside a `with` block this also hands the run to the writer.
        Returns the warnings that hold at the run's end (a pitfall of a step never taken)."""
        with self._lock:
            found = self._catch_up()
            watching = self._watching
            held = watching.watch.end() if watching is not None else []
            found += watching.warnings(held, len(self._steps)) if watching is not None and held else []
            self._outcome = _Outcome(success, final_answer, score, feedback)
            self._finished = True
        if self._journal is not None:
            self._journal_now()
        if not self._entered:
            self._hand_over()
        return self._tell(found)

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
                self._outcome = self._outcome._replace(success=False, feedback=error)
                self.meta["error"] = error
                self._finished = True
        if self._journal is not None:
            self._journal_now()
        self._hand_over()

    def to_trajectory(self) -> Trajectory:
        """Build the trajectory (done by the background writer, off the agent's thread)."""
        with self._lock:
            raw_steps, used, outcome = list(self._steps), list(self._used), self._outcome
            if self._submitted:
                self._stored = len(raw_steps)
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
            **outcome._asdict(),
        )
