"""`WorkflowMemory`: the object a running agent holds.

It records runs through hooks (`record`, the `recorded` decorator, the `tool` wrapper) and
stores them from a background writer in batches (`flowmem.agents.writer`), which also opens
the store: opening a memory imports no LanceDB on the agent's thread. `close()` — called at
interpreter exit and on SIGTERM for every memory still open (`flowmem.agents.shutdown`) —
flushes everything, so neither a normal exit nor a supervisor's stop loses a finished run; once
the store is open it never waits longer than twice `flush_timeout`, and says in one line what
it could not store.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from flowmem.agents import shutdown
from flowmem.agents.recording import Run, RunWarning, current_run
from flowmem.agents.writer import StoreSlot, Writer, journal_run, open_journal
from flowmem.jobs.factories import check_store, store_from
from flowmem.jobs.outcome import report_outcome
from flowmem.models import WorkflowRef
from flowmem.settings import Settings

if TYPE_CHECKING:  # imported where searched: recording loads no search machinery (docs/performance.md)
    from flowmem.agents.legomem import Strategy
    from flowmem.agents.procedures import FoundWorkflow
    from flowmem.agents.served_index import ServedIndex
    from flowmem.retrieval.search import Hit
    from flowmem.storage import Store

__all__ = ["WorkflowMemory"]

F = TypeVar("F", bound=Callable[..., Any])


class WorkflowMemory:
    """Records an agent's runs into the flowmem store.

    Example:
        memory = WorkflowMemory.open()
        with memory.record("Forward the latest email about X to olga", agent="email_agent") as run:
            run.step("email.search_emails", args={"query": "X"}, observation="...")
            run.finish(success=True, final_answer="done")
    """

    def __init__(self, settings: Settings | str | os.PathLike[str], *, store: Store | None = None) -> None:
        """A memory on the store the settings name, or on the store at a path or URI.

        The store itself is built and opened by the memory's writer, on its own thread; what
        building it would refuse is checked here first (`jobs.factories.check_store`).

        Raises:
            StoreLocationError: (a `ValueError`) if the location cannot be a store; the
                message says what can.
            ModelFileError: (a `ValueError`) if the static embedder's directory holds no
                model.
        """
        settings = _settings_of(settings)
        self.settings = settings
        # The writer builds the store (its modules, the embedder) and opens it (LanceDB's
        # import, the connection) on its own thread: the agent starts without waiting for it.
        if store is None:
            check_store(settings)
            slot = StoreSlot(functools.partial(store_from, settings))
        else:
            slot = StoreSlot.holding(store)
        self._lock = threading.RLock()  # re-entered by a SIGTERM handler (agents/shutdown.py)
        self._closed = False
        self._indexes: dict[str, ServedIndex] = {}
        # Durable hooks: each finished run is fsync'ed to a journal first (replayed here if a
        # killed process left one).
        self._journal = open_journal(slot, settings) if settings.durable else None
        journal = self._journal
        self._journal_hook = functools.partial(journal_run, journal, settings) if journal else None
        self._writer = Writer(slot, settings, journal=journal)
        self._writer.start()
        shutdown.track(self)

    @property
    def store(self) -> Store:
        """The store this memory records into; the first use waits until the writer has built
        it (a search's first call, at most a fraction of a second after opening).

        Raises:
            Exception: what building the store raised (the embedder's model missing, ...).
        """
        return self._writer.store

    @classmethod
    def open(
        cls, settings: Settings | str | os.PathLike[str] | None = None, *, store: Store | None = None
    ) -> WorkflowMemory:
        """A memory on the configured store (settings from FLOWMEM_* variables by default), or
        on the store at a path or URI (the other settings from FLOWMEM_* variables)."""
        return cls(Settings() if settings is None else settings, store=store)

    def _submit(self, run: Run) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("this WorkflowMemory is closed")
        self._writer.submit(run)

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
        on_warning: Callable[[RunWarning], None] | None = None,
    ) -> Run:
        """Start recording a run of `task`. Use it as a context manager.

        Inside another run's block, the new run is that run's subtask (`parent_id` is set),
        LEGOMem-style. An exception inside the block stores the run as failed, then propagates.
        The pitfalls of the workflows `context` serves inside the block are checked as steps
        arrive: `run.step` returns the warnings that hold, and `on_warning` gets each.
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
            journal=self._journal_hook,
            on_warning=on_warning,
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
                from flowmem.agents.served_index import ServedIndex

                self._indexes[namespace] = ServedIndex.serving(self.store, namespace, self.settings)
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
        self, task: str, k: int | None = None, *, agent: str | None = None, namespace: str | None = None
    ) -> str:
        """The text block to put in an agent's instructions: the fitting workflows, each with
        when to use it, its steps with `{placeholders}`, where derived values come from, and
        its pitfalls. Inside a `record` block the served versions are noted on the run, and
        their pitfalls checked on its steps (`Run.watch`). At most `k` workflows (by default
        `CONTEXT_K`, 3)."""
        from flowmem.agents.served_index import CONTEXT_K
        from flowmem.induction.render.render import render_context

        hits = self.search(task, CONTEXT_K if k is None else k, agent=agent, namespace=namespace)
        run = current_run()
        if run is not None:
            run.use(*(WorkflowRef(id=h.workflow.id, version=h.workflow.version) for h in hits))
            run.watch(*(h.workflow for h in hits))
        return render_context([h.workflow for h in hits])

    # -- the familiar workflow-memory API (`agents/procedures.py`) -----------------------

    async def add_workflow(
        self, task: str, steps: Sequence[str], outcome: str, result: str | None = None, **kw: Any
    ) -> str:
        """Store a hand-written procedure: `task`, its `steps` as text, the `outcome` it aims
        at, and its `result` ("FAILED..." marks a failure, None not yet known). It takes part
        in induction like every run; returns its id. `agent=` and `namespace=` are optional."""
        import asyncio  # here: an agent without an event loop does not load it

        return await asyncio.to_thread(self.add_workflow_sync, task, steps, outcome, result, **kw)

    def add_workflow_sync(
        self,
        task: str,
        steps: Sequence[str],
        outcome: str,
        result: str | None = None,
        *,
        agent: str = "agent",
        namespace: str | None = None,
    ) -> str:
        """`add_workflow` for code without an event loop."""
        from flowmem.agents.procedures import add_procedure

        return add_procedure(self, task, steps, outcome, result, agent=agent, namespace=namespace)

    async def search_workflow(
        self, query: str, k: int = 3, *, namespace: str | None = None
    ) -> list[FoundWorkflow]:
        """The k best, best first: induced workflows and the procedures not induced yet, each
        with `metadata` (`task`, `steps`, `outcome`, `result`, and flowmem's fields)."""
        import asyncio  # here: an agent without an event loop does not load it

        return await asyncio.to_thread(self.search_workflow_sync, query, k, namespace=namespace)

    def search_workflow_sync(
        self, query: str, k: int = 3, *, namespace: str | None = None
    ) -> list[FoundWorkflow]:
        """`search_workflow` for code without an event loop."""
        from flowmem.agents.procedures import search_procedures

        return search_procedures(self, query, k, namespace=namespace)

    def for_orchestrator(self, task: str, k: int = 5) -> list[Hit]:
        """Full-task memories (plans: which agent does which subtask) for an orchestrator."""
        from flowmem.agents.legomem import for_orchestrator

        return for_orchestrator(self, task, k)

    def for_agent(
        self,
        agent: str,
        subtask: str,
        k: int = 3,
        *,
        strategy: Strategy = "dynamic",
        task: str | None = None,
    ) -> list[Hit]:
        """Subtask memories for a task agent: `vanilla`, `dynamic` or `rewrite` (LEGOMem)."""
        from flowmem.agents.legomem import for_agent

        return for_agent(self, agent, subtask, k, strategy=strategy, task=task)

    def report_outcome(self, run_id: str, *, success: bool, feedback: str | None = None) -> None:
        """Set the outcome of a stored run later (e.g. when a user confirms); the stats of the
        versions the run was served change at once."""
        self.flush()
        report_outcome(
            self.store,
            run_id,
            success=success,
            feedback=feedback,
            namespace=self.settings.namespace,
            scrub=self.settings.scrub,
        )

    def opening(self) -> bool:
        """Whether the writer is still opening the store (importing LanceDB, connecting) on
        its thread; a search, a flush or `close` waits for it."""
        return not self._writer.opened

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every finished run is stored (or, if the store refused it, spilled to
        the unsaved-runs file); False if `timeout` (default: the `flush_timeout` setting)
        passed first, once the store was open (the writer opens it: `writer.OPEN_LIMIT`)."""
        return self._writer.flush(self.settings.flush_timeout if timeout is None else timeout)

    def close(self, *, from_signal: bool = False) -> None:
        """Store everything still buffered, stop the writer and say, in one line, what could
        not be stored. Idempotent. Returns within twice `flush_timeout` whatever the store and
        the disk do, once the store is open (a wait of its own, up to `writer.OPEN_LIMIT`):
        what the writer has not stored by then is spilled (docs/reliability.md).

        `from_signal`: called by a signal handler, which may have interrupted this thread
        inside one of the hooks' locks: the runs are stored from this thread (`Writer.drain`)
        instead of waiting for the writer thread, which could need that lock."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if from_signal:
            self._writer.drain(self.settings.flush_timeout)
        else:
            self._writer.close(self.settings.flush_timeout)
        if self._journal is not None:  # empty now unless runs could be kept nowhere else
            self._journal.close()
        shutdown.untrack(self)

    def __enter__(self) -> WorkflowMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _settings_of(settings: Settings | str | os.PathLike[str]) -> Settings:
    """The settings themselves, or those of FLOWMEM_* variables with the store at a location."""
    if isinstance(settings, Settings):
        return settings
    if isinstance(settings, str | os.PathLike):
        return Settings(db=os.fspath(settings))
    raise TypeError(
        f"WorkflowMemory takes Settings or a store location (a path or URI), not {type(settings).__name__}"
    )
