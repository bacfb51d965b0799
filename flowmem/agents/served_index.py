"""The served index agents search: the pure search over a snapshot, kept fresh, hot-reloaded.

A search embeds the task and hands it to `retrieval.search` (ranking, relevance floor, gap,
cover) over a snapshot of the served versions as columns (`retrieval.ranking.Snapshot`, from
`Store.served_rows`): a hit's `Workflow` is built when it is served. Past `ann_min` keys an
HNSW index (optional: faiss) is built in a background thread; until it is ready, and where it
cannot prove its ranking exact, search scores every key.

The index is rebuilt only when the store has a new workflows table version (a committed
induction run, a rollback), new usage stats or a status change, and for new usage stats alone
only their stats are read anew (`ServedRows.with_usage`); the store is asked at most every
`check_every` seconds, so an agent's search costs no I/O in between, or at once after a
commit made through the same `Store` object.
"""

from __future__ import annotations

import atexit
import functools
import threading
import time
from collections.abc import Collection, Sequence

import numpy as np
import numpy.typing as npt

from flowmem.models import Workflow
from flowmem.policy.lifecycle import DEFAULT_PARAMS, LifecycleParams
from flowmem.retrieval import search as retrieval
from flowmem.retrieval.ann import AnnSlot, build_ann
from flowmem.retrieval.ranking import ANN_MIN, Snapshot
from flowmem.retrieval.search import Bounds, Hit
from flowmem.settings import Settings
from flowmem.storage import Store
from flowmem.storage.evidence import newest_successes
from flowmem.storage.served import ServedRows

__all__ = ["CONTEXT_K", "ServedIndex", "stop_builds"]

CONTEXT_K = 3
"""How many workflows `WorkflowMemory.context` serves an agent at most, unless told otherwise
(the dashboard's search box shows the same)."""


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
        self.bounds = Bounds(gap=gap, ratio=ratio, floor=floor, cover_weight=cover_weight)
        """What limits what a search serves beyond its k: the relevance gap, ratio and floor, and
        the weight of the cover by a recurring task's runs (`retrieval.search.Bounds`)."""
        self.evidence_limit = evidence_limit if cover_weight is not None else 0
        """The newest successful runs kept as that evidence."""
        self.literal_share = literal_share
        """What tells a task's example values from its words (`Settings.literal_share`)."""
        self._evidence = newest_successes(store, namespace, 0)
        self._evidence_of: int | None = None
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._writes = store.writes
        self._version: tuple[int, int, int] | None = None
        self._rows = ServedRows.empty(store.embedder.dim)
        self._snapshot = Snapshot.of(self._rows, params)
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
        old, before = self._snapshot, self._version
        if before is not None and (version[0], version[2]) == (before[0], before[2]):
            # Usage alone changed (an outcome reported): the same versions, statuses and keys,
            # their stats read anew, not the workflows table (~0.25 against ~1.1 s at 100k).
            self._rows = self._rows.with_usage(self.store.usage(namespace=self.namespace))
            snap = Snapshot.of(self._rows, self.params, ann_min=self.ann_min)
            snap.slot = old.slot
        else:
            self._rows = self.store.served_rows(namespace=self.namespace)
            snap = Snapshot.of(self._rows, self.params, ann_min=self.ann_min)
            if old.wants_ann() and np.array_equal(old.index.vectors, snap.index.vectors):
                snap.slot = old.slot  # the status changed, not the keys: the same ANN holds
            elif snap.wants_ann():
                self._build_ann(snap.slot, snap.index.vectors)
        if self.evidence_limit and version[0] != self._evidence_of:  # a new induction run's commit
            self._evidence = newest_successes(
                self.store, self.namespace, self.evidence_limit, share=self.literal_share
            )
            self._evidence_of = version[0]
            if len(self._evidence.seen_vectors) >= self.ann_min:  # `Evidence.familiar` asks it
                self._build_ann(self._evidence.index, self._evidence.seen_vectors)
        self._snapshot, self._version = snap, version
        self.reloads += 1

    def _build_ann(self, slot: AnnSlot, vectors: npt.NDArray[np.float32]) -> None:
        """Build an ANN into the slot in a background thread (here when `ann_wait`): a reload
        is served at once by brute force, and by the ANN once it is ready."""
        if self.ann_wait:
            slot.ann = build_ann(vectors)
        else:
            _start_build(slot, vectors)

    def _fresh(self) -> Snapshot:
        """The snapshot, reloaded first if the store has moved on."""
        with self._lock:
            self._refresh()
            return self._snapshot

    def served(self) -> list[Workflow]:
        """The versions being served now (a workflow's candidate on trial too)."""
        snap = self._fresh()
        return [snap.workflow(i) for i in range(len(snap))]

    def count(self) -> int:
        """How many versions are being served now (`served()`'s length, without building them)."""
        return len(self._fresh())

    def sources(self) -> frozenset[str]:
        """The source trajectory ids of the versions being served now (those of `served()`,
        read from their column once per reload: no `Workflow` is built)."""
        return self._fresh().rows.sources()

    def drawn_from(
        self, runs: Collection[str], *, agent: str | None = None, scope: str | None = None
    ) -> list[tuple[Workflow, int]]:
        """The served versions (of this agent and scope) induced from any of these runs, each
        with how many of them, in `served()`'s order, a workflow once (its first such version:
        the newest). Only those versions' `Workflow`s are built (`ServedRows.drawing` reads the
        source runs from their column)."""
        snap = self._fresh()
        ok = snap.mask(agent, scope)
        chosen: dict[str, tuple[int, int]] = {}
        for i, overlap in sorted(snap.rows.drawing(runs).items()):
            wid = snap.rows.ids[i]
            if (ok is None or ok[i]) and wid not in chosen:
                chosen[wid] = (i, overlap)
        found = snap.workflows([i for i, _ in chosen.values()])
        return [(w, overlap) for w, (_, overlap) in zip(found, chosen.values(), strict=True)]

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
        ok, share = snap.mask(agent, scope), self.params.candidate_share
        return retrieval.search(snap, evidence, task, query, k, self.bounds, ok=ok, share=share)

    def floor_keeps(
        self,
        task: str,
        similarity: Sequence[float],
        by_example: Sequence[bool],
        *,
        query: npt.NDArray[np.float32] | None = None,
    ) -> list[bool]:
        """The relevance floor (`retrieval.search.floor_keeps`) with the evidence this index
        read: which of some memories `task` may be served, given each one's similarity to it and
        whether it is keyed by example tasks. `query`: the task's vector, when the caller has
        embedded it."""
        with self._lock:
            self._refresh()
            evidence = self._evidence
        vector = self.store.embedder.embed([task])[0] if query is None else query
        return retrieval.floor_keeps(evidence, task, vector, self.bounds, similarity, by_example)


_stopping = threading.Event()
_builds: set[threading.Thread] = set()
_builds_lock = threading.Lock()


def _start_build(slot: AnnSlot, vectors: npt.NDArray[np.float32]) -> None:
    """Build an ANN into the slot in a daemon thread that `stop_builds` stops at exit."""

    def build() -> None:
        try:
            slot.ann = build_ann(vectors, stop=_stopping)
        finally:
            with _builds_lock:
                _builds.discard(thread)

    thread = threading.Thread(target=build, name="flowmem-ann", daemon=True)
    _register_stop()
    with _builds_lock:
        _builds.add(thread)
    thread.start()


@functools.cache
def _register_stop() -> None:
    """`stop_builds` runs at exit: registered with the first build, once."""
    atexit.register(stop_builds)


def stop_builds(timeout: float = 30.0) -> None:
    """Stop the ANN builds running in the background and wait for them (at most `timeout`
    seconds in all), so that none is inside faiss when the interpreter finalizes: a daemon
    thread that comes back from C++ then is ended by a forced unwind, which aborts the process
    ("terminate called without an active exception", exit status 134). Each build stops
    within one chunk of rows (`retrieval.ann.ADD_CHUNK`). Registered with `atexit` when the
    first build starts; a build started after it ran stops before its first chunk."""
    _stopping.set()
    deadline = time.monotonic() + timeout
    with _builds_lock:
        running = list(_builds)
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
