"""Retrieval for running agents: an in-process index of the served workflows, hot-reloaded.

A search embeds the task, scores every served workflow by its nearest source task (cosine),
multiplies by the version's rank factor (from the Beta posterior of its outcomes), and keeps
the best k. A workflow's active version is served; a newer candidate version on trial is
served instead to a configurable share of requests (decided by a hash of the task, so the
same task gets the same version). The index is rebuilt only when the store has a new
workflows table version (a committed induction run, a rollback), new usage stats or a status
change; the store is asked at most every `check_every` seconds, so an agent's search costs
no I/O in between.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from flowmem.induction.retrieve import ExampleIndex
from flowmem.lifecycle import DEFAULT_PARAMS, LifecycleParams, rank_factor, serve_candidate
from flowmem.models import Workflow
from flowmem.storage import Store

__all__ = ["Hit", "ServedIndex"]


@dataclass(frozen=True)
class Hit:
    """One search result."""

    workflow: Workflow
    """The served version."""
    score: float
    """similarity × rank factor."""
    similarity: float
    """Cosine similarity of the task and the workflow's nearest source task."""


class ServedIndex:
    """The served workflows of one namespace, kept in memory and refreshed on new versions."""

    def __init__(
        self,
        store: Store,
        namespace: str,
        *,
        check_every: float = 0.25,
        params: LifecycleParams = DEFAULT_PARAMS,
    ) -> None:
        self.store, self.namespace, self.check_every, self.params = store, namespace, check_every, params
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._version: tuple[int, int, int] | None = None
        self._workflows: list[Workflow] = []
        self._index = ExampleIndex(store.embedder.embed([]), [], 0)
        self._has_active: set[str] = set()
        self.reloads = 0
        """How many times the index was rebuilt."""

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < self.check_every:
            return
        self._checked = now
        version = self.store.served_version(namespace=self.namespace)
        if version == self._version:
            return
        workflows, vectors, owners = self.store.workflow_index(namespace=self.namespace)
        self._workflows, self._index = workflows, ExampleIndex(vectors, owners, len(workflows))
        self._has_active = {w.id for w in workflows if w.status == "active"}
        self._version = version
        self.reloads += 1

    def search(
        self, task: str, *, k: int = 3, agent: str | None = None, scope: str | None = None
    ) -> list[Hit]:
        """The k best served workflows for a task (optionally of one agent or scope)."""
        with self._lock:
            self._refresh()
            workflows, index, has_active = self._workflows, self._index, self._has_active
        query = self.store.embedder.embed([task])[0]
        best: dict[str, Hit] = {}
        for i, similarity in index.search(query, len(workflows)):
            w = workflows[i]
            if (agent is not None and w.agent != agent) or (scope is not None and w.scope != scope):
                continue
            on_trial = w.status == "candidate" and w.id in has_active
            if on_trial and not serve_candidate(task, w.id, w.version, self.params.candidate_share):
                continue  # on trial: served to a share of the requests only
            hit = Hit(w, similarity * rank_factor(w.stats, self.params), similarity)
            if w.id not in best or (w.status == "candidate" and best[w.id].workflow.status == "active"):
                best[w.id] = hit
        hits = sorted(best.values(), key=lambda h: (-h.score, h.workflow.id))
        return hits[:k]
