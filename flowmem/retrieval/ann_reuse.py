"""An ANN built over one snapshot's keys, searched for a later snapshot through a map of keys.

A reload that changes the served versions (a status change, a rollback, an induction run's
new versions) changes the key matrix, and an HNSW cannot drop or renumber keys. Building a
new one takes ~16 s at 100k keys on 2 cores, in the background, and until it is ready every
search scores every key (~20 ms at 100k). Here the new snapshot borrows the ANN it replaces:

- `KeyBase` says who owns each key the ANN holds: per version its (id, version) and its keys'
  range. A stored version never changes, so the same (id, version) has the same keys.
- `borrow` maps each of the ANN's keys to the new snapshot's (-1 for a version no longer
  served) and lists the new snapshot's keys the ANN does not hold (`Borrowed.extra`): a new
  version, or one served again. Those are scored exactly beside what the ANN returns, as the
  keys of versions ranked up are (`ranking.Snapshot._ranked_ann`), so nothing it misses can
  rank.
- `Borrowed.close` says when the borrowed ANN is enough and no new one is built: at most
  `EXTRA_MAX` keys scored exactly besides, at most `GONE_MAX` of its keys no longer served.
  Past either, a new ANN is built in the background and the borrowed one serves meanwhile.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from flowmem.retrieval.ann import AnnSlot, KeyBase

__all__ = ["EXTRA_MAX", "GONE_MAX", "Borrowed", "borrow", "key_base"]

EXTRA_MAX = 2048
"""Keys the borrowed ANN does not hold that a snapshot scores exactly on every search at most
before a new ANN is built (~60 µs of products at 100k, as many as `ranking.BOOSTED`)."""

GONE_MAX = 0.25
"""The share of the borrowed ANN's keys no longer served past which a new ANN is built: each
search asks it for more keys to find as many served ones."""


@dataclass(frozen=True)
class Borrowed:
    """An ANN over another snapshot's keys, as this snapshot searches it."""

    slot: AnnSlot
    """Where that ANN is (or lands, while it is built)."""
    remap: npt.NDArray[np.int64]
    """Per key the ANN holds: this snapshot's key, or -1 (its version is not served here)."""
    extra: npt.NDArray[np.int64]
    """This snapshot's keys the ANN does not hold, ascending: scored exactly on every search."""
    gone: int
    """How many of the ANN's keys are not served here."""

    @property
    def close(self) -> bool:
        """Whether this ANN serves well enough that no new one is built (`EXTRA_MAX`,
        `GONE_MAX`)."""
        return len(self.extra) <= EXTRA_MAX and self.gone <= GONE_MAX * len(self.remap)

    @property
    def useful(self) -> bool:
        """Whether searching it (with `extra` scored exactly) beats scoring every key while a
        new ANN is built: it holds at least half of this snapshot's keys."""
        return 2 * len(self.extra) <= len(self.remap) - self.gone + len(self.extra)

    def keys(self, found: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """This snapshot's keys of the ANN's keys `found`, in their order, those not served
        left out."""
        mapped = self.remap[found]
        return mapped[mapped >= 0]


def borrow(slot: AnnSlot, base: KeyBase, now: KeyBase) -> Borrowed:
    """How a snapshot whose keys are `now` searches the ANN in `slot`, built over `base`."""
    target = _targets(base, now)
    counts = base.hi - base.lo
    same = target >= 0
    # A version is the same keys wherever it is served; a differing count is not (then its
    # keys are not mapped, and scored as extra).
    same[same] = (now.hi - now.lo)[target[same]] == counts[same]
    owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    offset = np.arange(int(counts.sum()), dtype=np.int64) - base.lo[owner]
    start = np.zeros(len(counts), dtype=np.int64)
    start[same] = now.lo[target[same]]
    remap = np.where(same[owner], start[owner] + offset, -1)
    covered = np.zeros(now.keys, dtype=bool)
    covered[remap[remap >= 0]] = True
    return Borrowed(slot, remap, np.flatnonzero(~covered).astype(np.int64), int(np.count_nonzero(remap < 0)))


def _targets(base: KeyBase, now: KeyBase) -> npt.NDArray[np.int64]:
    """Per version of `base`, its position in `now`, or -1. Bases of one origin (versions
    picked among one whole read's, a change of status since: `KeyBase.tags`) by their
    numbers there (~1 ms at 100k versions); else by id and version, by C-level passes
    (`dict(zip(...))`, `map(get, ...)`: ~0.1 s at 100k versions, against ~0.2 s by a
    comprehension and a generator)."""
    if (
        base.origin is not None
        and base.origin is now.origin
        and base.tags is not None
        and now.tags is not None
    ):
        inverse = np.full(
            int(max(base.tags.max(initial=-1), now.tags.max(initial=-1))) + 1, -1, dtype=np.int64
        )
        inverse[now.tags] = np.arange(len(now.tags), dtype=np.int64)
        return inverse[base.tags]
    position = dict(zip(zip(now.ids, now.versions.tolist(), strict=True), itertools.count()))
    return np.fromiter(
        map(position.get, zip(base.ids, base.versions.tolist(), strict=True), itertools.repeat(-1)),
        dtype=np.int64,
        count=len(base.ids),
    )


def key_base(
    ids: Sequence[str],
    versions: npt.NDArray[np.int64],
    owners: npt.NDArray[np.int64],
    *,
    origin: object | None = None,
    tags: npt.NDArray[np.int64] | None = None,
) -> KeyBase:
    """The `KeyBase` of a key matrix laid out version by version (`owners` ascending, every
    version at position i owning `owners == i`, possibly none), its versions' positions among
    `origin`'s `tags` when known."""
    n = len(ids)
    lo = np.searchsorted(owners, np.arange(n), side="left").astype(np.int64)
    hi = np.searchsorted(owners, np.arange(n), side="right").astype(np.int64)
    return KeyBase(
        ids=list(ids),
        versions=np.asarray(versions, dtype=np.int64),
        lo=lo,
        hi=hi,
        keys=len(owners),
        origin=origin,
        tags=tags,
    )
