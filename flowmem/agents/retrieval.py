"""Retrieval for running agents: an in-process index of the served workflows, hot-reloaded.

A search embeds the task, scores every served workflow by its nearest source task (cosine,
less a little where other workflows hold part of that task's runs: `induction.nearest`),
multiplies by the version's rank factor (from the Beta posterior of its outcomes), and keeps
the best k (fewer when the others score far below the first: `policy.serving.within_gap`).
A workflow's active version is served; a newer candidate version on trial is served instead
to a configurable share of requests (decided by a hash of the task, so the same task gets the
same version). The index is rebuilt only when the store has a new
workflows table version (a committed induction run, a rollback), new usage stats or a status
change; the store is asked at most every `check_every` seconds, so an agent's search costs
no I/O in between, or at once after a commit made through the same `Store` object.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from flowmem.induction.nearest import ExampleIndex
from flowmem.models import Workflow
from flowmem.policy.lifecycle import DEFAULT_PARAMS, LifecycleParams, rank_factor, serve_candidate
from flowmem.policy.serving import CANDIDATES, compose, within_gap
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
    """Cosine similarity of the task and the workflow's nearest source task, less
    `SHARE_WEIGHT` × the part of that task's runs other workflows hold (`induction.nearest`)."""


@dataclass(frozen=True)
class _Snapshot:
    """The served versions as arrays, rebuilt when the store has new versions or stats."""

    workflows: list[Workflow]
    index: ExampleIndex
    factors: npt.NDArray[np.float64]
    """Per version: its rank factor."""
    agents: npt.NDArray[np.object_]
    scopes: npt.NDArray[np.object_]
    trials: list[tuple[int, int]]
    """(candidate on trial, its workflow's active version): the candidate is served instead
    of the active version to a share of the requests."""

    @classmethod
    def of(cls, workflows: list[Workflow], index: ExampleIndex, params: LifecycleParams) -> _Snapshot:
        active = {w.id: i for i, w in enumerate(workflows) if w.status == "active"}
        return cls(
            workflows,
            index,
            np.array([rank_factor(w.stats, params) for w in workflows], dtype=np.float64),
            np.array([w.agent for w in workflows], dtype=object),
            np.array([w.scope for w in workflows], dtype=object),
            [(i, active[w.id]) for i, w in enumerate(workflows) if w.status != "active" and w.id in active],
        )


class ServedIndex:
    """The served workflows of one namespace, kept in memory and refreshed on new versions."""

    def __init__(
        self,
        store: Store,
        namespace: str,
        *,
        check_every: float = 0.25,
        params: LifecycleParams = DEFAULT_PARAMS,
        gap: float | None = None,
    ) -> None:
        self.store, self.namespace, self.check_every, self.params = store, namespace, check_every, params
        self.gap = gap
        """A memory scoring more than this below the first is not served (`within_gap`)."""
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._writes = store.writes
        self._version: tuple[int, int, int] | None = None
        self._snapshot = _Snapshot.of([], ExampleIndex(store.embedder.embed([]), [], 0), params)
        self.reloads = 0
        """How many times the index was rebuilt."""

    def _refresh(self) -> None:
        now = time.monotonic()
        writes = self.store.writes  # this process's own commits are served at once
        if now - self._checked < self.check_every and writes == self._writes:
            return
        self._checked, self._writes = now, writes
        version = self.store.served_version(namespace=self.namespace)
        if version == self._version:
            return
        workflows, vectors, owners, shares = self.store.workflow_index(namespace=self.namespace)
        index = ExampleIndex(vectors, owners, len(workflows), shares)
        self._snapshot = _Snapshot.of(workflows, index, self.params)
        self._version = version
        self.reloads += 1

    def served(self) -> list[Workflow]:
        """The versions being served now (a workflow's candidate on trial too)."""
        with self._lock:
            self._refresh()
            return list(self._snapshot.workflows)

    def search(
        self, task: str, *, k: int = 3, agent: str | None = None, scope: str | None = None
    ) -> list[Hit]:
        """The k best served workflows for a task (optionally of one agent or scope)."""
        with self._lock:
            self._refresh()
            snap = self._snapshot
        if not snap.workflows:
            return []
        similarity = snap.index.similarities(self.store.embedder.embed([task])[0])
        ok = np.isfinite(similarity)
        if agent is not None:
            ok &= snap.agents == agent
        if scope is not None:
            ok &= snap.scopes == scope
        for candidate, active in snap.trials:  # on trial: served to a share of the requests only
            w = snap.workflows[candidate]
            if serve_candidate(task, w.id, w.version, self.params.candidate_share):
                ok[active] = False
            else:
                ok[candidate] = False
        scores = np.where(ok, similarity * snap.factors, -np.inf)
        # Versions are in id order, so the stable sort breaks score ties by id.
        ranked = [int(i) for i in np.argsort(-scores, kind="stable")[: max(k, CANDIDATES)] if ok[i]]
        ranked = ranked[: within_gap([float(scores[i]) for i in ranked], self.gap)]
        top = [ranked[p] for p in compose([snap.workflows[i] for i in ranked], k)]
        return [Hit(snap.workflows[i], float(scores[i]), float(similarity[i])) for i in top]
