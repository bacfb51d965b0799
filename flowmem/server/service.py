"""What the HTTP API and the MCP server do, once, for both: search, get, record, report.

A service serves exactly one namespace, the one its settings name (`FLOWMEM_NAMESPACE`): a
record that names another namespace is rejected, and reads never see another namespace. Run
one server per tenant.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from flowmem.agents.retrieval import ServedIndex
from flowmem.interchange import RecordError, Rejection, parse_line, parse_record
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import quarantine, store_new_trajectories
from flowmem.jobs.outcome import report_outcome
from flowmem.models import Trajectory
from flowmem.server.committer import GroupCommitter
from flowmem.server.payloads import hit_payload, workflow_payload
from flowmem.settings import Settings
from flowmem.storage import Store, pick_version

__all__ = ["MAX_BATCH", "Service"]

MAX_BATCH = 1_000
"""Most trajectories accepted in one request."""

T = TypeVar("T")

COMPACT_EVERY = 100
"""Group commits between two compactions of the trajectories table (see `GroupCommitter`)."""
COMPACT_KEEP = timedelta(seconds=10)
"""Trajectories table versions younger than this survive a compaction (for reads in flight)."""


class Service:
    """The operations the API and MCP server expose, on one store and namespace."""

    def __init__(self, settings: Settings, *, store: Store | None = None) -> None:
        self.settings = settings
        self.namespace = settings.namespace
        self.store = store if store is not None else store_from(settings)
        self._index: ServedIndex | None = None
        self._lock = threading.Lock()
        self.committer = GroupCommitter(
            lambda batch: store_new_trajectories(self.store, batch, self.settings.scrub),
            compact=lambda: self.store.compact_trajectories(keep=COMPACT_KEEP),
            compact_every=COMPACT_EVERY,
        )
        """Stores what concurrent requests record in one commit per batch."""

    @property
    def index(self) -> ServedIndex:
        """The served workflows, hot-reloaded as induction runs commit."""
        with self._lock:
            if self._index is None:
                self._index = ServedIndex(self.store, self.namespace, gap=self.settings.relevance_gap)
            return self._index

    def search(self, task: str, k: int = 3, *, agent: str | None = None) -> list[dict[str, Any]]:
        """The k served workflows that fit `task` best."""
        return [hit_payload(h) for h in self.index.search(task, k=k, agent=agent)]

    def get_workflow(self, workflow_id: str, version: int | None = None) -> dict[str, Any]:
        """One version of a workflow (the latest by default) and the list of all its versions.

        Raises:
            NotFoundError: if the namespace has no such workflow or version.
        """
        history = self.store.history(workflow_id, namespace=self.namespace)
        chosen = pick_version(history, version)
        return {
            **workflow_payload(chosen),
            "versions": [
                {"version": w.version, "status": w.status, "created_at": w.created_at.isoformat()}
                for w in history
            ],
        }

    def record(self, records: Sequence[Any], *, origin: str = "api") -> dict[str, Any]:
        """Validate and store decoded trajectories in the interchange format.

        Every record is checked on its own: valid ones are stored (idempotently, by id),
        invalid ones are rejected with a reason — returned to the caller and written to the
        quarantine file — and never stop the rest.

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

    def record_lines(self, lines: Sequence[bytes], *, origin: str = "api") -> dict[str, Any]:
        """Like `record`, for undecoded interchange lines (a JSONL body), each checked as
        `flowmem ingest` checks a file's lines."""
        return self._store_parsed(lines, lambda line: parse_line(line, self.settings), origin)

    def _store_parsed(
        self, items: Sequence[T], parse: Callable[[T], Trajectory], origin: str
    ) -> dict[str, Any]:
        if len(items) > MAX_BATCH:
            raise ValueError(f"at most {MAX_BATCH} trajectories per request, got {len(items)}")
        valid: list[Trajectory] = []
        rejected: list[Rejection] = []
        for i, item in enumerate(items):
            try:
                trajectory = parse(item)
                if trajectory.namespace != self.namespace:
                    raise RecordError(
                        f"namespace {trajectory.namespace!r} is not this server's ({self.namespace!r})"
                    )
                valid.append(trajectory)
            except RecordError as exc:
                raw = item.decode("utf-8", "replace") if isinstance(item, bytes) else repr(item)
                rejected.append(Rejection(source=origin, line=i + 1, reason=str(exc), raw=raw[:10_000]))
        stored = self.committer.submit(valid)
        quarantine(rejected, self.settings.quarantine_path, self.settings.scrub)
        return {
            "received": len(items),
            "stored": stored,
            "duplicates": len(valid) - stored,
            "rejected": [{"index": r.line - 1, "reason": r.reason} for r in rejected],
            "ids": [t.id for t in valid],
        }

    def report_outcome(self, run_id: str, *, success: bool, feedback: str | None = None) -> dict[str, Any]:
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
        return {"id": run_id, "success": success}
