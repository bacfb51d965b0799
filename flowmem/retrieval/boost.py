"""What an ANN search scores exactly beside the keys the ANN returns, and what bounds the rest.

The served index's ANN holds each key scaled by its version's rank factor when it was built
(`ranking.Snapshot.to_build`), so it returns the keys of the highest cosine × that factor. A
key's factor may change since (an outcome): the keys whose factor over that one grew, at most
a limit (`ranking.BOOSTED`), are scored exactly beside the ANN's, and the others are bounded
by the largest ratio left: 1 while few grew, whatever the factors are (`work_out`). An
outcome's reload carries the same keys over, changing only those of the versions it changed
(`carried`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from flowmem.retrieval.ann import AnnSlot
from flowmem.retrieval.ann_reuse import Borrowed

__all__ = ["Boost", "carried", "key_scale", "work_out"]


class Boost(NamedTuple):
    """What an ANN search scores exactly beside the keys the ANN returns, and what bounds the
    rest (`ranking.Snapshot.boost`)."""

    keys: npt.NDArray[np.int64]
    """Keys scored exactly on every search: those whose rank factor grew most since the ANN
    was built (at most the limit), and the keys it does not hold (a borrowed one's extra)."""
    scale: npt.NDArray[np.float64] | None
    """Per key: the rank factor its vector was scaled by in the ANN (None: 1, every key)."""
    rest: float
    """The largest factor / scale of the keys not scored exactly (the factor a key has now
    over the one the ANN ranked it by)."""
    least: float
    """The smallest of those (what bounds them where the products are negative)."""


def key_scale(slot: AnnSlot | None, borrowed: Borrowed | None, keys: int) -> npt.NDArray[np.float64] | None:
    """Per key of a snapshot of `keys` keys, the factor the ANN in `slot` (its own, or
    `borrowed`'s) scaled it by (NaN: a key it does not hold); None: it scaled none."""
    if slot is None or slot.scale is None:
        if borrowed is None or not len(borrowed.extra):
            return None
        scale = np.ones(len(borrowed.remap))
    else:
        scale = slot.scale
    if borrowed is None:
        return scale
    out = np.full(keys, np.nan)
    held = borrowed.remap >= 0
    out[borrowed.remap[held]] = scale[held]
    return out


def work_out(
    factors: npt.NDArray[np.float64], scale: npt.NDArray[np.float64] | None, limit: int, fmin: float
) -> Boost:
    """The `Boost` of keys of these rank factors in an ANN that scaled them by `scale`: the keys
    whose ratio is above 1, unless more than `limit` are (then the `limit` highest, every key of
    a ratio or none), and those it does not hold; `fmin` bounds when no other key is left."""
    ratios = factors if scale is None else factors / scale
    held = ~np.isnan(ratios)  # a borrowed ANN's extra keys are not held: scored exactly
    # A ratio of 1 (an unchanged factor; an untried version's factor, 1, unscaled) is most
    # keys': those above it, unless there are too many; then the highest (a sort:
    # `np.partition` takes ~17 ms on 100k factors of few distinct values).
    above = held & (ratios > 1.0)
    if np.count_nonzero(above) > limit:
        kept = np.sort(ratios[held])
        above = held & (ratios > kept[len(kept) - limit - 1])
    others = ratios[held & ~above]
    exact = np.flatnonzero(above | ~held).astype(np.int64)
    rest, least = (float(others.max()), float(others.min())) if len(others) else (fmin, fmin)
    return Boost(exact, scale, rest, least)


def carried(
    boost: Boost, factors: npt.NDArray[np.float64], moved: npt.NDArray[np.int64], limit: int
) -> Boost | None:
    """`boost` as it stands once the keys at `moved` have these `factors` (every key's): those
    whose factor over their scale is now above 1 scored exactly, the others not, and the
    bounds widened by theirs (never narrowed: still bounds). None when it is to be worked out
    anew: it had more keys above 1 than `limit` (its rest above 1), or would have now."""
    if boost.rest > 1.0:
        return None
    ratios = factors[moved]
    if boost.scale is not None:
        ratios = ratios / boost.scale[moved]
    held = ~np.isnan(ratios)
    up = held & (ratios > 1.0)
    keys = np.union1d(np.setdiff1d(boost.keys, moved[held & ~up], assume_unique=True), moved[up])
    unheld = 0 if boost.scale is None else int(np.count_nonzero(np.isnan(boost.scale[keys])))
    if len(keys) - unheld > limit:
        return None
    others = ratios[held & ~up]
    rest = max(boost.rest, float(others.max())) if len(others) else boost.rest
    least = min(boost.least, float(others.min())) if len(others) else boost.least
    return Boost(keys.astype(np.int64), boost.scale, rest, least)
