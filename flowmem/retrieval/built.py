"""The `Workflow`s a snapshot of the served versions has built, by position: the hits of the last
searches, and those kept built ahead, most served first, up to a memory budget.

A search's hits are built from the served columns when served (`storage.workflow_json`: their
rows written out as one JSON document, validated by pydantic). In a search that costs more than
the ranking: at 10k served versions on a 2-core Xeon, 0.15–0.6 ms for three hits in searches of
tasks that do not repeat, against ~0.07 ms for the same three built alone, as the search before
has taken the CPU's caches (docs/performance.md, "Search at small sizes"). A process that
searches keeps the versions most likely served built ahead (`keep`, in a background thread),
as many as an estimate of their memory allows (`Settings.keep_built_mb`): a search serving one
of those builds nothing.

Every entry is held with the stats it was built with, and used only while they are the
position's now (the same object): an outcome reported changes a version's stats, and the next
search serving it builds it anew, in its place.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from flowmem.models import UsageStats, Workflow

__all__ = ["BASE_BYTES", "RECENT", "TEXT_FACTOR", "Built", "to_keep"]

RECENT = 1024
"""Hits of recent searches kept built beside those kept ahead (least recently served dropped
first): ~4–12 MB."""

BASE_BYTES = 3_500
"""About what a built `Workflow` takes in memory besides its text (its objects, dicts and
field sets): `estimate`. Measured with `tracemalloc` over up to 2,000 built versions: 4.2 KB
for the bench's one-step workflows (0.2 KB of text), 8.6, 11.7 and 10.5 KB for the workflows
induced from the three shared sets (1.4, 2.1 and 2.1 KB of text); `estimate` gives 2–12%
more than each."""

TEXT_FACTOR = 4
"""What a byte of a version's stored text (`Columns.text_bytes`) takes in its built `Workflow`,
about (the strings, and the steps' dicts and models made of them): `estimate`."""

CHUNK = 8
"""Versions built in one call while keeping (`Built.keep`), which then sleeps as long as the call
took: a search that wants the GIL meanwhile waits about one such call (~0.2–0.5 ms), and the
thread holds it half the time at most."""


def estimate(text_bytes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """About how many bytes each version's built `Workflow` takes, from its stored text."""
    return BASE_BYTES + TEXT_FACTOR * np.asarray(text_bytes, dtype=np.int64)


def to_keep(served: Sequence[int], text_bytes: npt.NDArray[np.int64], budget: int) -> list[int]:
    """The positions to keep built within `budget` bytes (estimated: `estimate`): the most
    served first (ties by position), as many as fit in a row."""
    if budget <= 0 or not len(served):
        return []
    order = np.argsort(-np.asarray(served, dtype=np.int64), kind="stable")
    fits = np.cumsum(estimate(text_bytes)[order]) <= budget
    count = len(order) if fits.all() else int(np.argmin(fits))
    return [int(i) for i in order[:count]]


class Rows(Protocol):
    """What versions are built from (`ranking.Columns`)."""

    @property
    def stats(self) -> Sequence[UsageStats]:
        """Live usage stats."""

    def workflows(self, positions: Sequence[int]) -> list[Workflow]:
        """The `Workflow`s at these positions, with their live status and stats."""


class Built:
    """The built `Workflow`s of a snapshot, shared by the snapshots `with_stats` makes of it
    (the same versions at the same positions)."""

    def __init__(self, recent: int = RECENT) -> None:
        self.recent_size = recent
        self._recent: OrderedDict[int, tuple[UsageStats, Workflow]] = OrderedDict()
        self._kept: dict[int, tuple[UsageStats, Workflow]] = {}
        self._keeping: frozenset[int] = frozenset()
        """The positions kept ahead: built anew in `_kept`, never dropped."""
        self._lock = threading.Lock()
        self.started = False
        """Whether `keep` was started (once for a snapshot and those made of it)."""
        self.kept = threading.Event()
        """Set once `keep` has built every position it was given (or stopped)."""

    def found(self, positions: Sequence[int], stats: Sequence[UsageStats]) -> dict[int, Workflow]:
        """The built versions among these positions whose stats are the position's now."""
        out: dict[int, Workflow] = {}
        with self._lock:
            for i in positions:
                entry = self._kept.get(i)
                if entry is None:
                    entry = self._recent.get(i)
                    if entry is not None and entry[0] is stats[i]:
                        self._recent.move_to_end(i)
                if entry is not None and entry[0] is stats[i]:
                    out[i] = entry[1]
        return out

    def add(self, built: dict[int, Workflow], stats: Sequence[UsageStats]) -> None:
        """Remember versions just built with these stats: among those kept ahead when their
        position is, else among the recent hits. A version already held with the same stats
        stays the object it is (two threads may build one version at once: what was served
        once is served again)."""
        with self._lock:
            for i, workflow in built.items():
                entry = self._kept.get(i) or self._recent.get(i)
                if entry is None or entry[0] is not stats[i]:
                    entry = (stats[i], workflow)
                if i in self._keeping:
                    self._kept[i] = entry
                    self._recent.pop(i, None)
                else:
                    self._recent[i] = entry
                    self._recent.move_to_end(i)
            while len(self._recent) > self.recent_size:
                self._recent.popitem(last=False)

    def keep(self, positions: Sequence[int], serving: Callable[[], Rows | None]) -> None:
        """Build the versions at `positions` and keep them, `CHUNK` at a time, from the rows
        `serving()` gives (those being served: an outcome may replace them meanwhile, with
        other stats), those built already with the stats they have there left as they are.
        Stops early when `serving()` gives None (the snapshot replaced by one of other
        versions, the process exiting). Sleeps after each chunk as long as it took (`CHUNK`)."""
        try:
            with self._lock:
                self._keeping = frozenset(positions)
            for start in range(0, len(positions), CHUNK):
                began = time.perf_counter()
                rows = serving()
                if rows is None:
                    return
                stats = rows.stats
                chunk = list(positions[start : start + CHUNK])
                done = self.found(chunk, stats)  # moved among those kept, as they are
                todo = [i for i in chunk if i not in done]
                self.add(done | dict(zip(todo, rows.workflows(todo) if todo else [], strict=True)), stats)
                time.sleep(time.perf_counter() - began)
        finally:
            self.kept.set()

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept) + len(self._recent)
