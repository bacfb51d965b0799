"""The served index agents search: the pure search over a snapshot, kept fresh, hot-reloaded.

A search embeds the task and hands it to `retrieval.search` (ranking, relevance floor, gap,
cover) over a snapshot of the served versions as columns (`retrieval.ranking.Snapshot`, from
`Store.served_rows`): a hit's `Workflow` is built when it is served, unless it is among the
most served, which a background thread keeps built (`retrieval.built`, `keep_bytes`). Past
`ann_min` keys an HNSW index (optional: faiss) is built in a background thread; until it is
ready, and where it cannot prove its ranking exact, search scores every key.

The index is rebuilt only when the store has a new workflows table version (a committed
induction run, a rollback), new usage stats or a status change, and for new usage stats alone
only their stats are read anew (`ServedRows.with_usage`); the store is asked at most every
`check_every` seconds, so an agent's search costs no I/O in between, or at once after a
commit made through the same `Store` object. On a local store that question is mostly a `stat`
(`Store.served_version`); elsewhere (object storage, a network file system:
`Store.versions_local`) it is asked in a background thread, and a change it finds read there
too, so that a search never waits on the network but for the first load and this process's
own commits. A change another process made, on an index of `background_from` served versions
or more (new usage stats alone too), is reloaded in a background thread while the snapshot before
it is served.
"""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from flowmem.agents.ann_cache import AnnCache, built
from flowmem.models import Workflow
from flowmem.policy.lifecycle import DEFAULT_PARAMS, LifecycleParams
from flowmem.retrieval import search as retrieval
from flowmem.retrieval.ann import AnnSlot, ann_available
from flowmem.retrieval.beside import Beside, Pending, ahead
from flowmem.retrieval.cover import Evidence
from flowmem.retrieval.ranking import ANN_MIN, Columns, Snapshot
from flowmem.retrieval.search import Bounds, Hit
from flowmem.settings import Settings
from flowmem.storage import Store
from flowmem.storage.evidence import newest_successes
from flowmem.storage.served import ServedRows

__all__ = ["BACKGROUND_FROM", "CONTEXT_K", "ServedIndex", "stop_builds"]

logger = logging.getLogger(__name__)

BACKGROUND_FROM = 10_000
"""Served versions from which another process's change is reloaded in the background
(`ServedIndex.background_from`): a whole reload takes 0.14–0.19 s at 10k on the developers'
machine, 0.8–1.5 s at 100k; below, the search that finds the change waits for it (counted in
versions, not timed, so that what a search serves does not depend on how busy the machine
is)."""

CONTEXT_K = 3
"""How many workflows `WorkflowMemory.context` serves an agent at most, unless told otherwise
(the dashboard's search box shows the same)."""


@dataclass(frozen=True)
class _Reloaded:
    """What a reload read, before it is served."""

    rows: ServedRows
    snap: Snapshot
    evidence: Evidence | None
    """The newest successful runs, read anew for a new induction run's commit; None: kept."""


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
        background_from: int = BACKGROUND_FROM,
        ann_cache: AnnCache | None = None,
        keep_bytes: int = 0,
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
        self._evidence_next: Evidence | None = None
        """Evidence read, served once its ANN is built (`_install`)."""
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
        self.ann_cache = ann_cache
        """Where built ANNs are kept for other processes, and read from (None: each built here)."""
        self.reloads = 0
        """How many times the index was rebuilt."""
        self.background_from = background_from
        """Served versions from which a change found by asking the store (another process's
        commit, rollback or status change) is reloaded in a background thread while the
        snapshot it replaces is served (`_refresh`)."""
        self.keep_bytes = keep_bytes
        """Bytes of served versions kept built ahead, about (`Settings.keep_built_mb`; 0: none)."""
        self._keep_pending: Snapshot | None = None
        """A snapshot whose served versions are to be kept built, after the search (`_keep`)."""
        self._pending: tuple[int, int, int] | None = None
        self._beside = Beside()
        """The helper thread a search looks up the stored runs in while it ranks (started by
        the first search of a store whose stored tasks have an HNSW: `retrieval.search`)."""

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
            ann_cache=AnnCache.of(settings),
            keep_bytes=settings.keep_built_mb * 1_000_000,
        )

    def due(self) -> bool:
        """Whether the next search will ask the store for its version (I/O, and a reload when
        it changed); in between, a search is CPU work only."""
        return time.monotonic() - self._checked >= self.check_every or self.store.writes != self._writes

    def _refresh(self) -> None:
        """Called with the lock held: the snapshot reloaded if the store has moved on, at once
        (the first load, this process's own writes, fewer served versions than
        `background_from`), else in a background thread while this snapshot is served (another
        process's outcomes too). A store that is not local is asked in a background thread too
        (`_check_behind`), but for the first load and this process's own writes."""
        if not self.due():
            return
        now, writes = time.monotonic(), self.store.writes  # this process's own commits are served at once
        own = writes != self._writes
        self._checked, self._writes = now, writes
        if self._pending is not None and not own:
            return  # a check or reload on its way: the first check after it lands catches up
        before = self._version
        behind = not _stopping.is_set()  # at exit, nothing more is started behind a search
        if behind and not own and before is not None and not self.store.versions_local():
            # Not a local store: asking it costs round trips (~9 ms for three on a local S3
            # server, more over a network), so it is asked behind the search, and what it
            # says served once read.
            self._pending = before
            _start_thread(lambda: self._check_behind(before), "flowmem-check")
            return
        version = self.store.served_version(namespace=self.namespace)
        recorded = version == before and self._recorded_since()
        if version == before and not recorded:
            return
        usage_only = before is not None and not recorded and _usage_only(version, before)
        if not behind or own or before is None or len(self._snapshot) < self.background_from:
            self._install(version, self._read(version, before, usage_only=usage_only))
            return
        # Another process's change, new usage alone too: its outcomes read the usage table
        # whole (~0.3 s at 100k versions with usage), behind the search like any other change.
        self._pending = version
        _start_thread(lambda: self._reload_behind(version, before, usage_only=usage_only), "flowmem-reload")

    def _recorded_since(self) -> bool:
        """Whether the rows served left out versions of a run not recorded when they were read
        (read between its commit and its record) and the runs table moved since: then a whole
        read may serve them, though no served table moved. Asked only while such rows are
        left out (a crashed run's, until the next commit repairs it)."""
        found = self._rows.candidates
        if found is None or found.runs is None:
            return False
        try:
            return bool(self.store.runs_version() != found.runs)
        except Exception:  # the store failed: asked again at the next check
            logger.warning(
                "asking the store of %r for its runs' version failed", self.namespace, exc_info=True
            )
            return False

    def _check_behind(self, before: tuple[int, int, int]) -> None:
        """The store asked for its versions in a background thread, and a change reloaded
        there too (`_reload_behind`); an error is logged and the next check tries again."""
        try:
            version = self.store.served_version(namespace=self.namespace)
        except Exception:  # the store failed: the snapshot being served stays, and says so
            logger.warning("asking the store of %r for its versions failed", self.namespace, exc_info=True)
            version = before
        recorded = version == before and self._recorded_since()
        if version == before and not recorded:
            with self._lock:
                self._pending = None
            return
        self._reload_behind(version, before, usage_only=not recorded and _usage_only(version, before))

    def _reload_behind(
        self, version: tuple[int, int, int], before: tuple[int, int, int], *, usage_only: bool = False
    ) -> None:
        """A reload in a background thread: installed if nothing was installed meanwhile (a
        reload of this process's own write, which is newer); an error is logged and the next
        check tries again."""
        try:
            found = self._read(version, before, usage_only=usage_only)
        except Exception:  # the store failed: the snapshot being served stays, and says so
            logger.warning("reloading the served index of %r failed", self.namespace, exc_info=True)
            with self._lock:
                self._pending = None
            return
        with self._lock:
            if self._version == before:
                self._install(version, found)
            self._pending = None

    def _read(
        self, version: tuple[int, int, int], before: tuple[int, int, int] | None, *, usage_only: bool
    ) -> _Reloaded:
        """What the store serves at `version`, read and indexed (not yet served: `_install`);
        `before`: the version of the snapshot being served; `usage_only`: only the usage table
        changed since. A new induction run's evidence runs are read in a thread of their own
        meanwhile (`retrieval.beside.ahead`; both reads wait mostly on LanceDB and Arrow, which
        let go of the GIL)."""
        reading: Pending[Evidence] | None = None
        if self.evidence_limit and version[0] != self._evidence_of:  # a new induction run's commit
            read = functools.partial(
                newest_successes, self.store, self.namespace, self.evidence_limit, share=self.literal_share
            )
            reading = ahead(read, "flowmem-evidence")
        try:
            rows, snap = self._served(version, before, usage_only=usage_only)
        except BaseException:
            if reading is not None:
                reading.cancel()
            raise
        evidence = None if reading is None else reading.result()
        if evidence is not None and self._wants_ann(evidence):  # `familiar` and `runs_for` ask it
            built = functools.partial(self._evidence_built, evidence)
            self._build_ann(evidence.index, evidence.seen_vectors, then=built)
        return _Reloaded(rows, snap, evidence)

    def _served(
        self, version: tuple[int, int, int], before: tuple[int, int, int] | None, *, usage_only: bool
    ) -> tuple[ServedRows, Snapshot]:
        """The served versions at `version` as rows and their snapshot (`_read`)."""
        old = self._snapshot
        if usage_only:
            # Usage alone changed (an outcome reported): the same versions, statuses and keys,
            # the stats of those whose figures changed read anew, not the workflows table
            # (the search after an outcome at 100k: ~12 ms against ~1 s for a whole reload).
            assert before is not None  # usage alone changed since a snapshot
            mine = self.store.usage_since(before[1], version[1], namespace=self.namespace)
            if mine is not None:  # this process's own outcomes alone: what they wrote
                rows, changed = self._rows.with_figures(mine)
            else:
                rows, changed = self._rows.with_usage(self.store.usage(namespace=self.namespace))
            snap = old.with_stats(rows, changed, self.params)
            if snap.drifted():  # the factors moved far from those the ANN ranks by
                self._build_ann(snap.rebuild(), snap.index.vectors)
        else:
            rows = self._restatused(version, before) or self.store.served_rows(namespace=self.namespace)
            snap = Snapshot.of(rows, self.params, ann_min=self.ann_min)
            # The ANN of the snapshot replaced serves this one when its keys are the same or
            # most of these (`retrieval.ann_reuse`); else, or when they drifted too far, a new
            # one is built (in the background, the borrowed one searched meanwhile).
            if snap.adopt(old):
                self._build_ann(snap.to_build(), snap.index.vectors)
        return rows, snap

    def _restatused(
        self, version: tuple[int, int, int], before: tuple[int, int, int] | None
    ) -> ServedRows | None:
        """The rows served after a change of status alone (the workflows table as when the
        rows served were read; the lifecycle log moved), taken from those rows without reading
        the workflows table (`ServedRows.restatus`): a retirement, a deprecation or a promotion
        among the versions served costs the lifecycle log's read, not the workflows table's
        (~1.5 s at 100k). None: a whole read is needed."""
        before = self._version
        if before is None or version[0] != before[0] or version[2] == before[2]:
            return None
        rows = self._rows.restatus(self.store.live_statuses(namespace=self.namespace))
        if rows is not None and version[1] != before[1]:
            rows = rows.with_usage(self.store.usage(namespace=self.namespace))[0]
        return rows

    def _install(self, version: tuple[int, int, int], found: _Reloaded) -> None:
        """Serve what `_read` read (with the lock held). New evidence whose ANN is being built
        waits for it while the evidence served has one (`_evidence_built` serves it then): until
        then it would score every stored run of a task whose template is known (13–16 ms a
        search at 100k runs, against ~2.5 ms), and the evidence served is that of the last
        induction run's commit either way, a few seconds older."""
        self._rows, self._snapshot, self._version = found.rows, found.snap, version
        evidence = found.evidence
        if evidence is not None:
            self._evidence_of = version[0]
            building = evidence.index.ann is None and self._wants_ann(evidence) and ann_available()
            if building and self._evidence.index.ann is not None:
                self._evidence_next = evidence
            else:
                self._evidence, self._evidence_next = evidence, None
        self._keep(found.snap)
        self.reloads += 1

    def _keep(self, snap: Snapshot) -> None:
        """Mark a snapshot of new versions to have its most served versions kept built, within
        `keep_bytes` (`retrieval.built`): once for it and the snapshots an outcome makes of it,
        which share what it built. The thread starts once the search that loaded it has
        returned (`_keep_started`)."""
        if self.keep_bytes and not snap.built.started and len(snap):
            snap.built.started = True
            self._keep_pending = snap

    def _keep_started(self) -> None:
        """Start keeping the snapshot `_keep` marked, in a background thread: after a search,
        not inside one (begun inside it, the two took turns with the GIL and a fresh process's
        first search at 10k versions took 1.22× as long). The thread stops once another
        snapshot's versions are served, or at exit."""
        with self._lock:
            snap, self._keep_pending = self._keep_pending, None
        if snap is None or _stopping.is_set():
            return
        built = snap.built

        def serving() -> Columns | None:
            current = self._snapshot
            return None if _stopping.is_set() or current.built is not built else current.rows

        def keep(budget: int = self.keep_bytes) -> None:
            try:
                built.keep(snap.to_keep(budget), serving)
            except Exception:  # searches build their hits as they come
                logger.exception("keeping the served versions of %r built failed", self.namespace)
            finally:
                built.kept.set()

        _start_thread(keep, "flowmem-keep")

    def _wants_ann(self, evidence: Evidence) -> bool:
        """Whether the evidence has enough stored tasks for an ANN of them (`ann_min`)."""
        return len(evidence.seen_vectors) >= self.ann_min

    def _evidence_built(self, evidence: Evidence) -> None:
        """An evidence's ANN build ended (built, or failed): whether the served keys are among
        its stored tasks worked out (`Evidence.keys_among`, in the build's thread), then the
        evidence served, if it is still the newest read."""
        if evidence.index.ann is not None and self.bounds.floor:
            evidence.work_out_keys(self._snapshot.index.vectors)
        with self._lock:
            if self._evidence_next is evidence:
                self._evidence, self._evidence_next = evidence, None

    def _build_ann(
        self, slot: AnnSlot, vectors: npt.NDArray[np.float32], *, then: Callable[[], None] | None = None
    ) -> None:
        """Build an ANN into the slot in a background thread (here when `ann_wait`), its keys
        scaled by `slot.scale` when it has one: a reload is served at once by the ANN it
        borrows or by brute force, and by its own ANN once it is ready; `then` is called in the
        build's thread once it ends, built or failed (not when stopped at exit; not with
        `ann_wait`, where the ANN is built before the reload is served)."""
        if self.ann_wait:
            slot.ann = built(vectors, slot.scale, self.ann_cache)
        else:
            _start_build(slot, vectors, then, self.ann_cache)

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
        # While this process builds an HNSW (both cores, an induction run's new keys or runs)
        # a helper would wait for a core mid-work, and the search for it: all in turn then.
        beside = None if _builds else self._beside
        try:
            return retrieval.search(
                snap, evidence, task, query, k, self.bounds, ok=ok, share=share, beside=beside
            )
        finally:
            if self._keep_pending is not None:
                self._keep_started()

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


def _start_build(
    slot: AnnSlot,
    vectors: npt.NDArray[np.float32],
    then: Callable[[], None] | None = None,
    cache: AnnCache | None = None,
) -> None:
    """Build an ANN into the slot in a daemon thread that `stop_builds` stops at exit (or read
    it from `cache`, and keep it there once built); `then` is called once the build ends
    (built, or failed: logged), unless stopped."""

    def build() -> None:
        try:
            slot.ann = built(vectors, slot.scale, cache, _stopping)
        except Exception:  # served without it: every key scored
            logger.exception("building an ANN of %d vectors failed", len(vectors))
        if then is not None and not _stopping.is_set():
            then()

    _start_thread(build, "flowmem-ann")


def _usage_only(version: tuple[int, int, int], before: tuple[int, int, int]) -> bool:
    """Whether, of the served tables' versions (workflows, usage, lifecycle), only the usage
    table's moved from `before` to `version`."""
    return (version[0], version[2]) == (before[0], before[2])


def _start_thread(work: Callable[[], None], name: str) -> None:
    """Run `work` in a daemon thread that `stop_builds` waits for at exit."""

    def run() -> None:
        try:
            work()
        finally:
            with _builds_lock:
                _builds.discard(thread)

    thread = threading.Thread(target=run, name=name, daemon=True)
    _register_stop()
    with _builds_lock:
        _builds.add(thread)
    thread.start()


@functools.cache
def _register_stop() -> None:
    """`stop_builds` runs at exit: registered with the first build, once."""
    atexit.register(stop_builds)


def stop_builds(timeout: float = 30.0) -> None:
    """Stop the ANN builds running in the background and wait for them and for the reloads
    (at most `timeout` seconds in all), so that none is inside faiss (or LanceDB) when the
    interpreter finalizes: a daemon thread that comes back from C++ then is ended by a forced
    unwind, which aborts the process ("terminate called without an active exception", exit
    status 134). Each build stops within one chunk of rows (`retrieval.ann.ADD_CHUNK`); a
    reload runs to its end. Registered with `atexit` when the first thread starts; a build
    started after it ran stops before its first chunk."""
    _stopping.set()
    deadline = time.monotonic() + timeout
    with _builds_lock:
        running = list(_builds)
    for thread in running:
        thread.join(max(0.0, deadline - time.monotonic()))
