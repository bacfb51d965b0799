"""`WorkflowMemory`: the object a running agent holds.

It records runs through hooks (`record`, the `recorded` decorator, the `tool` wrapper) and
stores them from a background writer in batches. `close()` — called at interpreter exit for
every memory still open — flushes everything, so a normal exit loses nothing.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from typing import Any, TypeVar, cast, overload

from flowmem.agents import legomem
from flowmem.agents.recording import Run, current_run
from flowmem.agents.retrieval import Hit, ServedIndex
from flowmem.induction.render import render_workflow
from flowmem.interchange import dump_record
from flowmem.learning import report_outcome, usage_from
from flowmem.models import Trajectory, WorkflowRef
from flowmem.scrub import scrub_trajectory
from flowmem.settings import Settings
from flowmem.spool import write_spool_file
from flowmem.storage import Store

__all__ = ["WorkflowMemory"]

log = logging.getLogger("flowmem.memory")

F = TypeVar("F", bound=Callable[..., Any])

_open_memories: weakref.WeakSet[WorkflowMemory] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for memory in list(_open_memories):
        memory.close()


class _Writer(threading.Thread):
    """Stores finished runs in batches; never loses one: on persistent failure, the runs go
    to a JSONL file next to the store that `flowmem ingest` takes back."""

    def __init__(self, store: Store, settings: Settings) -> None:
        super().__init__(name="flowmem-writer", daemon=True)
        self.store, self.settings = store, settings
        self._cond = threading.Condition()
        self._queue: list[Run] = []
        self._pending = 0
        self._closing = False

    def submit(self, run: Run) -> None:
        with self._cond:
            if self._closing and not self.is_alive():
                raise RuntimeError("this WorkflowMemory is closed")
            self._queue.append(run)
            self._pending += 1
            if len(self._queue) >= self.settings.flush_batch:
                self._cond.notify_all()

    def flush(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            while self._pending:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def run(self) -> None:
        while True:
            with self._cond:
                if not self._queue and not self._closing:
                    self._cond.wait(self.settings.flush_interval)
                batch = self._queue[: self.settings.flush_batch]
                del self._queue[: len(batch)]
                done = self._closing and not self._queue and not batch
            if done:
                return
            if batch:
                self._write(batch)
                with self._cond:
                    self._pending -= len(batch)
                    self._cond.notify_all()

    def _write(self, batch: list[Run]) -> None:
        trajectories: list[Trajectory] = []
        for run in batch:
            try:
                trajectories.append(run.to_trajectory())
            except Exception:  # a bad record must not sink the batch
                log.exception("flowmem: run %s could not be turned into a trajectory", run.id)
        for attempt in range(3):
            try:
                if self.settings.record_to == "spool":  # scrubbed before it touches the disk
                    write_spool_file(self.settings.spool_path, self._scrubbed(trajectories))
                else:
                    stored = self.store.add_trajectories(trajectories)
                    if stored == len(trajectories):  # with duplicates, the learn flow recounts
                        self._count_outcomes(trajectories)
                return
            except Exception:
                log.exception("flowmem: storing %d runs failed (attempt %d)", len(trajectories), attempt + 1)
                time.sleep(0.2 * 2**attempt)
        self._spill(trajectories)

    def _count_outcomes(self, trajectories: list[Trajectory]) -> None:
        """Fold the new runs' outcomes into the served versions' stats now (best effort)."""
        by_namespace: dict[str, list[Trajectory]] = {}
        for t in trajectories:
            if t.workflows_used:
                by_namespace.setdefault(t.namespace, []).append(t)
        for namespace, runs in by_namespace.items():
            try:
                self.store.add_usage(usage_from(runs), namespace=namespace)
            except Exception:
                log.exception("flowmem: counting outcomes failed; the learn flow will count them")

    def _scrubbed(self, trajectories: list[Trajectory]) -> list[Trajectory]:
        kinds = self.settings.scrub
        return [scrub_trajectory(t, kinds) for t in trajectories] if kinds else trajectories

    def _spill(self, trajectories: list[Trajectory]) -> None:
        import json

        path = self.settings.quarantine_path.with_name(
            self.settings.quarantine_path.name.replace("quarantine", "unsaved")
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            for t in self._scrubbed(trajectories):
                fh.write(json.dumps(dump_record(t), ensure_ascii=False) + "\n")
        log.error("flowmem: %d runs written to %s; `flowmem ingest` it later", len(trajectories), path)


class WorkflowMemory:
    """Records an agent's runs into the flowmem store.

    Example:
        memory = WorkflowMemory.open()
        with memory.record("Forward the latest email about X to olga", agent="email_agent") as run:
            run.step("email.search_emails", args={"query": "X"}, observation="...")
            run.finish(success=True, final_answer="done")
    """

    def __init__(self, settings: Settings, *, store: Store | None = None) -> None:
        self.settings = settings
        self.store = store if store is not None else Store(settings)
        self._writer: _Writer | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._indexes: dict[str, ServedIndex] = {}
        # Imports now, not in the writer at exit time, when Python no longer allows them.
        if settings.record_to == "store":
            self.store.prepare()
        _open_memories.add(self)

    @classmethod
    def open(cls, settings: Settings | None = None, *, store: Store | None = None) -> WorkflowMemory:
        """A memory on the configured store (settings from FLOWMEM_* variables by default)."""
        return cls(settings if settings is not None else Settings(), store=store)

    def _submit(self, run: Run) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("this WorkflowMemory is closed")
            if self._writer is None:
                self._writer = _Writer(self.store, self.settings)
                self._writer.start()
            writer = self._writer
        writer.submit(run)

    def record(
        self,
        task: str,
        *,
        agent: str = "agent",
        parent_id: str | None = None,
        id: str | None = None,
        namespace: str | None = None,
        source: str | None = "hook",
        group: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Run:
        """Start recording a run of `task`. Use it as a context manager.

        Inside another run's block, the new run is that run's subtask (`parent_id` is set),
        LEGOMem-style. An exception inside the block stores the run as failed, then propagates.
        """
        if parent_id is None and (outer := current_run()) is not None:
            parent_id = outer.id
        return Run(
            self._submit,
            id=id or uuid.uuid4().hex,
            task=task,
            agent=agent,
            namespace=namespace or self.settings.namespace,
            parent_id=parent_id,
            source=source,
            group=group,
            meta=meta,
        )

    @overload
    def recorded(self, fn: F, /) -> F: ...
    @overload
    def recorded(
        self, /, *, agent: str = "agent", task: Callable[..., str] | None = None
    ) -> Callable[[F], F]: ...

    def recorded(
        self,
        fn: F | None = None,
        /,
        *,
        agent: str = "agent",
        task: Callable[..., str] | None = None,
    ) -> F | Callable[[F], F]:
        """Decorate a function that runs one task, so each call is recorded as a run.

        The task text is `task(*args, **kwargs)` if given, else the `task` keyword or the first
        positional argument. A return counts as success (the value is the final answer) unless
        the function called `current_run().finish(...)` itself; an exception as failure.
        """

        def decorate(f: F) -> F:
            def task_text(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
                if task is not None:
                    return task(*args, **kwargs)
                value = kwargs.get("task", args[0] if args else None)
                if not isinstance(value, str):
                    raise TypeError(f"{f.__name__}: pass the task text first, or give task=")
                return value

            def close_run(run: Run, result: Any) -> None:
                if not run.finished:
                    run.finish(success=True, final_answer=None if result is None else str(result))

            if inspect.iscoroutinefunction(f):

                @functools.wraps(f)
                async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                    with self.record(task_text(args, kwargs), agent=agent) as run:
                        result = await f(*args, **kwargs)
                        close_run(run, result)
                        return result

                return cast(F, async_wrapper)

            @functools.wraps(f)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.record(task_text(args, kwargs), agent=agent) as run:
                    result = f(*args, **kwargs)
                    close_run(run, result)
                    return result

            return cast(F, wrapper)

        return decorate(fn) if fn is not None else decorate

    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(self, /, *, name: str | None = None) -> Callable[[F], F]: ...

    def tool(self, fn: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
        """Wrap a tool function so every call inside a run is recorded as a step.

        The step holds the bound arguments, the result as observation, and the error if the
        tool raised (the exception still propagates). Outside a run the tool runs unrecorded.
        """

        def decorate(f: F) -> F:
            action = name or f.__name__
            signature = inspect.signature(f)

            @functools.wraps(f)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                run = current_run()
                if run is None:
                    return f(*args, **kwargs)
                arguments = dict(signature.bind_partial(*args, **kwargs).arguments)
                started = time.perf_counter()
                try:
                    result = f(*args, **kwargs)
                except Exception as err:
                    elapsed = (time.perf_counter() - started) * 1000
                    error = f"{type(err).__name__}: {err}"
                    run.step(action, arguments, error=error, duration_ms=elapsed)
                    raise
                elapsed = (time.perf_counter() - started) * 1000
                run.step(action, arguments, observation=result, duration_ms=elapsed)
                return result

            return cast(F, wrapper)

        return decorate(fn) if fn is not None else decorate

    # -- retrieval ----------------------------------------------------------------------

    @property
    def index(self) -> ServedIndex:
        """The in-process index of the configured namespace's served workflows (built on first
        search, hot-reloaded)."""
        return self.index_of(self.settings.namespace)

    def index_of(self, namespace: str) -> ServedIndex:
        """The in-process index of one namespace's served workflows."""
        with self._lock:
            if namespace not in self._indexes:
                self._indexes[namespace] = ServedIndex(self.store, namespace)
            return self._indexes[namespace]

    def search(
        self,
        task: str,
        k: int = 3,
        *,
        agent: str | None = None,
        scope: str | None = None,
        namespace: str | None = None,
    ) -> list[Hit]:
        """The k served workflows that fit a task best (optionally for one agent or scope; in
        another namespace than the configured one).

        A newly committed induction run is seen within `check_every` (0.25 s) plus the rebuild,
        without reopening the store."""
        return self.index_of(namespace or self.settings.namespace).search(task, k=k, agent=agent, scope=scope)

    def context(
        self, task: str, k: int = 3, *, agent: str | None = None, namespace: str | None = None
    ) -> str:
        """The text block to put in an agent's instructions: the fitting workflows, each with
        when to use it, its steps with `{placeholders}`, where derived values come from, and
        its pitfalls. Inside a `record` block the served versions are noted on the run."""
        hits = self.search(task, k, agent=agent, namespace=namespace)
        run = current_run()
        if run is not None:
            run.use(*(WorkflowRef(id=h.workflow.id, version=h.workflow.version) for h in hits))
        if not hits:
            return ""
        blocks = "\n\n".join(render_workflow(h.workflow, description=True) for h in hits)
        return (
            "Workflows that worked for similar tasks. Follow one if it fits, filling each "
            "{placeholder} from the task or from the result named:\n\n" + blocks
        )

    def for_orchestrator(self, task: str, k: int = 5) -> list[Hit]:
        """Full-task memories (plans: which agent does which subtask) for an orchestrator."""
        return legomem.for_orchestrator(self, task, k)

    def for_agent(
        self,
        agent: str,
        subtask: str,
        k: int = 3,
        *,
        strategy: legomem.Strategy = "dynamic",
        task: str | None = None,
    ) -> list[Hit]:
        """Subtask memories for a task agent: `vanilla`, `dynamic` or `rewrite` (LEGOMem)."""
        return legomem.for_agent(self, agent, subtask, k, strategy=strategy, task=task)

    def report_outcome(self, run_id: str, *, success: bool, feedback: str | None = None) -> None:
        """Set the outcome of a stored run later (e.g. when a user confirms); the stats of the
        versions the run was served change at once."""
        self.flush()
        report_outcome(
            self.store, run_id, success=success, feedback=feedback, namespace=self.settings.namespace
        )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every finished run is stored; False if `timeout` passed first."""
        writer = self._writer
        return True if writer is None else writer.flush(timeout)

    def close(self) -> None:
        """Store everything still buffered and stop the writer. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            writer = self._writer
        if writer is not None:
            writer.flush()
            writer.stop()
            writer.join()
        _open_memories.discard(self)

    def __enter__(self) -> WorkflowMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
