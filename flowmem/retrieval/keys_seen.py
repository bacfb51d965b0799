"""Whether every served key is the vector of a task the namespace has stored a run of, bit for
bit (pure).

A served key is the embedding of one of its version's source tasks, and a source task is a
stored run's. When every key is a stored task's vector, a task that no stored task is `floor`
similar to is that similar to no key either (a key's similarity is its cosine, less a share):
the relevance floor then keeps no memory keyed by example tasks, whatever the ranking, and a
search of such a task on a store that holds no other kind of memory serves nothing
(`retrieval.search`). The keys are matched to the stored tasks by a 64-bit fingerprint of
their bits and then compared row by row, so a key is only ever taken as a stored task's when
it is the very same vector; an embedder that returns other floats for the same text (or
stored runs the evidence no longer holds: older than `evidence_limit`) leaves keys unmatched,
and the search ranks as before.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

__all__ = ["Prints", "all_among"]

_CHUNK = 4096
"""Rows compared at once (`all_among`: a chunk's gathered rows, 6 MB at 384 dimensions)."""


@functools.cache
def _weights(words: int) -> npt.NDArray[np.uint64]:
    """One odd 64-bit multiplier per word of a row (fixed: the same rows give the same prints)."""
    rng = np.random.default_rng(0x5EED)
    found: npt.NDArray[np.uint64] = rng.integers(1, 2**63, size=words, dtype=np.uint64) | np.uint64(1)
    return found


def _fingerprints(rows: npt.NDArray[np.float32]) -> npt.NDArray[np.uint64]:
    """Each row's bits, as 64-bit words (32-bit ones for an odd dimension), times the weights,
    summed modulo 2**64 (an integer product: exact, whatever the row's position; ~30 ms at
    100k rows of 384)."""
    bits = np.ascontiguousarray(rows, dtype=np.float32)
    words = bits.view(np.uint64) if bits.shape[1] % 2 == 0 else bits.view(np.uint32).astype(np.uint64)
    found: npt.NDArray[np.uint64] = words @ _weights(words.shape[1])  # wraps modulo 2**64, as meant
    return found


class Prints:
    """The fingerprints of some rows, sorted, with the row of each: what `all_among` looks
    rows up in."""

    def __init__(self, rows: npt.NDArray[np.float32]) -> None:
        found = _fingerprints(rows)
        self.order: npt.NDArray[np.int64] = np.argsort(found, kind="stable")
        self.sorted: npt.NDArray[np.uint64] = found[self.order]
        self.rows = rows


def all_among(keys: npt.NDArray[np.float32], seen: Prints) -> bool:
    """Whether every row of `keys` is one of `seen`'s rows, bit for bit."""
    if not len(keys):
        return True
    if not len(seen.sorted) or keys.shape[1] != seen.rows.shape[1]:
        return False
    wanted = _fingerprints(keys)
    at = np.minimum(np.searchsorted(seen.sorted, wanted), len(seen.sorted) - 1)
    if not np.array_equal(seen.sorted[at], wanted):
        return False
    rows, keys = seen.order[at], np.ascontiguousarray(keys, dtype=np.float32)
    for start in range(0, len(keys), _CHUNK):
        mine = keys[start : start + _CHUNK]
        if not np.array_equal(mine.view(np.uint32), seen.rows[rows[start : start + _CHUNK]].view(np.uint32)):
            return False  # the same print, other bits: taken as not among them
    return True
