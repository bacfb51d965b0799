"""Retrieval for running agents: an in-process index of the served workflows, hot-reloaded.

A search embeds the task, scores every served workflow by its nearest source task (cosine,
less a little where other workflows hold part of that task's runs: `retrieval.nearest`),
multiplies by the version's rank factor (from the Beta posterior of its outcomes), and keeps
the best k (fewer when the others score far below the first: `retrieval.serving.within_gap`).
A workflow's active version is served; a newer candidate version on trial is served instead
to a configurable share of requests (decided by a hash of the task, so the same task gets the
same version).

The index holds columns, not a `Workflow` per version (`agents.ranking`, from
`Store.served_rows`): a hit's `Workflow` is built when it is served. Past `ann_min` keys an
HNSW index (optional: faiss) is built in a background thread; until it is ready, and where it
cannot prove its ranking exact, search scores every key.

The index is rebuilt only when the store has a new workflows table version (a committed
induction run, a rollback), new usage stats or a status change; the store is asked at most
every `check_every` seconds, so an agent's search costs no I/O in between, or at once after a
commit made through the same `Store` object.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt

from flowmem.agents.ranking import ANN_MIN, AnnSlot, Snapshot
from flowmem.models import Workflow
from flowmem.policy.lifecycle import DEFAULT_PARAMS, LifecycleParams
from flowmem.retrieval.ann import build_ann
from flowmem.retrieval.cover import Evidence, cover
from flowmem.retrieval.serving import CANDIDATES, compose, within_gap
from flowmem.settings import Settings
from flowmem.storage import Store
from flowmem.storage.evidence import newest_successes
from flowmem.storage.served import ServedRows

__all__ = ["CONTEXT_K", "Hit", "ServedIndex"]

CONTEXT_K = 3
"""How many workflows `WorkflowMemory.context` serves an agent at most, unless told otherwise
(the dashboard's search box shows the same)."""


@dataclass(frozen=True)
class Hit:
    """One search result."""

    workflow: Workflow
    """The served version."""
    score: float
    """similarity × rank factor."""
    similarity: float
    """Cosine similarity of the task and the workflow's nearest source task, less
    `SHARE_WEIGHT` × the part of that task's runs other workflows hold (`retrieval.nearest`)."""
    by_example: bool = False
    """Whether the workflow is keyed by example tasks, and so held to the relevance floor
    (`ServedIndex.floor_keeps`)."""


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
        ratio: float | None = None,
        floor: float | None = None,
        ann_min: int = ANN_MIN,
        ann_wait: bool = False,
        cover_weight: float | None = None,
        evidence_limit: int = 0,
        literal_share: float = 0.1,
    ) -> None:
        self.store, self.namespace, self.check_every, self.params = store, namespace, check_every, params
        self.gap = gap
        """A memory scoring more than this below the first is not served (`within_gap`)."""
        self.ratio = ratio
        """A memory scoring below this share of the first's score is not served (`within_gap`)."""
        self.cover_weight = cover_weight
        """When a task recurs, what is served is chosen with its nearest successful stored runs
        as evidence (`retrieval.cover`, `Settings.cover_weight`); None: never."""
        self.evidence_limit = evidence_limit if cover_weight is not None else 0
        """The newest successful runs kept as that evidence."""
        self.literal_share = literal_share
        """What tells a task's example values from its words (`Settings.literal_share`)."""
        self._evidence = newest_successes(store, namespace, 0)
        self._evidence_of: int | None = None
        self.floor = floor
        """A task that neither its nearest example-keyed memory nor a stored run's task (the
        evidence's, read at each induction commit) is as similar to as this gets none of those
        memories: it is from no known domain (`Settings.floor`)."""
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._writes = store.writes
        self._version: tuple[int, int, int] | None = None
        self._snapshot = Snapshot.of(ServedRows.empty(store.embedder.dim), params)
        self.ann_min = ann_min
        """Keys from which an ANN index is built (in a background thread) and used."""
        self.ann_wait = ann_wait
        """Build the ANN during the reload rather than in the background (tests)."""
        self.reloads = 0
        """How many times the index was rebuilt."""

    @classmethod
    def serving(cls, store: Store, namespace: str, settings: Settings) -> ServedIndex:
        """The index agents, the API, MCP and the dashboard search, with the settings'
        relevance gap, ratio and floor."""
        return cls(
            store,
            namespace,
            gap=settings.relevance_gap,
            ratio=settings.relevance_ratio,
            floor=settings.floor,
            cover_weight=settings.cover_weight,
            evidence_limit=settings.evidence_limit,
            literal_share=settings.literal_share,
        )

    def due(self) -> bool:
        """Whether the next search will ask the store for its version (I/O, and a reload when
        it changed); in between, a search is CPU work only."""
        return time.monotonic() - self._checked >= self.check_every or self.store.writes != self._writes

    def _refresh(self) -> None:
        if not self.due():
            return
        now, writes = time.monotonic(), self.store.writes  # this process's own commits are served at once
        self._checked, self._writes = now, writes
        version = self.store.served_version(namespace=self.namespace)
        if version == self._version:
            return
        old = self._snapshot
        snap = Snapshot.of(
            self.store.served_rows(namespace=self.namespace), self.params, ann_min=self.ann_min
        )
        if old.wants_ann() and np.array_equal(old.index.vectors, snap.index.vectors):
            snap.slot = old.slot  # usage or status changed, not the keys: the same ANN holds
        elif snap.wants_ann():
            self._build_ann(snap.slot, snap.index.vectors)
        if self.evidence_limit and version[0] != self._evidence_of:  # a new induction run's commit
            self._evidence = newest_successes(
                self.store, self.namespace, self.evidence_limit, share=self.literal_share
            )
            self._evidence_of = version[0]
        self._snapshot, self._version = snap, version
        self.reloads += 1

    def _build_ann(self, slot: AnnSlot, vectors: npt.NDArray[np.float32]) -> None:
        """Build an ANN into the slot in a background thread (here when `ann_wait`): a reload
        is served at once by brute force, and by the ANN once it is ready."""

        def build() -> None:
            slot.ann = build_ann(vectors)

        if self.ann_wait:
            build()
        else:
            threading.Thread(target=build, name="flowmem-ann", daemon=True).start()

    def served(self) -> list[Workflow]:
        """The versions being served now (a workflow's candidate on trial too)."""
        with self._lock:
            self._refresh()
            snap = self._snapshot
        return [snap.workflow(i) for i in range(len(snap))]

    def search(
        self, task: str, *, k: int = 3, agent: str | None = None, scope: str | None = None
    ) -> list[Hit]:
        """The k best served workflows for a task (optionally of one agent or scope)."""
        with self._lock:
            self._refresh()
            snap, evidence = self._snapshot, self._evidence
        if not len(snap):
            return []
        query = self.store.embedder.embed([task])[0]
        ok = snap.mask(agent, scope)
        share = self.params.candidate_share
        ranked, scores, similarity = snap.ranked(query, task, max(k, CANDIDATES), ok, share)
        runs = evidence.runs_for(task, query) if self.cover_weight is not None and len(ranked) else []
        by_example = snap.rows.by_example[ranked]
        keep = np.array(self._floor_keeps(query, runs, evidence, similarity.tolist(), by_example.tolist()))
        if not keep.all():  # a task from no known domain
            ranked, scores, similarity, by_example = (
                ranked[keep],
                scores[keep],
                similarity[keep],
                by_example[keep],
            )
            if not len(ranked):
                return []
        n = within_gap(scores.tolist(), self.gap, self.ratio)
        if runs:  # a task seen before: what covers what worked for it (`retrieval.cover`)
            candidates = [snap.rows.actions(int(i)) for i in ranked]
            top = cover(candidates, runs, k, self.cover_weight or 0.0, keep=[0])
        elif snap.rows.subroutine[ranked[:n]].any():
            top = compose(_Lazy(snap, ranked[:n].tolist()), k)
        else:  # what compose gives task-level workflows, without building them
            top = list(range(min(k, n)))
        return [
            Hit(snap.workflow(int(ranked[p])), float(scores[p]), float(similarity[p]), bool(by_example[p]))
            for p in top
        ]

    def floor_keeps(
        self,
        task: str,
        similarity: Sequence[float],
        by_example: Sequence[bool],
        *,
        query: npt.NDArray[np.float32] | None = None,
    ) -> list[bool]:
        """The relevance floor, the one rule of every surface: which of some memories `task`
        may be served, given each one's similarity to it and whether it is keyed by example
        tasks. `search` applies it to the served workflows, `search_workflow` to them and the
        recorded procedures it returns (each keyed by its own task), with the evidence this
        index read (`Evidence.floor_keeps`, which `flowmem eval` applies too). All of them,
        unless there is a floor, the task does not recur (`Evidence.runs_for`), no task the
        namespace has stored a run of is at least `floor` similar to it (`Evidence.familiar`)
        and the nearest memory keyed by example tasks is not either
        (`retrieval.serving.above_floor`): then only those keyed by their own text. `query`: the
        task's vector, when the caller has embedded it."""
        with self._lock:
            self._refresh()
            evidence = self._evidence
        vector = self.store.embedder.embed([task])[0] if query is None else query
        runs = evidence.runs_for(task, vector) if self.cover_weight is not None and len(similarity) else []
        return self._floor_keeps(vector, runs, evidence, similarity, by_example)

    def _floor_keeps(
        self,
        query: npt.NDArray[np.float32],
        runs: Sequence[Sequence[str]],
        evidence: Evidence,
        similarity: Sequence[float],
        by_example: Sequence[bool],
    ) -> list[bool]:
        """`floor_keeps` with the evidence read, the task embedded and its recurring runs found."""
        return evidence.floor_keeps(query, self.floor, similarity, by_example, recurs=bool(runs))


class _Lazy(Sequence[Workflow]):
    """Served versions by position, each built only when `compose` looks at it."""

    def __init__(self, snap: Snapshot, positions: list[int]) -> None:
        self.snap, self.positions = snap, positions

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, i: int) -> Workflow: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Workflow]: ...
    def __getitem__(self, i: int | slice) -> Workflow | Sequence[Workflow]:
        if isinstance(i, slice):
            return [self.snap.workflow(p) for p in self.positions[i]]
        return self.snap.workflow(self.positions[i])
