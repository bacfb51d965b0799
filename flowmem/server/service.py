"""What the HTTP API and the MCP server do, once, for both: search, get, record, report.

A service serves exactly one namespace, the one its settings name (`FLOWMEM_NAMESPACE`): a
record that names another namespace is rejected, and reads never see another namespace. Run
one server per tenant.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any, Literal, TypeVar

from flowmem.agents.served_index import ServedIndex
from flowmem.interchange import RecordError, Rejection, parse_line, parse_record
from flowmem.jobs.factories import inducer_from, store_from
from flowmem.jobs.ingest import quarantine, store_trajectories
from flowmem.jobs.outcome import report_outcome
from flowmem.jobs.status import Verb, set_status
from flowmem.models import Trajectory
from flowmem.server.committer import GroupCommitter
from flowmem.server.hits_json import HitsJson
from flowmem.server.payloads import (
    Conflict,
    DiffOut,
    History,
    InducedRun,
    LoggedTransitionOut,
    OutcomeSet,
    Recorded,
    RejectedRecord,
    RunOut,
    SearchHit,
    StatusChanged,
    TransitionOut,
    VersionOut,
    WorkflowDetail,
)
from flowmem.settings import Settings
from flowmem.storage import Store, pick_version

__all__ = ["MAX_BATCH", "Busy", "Service"]

MAX_BATCH = 1_000
"""Most trajectories accepted in one request."""

T = TypeVar("T")

COMPACT_EVERY = 100
"""Group commits between two compactions of the trajectories table (see `GroupCommitter`)."""
COMPACT_KEEP = timedelta(seconds=10)
"""Trajectories table versions younger than this survive a compaction (for reads in flight)."""


class Busy(RuntimeError):
    """An operation that runs one at a time is already running."""


class Service:
    """The operations the API and MCP server expose, on one store and namespace."""

    def __init__(self, settings: Settings, *, store: Store | None = None) -> None:
        self.settings = settings
        self.namespace = settings.namespace
        self.store = store if store is not None else store_from(settings)
        self._index: ServedIndex | None = None
        self._lock = threading.Lock()
        self._inducing = threading.Lock()
        self.committer = GroupCommitter(
            lambda batch: store_trajectories(self.store, batch, self.settings.scrub, conflicts=True),
            compact=lambda: self.store.compact_trajectories(keep=COMPACT_KEEP),
            compact_every=COMPACT_EVERY,
        )
        """Stores what concurrent requests record in one commit per batch."""
        self._hits_json = HitsJson()

    @property
    def index(self) -> ServedIndex:
        """The served workflows, hot-reloaded as induction runs commit."""
        with self._lock:
            if self._index is None:
                self._index = ServedIndex.serving(self.store, self.namespace, self.settings)
            return self._index

    def search(self, task: str, k: int = 3, *, agent: str | None = None) -> list[SearchHit]:
        """The k served workflows that fit `task` best."""
        return [SearchHit.of_hit(h) for h in self.index.search(task, k=k, agent=agent)]

    def warm(self) -> None:
        """Load the served index now (and start its ANN's build), not on the first search."""
        self.index.search("warm up", k=1)

    def search_json(self, task: str, k: int = 3, *, agent: str | None = None) -> bytes:
        """`search`'s hits as the API writes them (a JSON array of `SearchHit`), each served
        version's part written once and kept (`HitsJson`)."""
        return self._hits_json.dump(self.index.search(task, k=k, agent=agent))

    def search_is_cpu_only(self) -> bool:
        """Whether a search now would do no I/O (the index is loaded and not due a check)."""
        with self._lock:
            return self._index is not None and not self._index.due()

    def get_workflow(self, workflow_id: str, version: int | None = None) -> WorkflowDetail:
        """One version of a workflow (the latest by default) and the list of all its versions.

        Raises:
            NotFoundError: if the namespace has no such workflow or version.
        """
        history = self.store.history(workflow_id, namespace=self.namespace)
        return WorkflowDetail.of_history(pick_version(history, version), history)

    def record(self, records: Sequence[Any], *, origin: str = "api") -> Recorded:
        """Validate and store decoded trajectories in the interchange format.

        Every record is checked on its own: valid ones are stored (idempotently, by id),
        invalid ones are rejected with a reason — returned to the caller and written to the
        quarantine file — and never stop the rest. A valid one whose id is stored with other
        content (`Trajectory.content_hash`) is not stored and listed in `conflicts`.

        Raises:
            ValueError: if there are more than `MAX_BATCH` records.
        """

        def parse(record: Any) -> Trajectory:
            trajectory = parse_record(record, self.settings)  # checks nesting depth first
            size = len(json.dumps(record, ensure_ascii=False, default=str).encode())
            if size > self.settings.max_record_bytes:
                raise RecordError(f"record of {size} bytes exceeds {self.settings.max_record_bytes}")
            return trajectory

        return self._store_parsed(records, parse, origin)

    def record_lines(self, lines: Sequence[bytes], *, origin: str = "api") -> Recorded:
        """Like `record`, for undecoded interchange lines (a JSONL body), each checked as
        `flowmem ingest` checks a file's lines."""
        return self._store_parsed(lines, lambda line: parse_line(line, self.settings), origin)

    def _store_parsed(self, items: Sequence[T], parse: Callable[[T], Trajectory], origin: str) -> Recorded:
        if len(items) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} trajectories per request, got {len(items)}")
        valid: list[Trajectory] = []
        at: list[int] = []  # index in the request of each valid one
        rejected: list[Rejection] = []
        for i, item in enumerate(items):
            try:
                trajectory = parse(item)
                if trajectory.namespace != self.namespace:
                    raise RecordError(
                        f"namespace {trajectory.namespace!r} is not this server's ({self.namespace!r})"
                    )
                valid.append(trajectory)
                at.append(i)
            except RecordError as exc:
                raw = item.decode("utf-8", "replace") if isinstance(item, bytes) else repr(item)
                rejected.append(Rejection(source=origin, line=i + 1, reason=str(exc), raw=raw[:10_000]))
        committed = self.committer.commit(valid)
        quarantine(rejected, self.settings.quarantine_path, self.settings.scrub)
        return Recorded(
            received=len(items),
            stored=committed.stored,
            duplicates=len(valid) - committed.stored - len(committed.conflicts),
            rejected=[RejectedRecord(index=r.line - 1, reason=r.reason) for r in rejected],
            conflicts=[
                Conflict(index=at[i], id=c.id, stored_hash=c.stored_hash, sent_hash=c.sent_hash)
                for i, c in sorted(committed.conflicts.items())
            ],
            ids=[t.id for t in valid],
        )

    def report_outcome(self, run_id: str, *, success: bool, feedback: str | None = None) -> OutcomeSet:
        """Set a stored run's outcome; the learn flow folds it into the served versions' stats.

        Raises:
            NotFoundError: if the namespace has no such run.
        """
        report_outcome(
            self.store,
            run_id,
            success=success,
            feedback=feedback,
            namespace=self.namespace,
            scrub=self.settings.scrub,
        )
        return OutcomeSet(id=run_id, success=success)

    def history(self, workflow_id: str) -> History:
        """Every version of a workflow (status, parent, provenance) and its status transitions.

        Raises:
            NotFoundError: if the namespace has no such workflow.
        """
        versions = self.store.history(workflow_id, namespace=self.namespace)
        logged = self.store.transitions(namespace=self.namespace, workflow_id=workflow_id)
        return History(
            id=workflow_id,
            versions=[VersionOut.of_version(w) for w in versions],
            transitions=[LoggedTransitionOut.of_logged(t) for t in logged],
        )

    def diff(self, workflow_id: str, old: int, new: int) -> DiffOut:
        """Step-level diff between two versions of a workflow.

        Raises:
            NotFoundError: if the namespace has no such workflow or version.
        """
        return DiffOut.of(self.store.diff(workflow_id, old, new, namespace=self.namespace))

    def runs(self) -> list[RunOut]:
        """Induction runs and rollbacks, oldest first, with full ids."""
        return [RunOut.of(r) for r in self.store.list_runs(namespace=self.namespace)]

    def rollback(self, run_id: str, *, note: str | None = None) -> RunOut:
        """Restore the workflows to the table version before a run (itself a new, tagged run).

        Raises:
            NotFoundError: if the namespace has no such run.
            StoreError: if the run cannot be rolled back (no base version, already rolled back).
        """
        return RunOut.of(self.store.rollback(run_id, namespace=self.namespace, note=note))

    def set_status(
        self, workflow_id: str, verb: Verb, *, why: str, by: str, version: int | None = None
    ) -> StatusChanged:
        """Promote, deprecate or retire a workflow version, logged with who and why.

        Raises:
            NotFoundError: if the namespace has no such workflow or version.
            StoreError: if `why` is empty.
        """
        if version is not None:  # an unknown version is a 404, not a refusal
            pick_version(self.store.history(workflow_id, namespace=self.namespace), version)
        made = set_status(
            self.store, workflow_id, verb, namespace=self.namespace, why=why, by=by, version=version
        )
        return StatusChanged(id=workflow_id, action=verb, transitions=[TransitionOut.of(t) for t in made])

    def induce(self, *, inducer: Literal["rule", "llm"] | None = None, force: bool = False) -> InducedRun:
        """Run the induction job now (`flowmem induce`), one at a time; its summary.

        `inducer` is `rule` or `llm`; by default `llm` when a model is configured, else `rule`.

        Raises:
            Busy: if an induction started here is still running.
            ValueError: if the inducer is unknown or `llm` has no configured model.
        """
        from flowmem.jobs.induce import run_induction  # imports the induction machinery on first use

        kind: Literal["rule", "llm"] = inducer or ("llm" if self.settings.llm_model else "rule")
        built = inducer_from(kind, self.settings)
        with self._one_induction():
            report = run_induction(self.store, self.settings, built, namespace=self.namespace, force=force)
        return InducedRun(**dict(report.summary()), inducer=kind)

    @contextlib.contextmanager
    def _one_induction(self) -> Iterator[None]:
        """Held while an induction started here runs: one at a time in this process, and in
        every worker process of the same server (`flowmem api --workers N`: a lock file per
        store and namespace, in the temporary directory).

        Raises:
            Busy: if one is already running.
        """
        if not self._inducing.acquire(blocking=False):
            raise Busy("an induction run is already running on this server")
        try:
            with _file_lock(f"{self.settings.db}\0{self.namespace}"):
                yield
        finally:
            self._inducing.release()


@contextlib.contextmanager
def _file_lock(name: str) -> Iterator[None]:
    """An exclusive lock across this machine's processes, named by `name` (POSIX `flock`;
    where there is none, this process's lock alone holds).

    Raises:
        Busy: if another process holds it.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    path = os.path.join(tempfile.gettempdir(), f"flowmem-induce-{digest}.lock")
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy("an induction run is already running on this server") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
