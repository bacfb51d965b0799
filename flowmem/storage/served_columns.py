"""The served versions' columns read out of Arrow for `ServedRows`: agent and scope codes,
the key matrix in owner order (copied once from the Arrow chunks), the keys' shares, each
version's live usage and the statuses, by arrays and C-level passes rather than a Python pass
per version. Arrow is imported by the functions, so that importing the store does not load it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from flowmem.models import UsageStats

__all__ = ["by_example", "codes", "gathered", "interned", "key_matrix", "live_stats", "shares"]


def codes(values: list[str]) -> tuple[npt.NDArray[np.int32], list[str]]:
    names = sorted(set(values))
    code = {n: i for i, n in enumerate(names)}
    return np.fromiter(map(code.__getitem__, values), dtype=np.int32, count=len(values)), names


def key_matrix(
    keys: Any, rows: npt.NDArray[np.int64], dim: int, fallback: Any
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """The keys of the given rows of a `keys` column, stacked in that order, and how many each
    row has; a row without keys is keyed by its `vector` (`fallback(positions)`: the vectors
    of the rows at these positions of `rows`).

    Chunk by chunk, without combining or taking the Arrow column: at 1M keys it is 1.5 GB."""
    import pyarrow.compute as pc

    chunks = keys.chunks if keys is not None else []
    lengths = np.concatenate(
        [np.asarray(pc.fill_null(pc.list_value_length(c), 0), dtype=np.int64) for c in chunks]
        or [np.zeros(len(rows) and int(rows.max()) + 1, dtype=np.int64)]
    )
    parts = [_vectors(pc.list_flatten(c), dim) for c in chunks] or [np.zeros((0, dim), np.float32)]
    counts = lengths[rows]
    offsets = np.cumsum(counts) - counts
    where = np.repeat(np.cumsum(lengths)[rows] - counts - offsets, counts) + np.arange(int(counts.sum()))
    matrix = gathered(parts, where, dim)
    if not np.any(counts == 0):
        return matrix, counts
    # Rows without keys are keyed by their mean vector: splice them in at their place.
    missing = fallback(np.flatnonzero(counts == 0))
    parts, taken = [], 0
    for i in range(len(rows)):
        if counts[i]:
            parts.append(matrix[offsets[i] : offsets[i] + counts[i]])
        else:
            parts.append(missing[taken : taken + 1])
            taken += 1
    return np.concatenate(parts) if parts else matrix, np.maximum(counts, 1)


def gathered(
    parts: list[npt.NDArray[np.float32]], where: npt.NDArray[np.int64], dim: int
) -> npt.NDArray[np.float32]:
    """The rows at `where` of the parts stacked, in that order, copied once: every row in
    order is the parts concatenated; else each part's rows are taken straight into their
    places (not the parts concatenated first, then taken: two copies, ~0.15 s of fresh pages
    each at 100k keys of 384)."""
    sizes = np.array([len(p) for p in parts], dtype=np.int64)
    total = int(sizes.sum())
    if len(where) == total and bool(np.all(where == np.arange(total))):
        return np.concatenate(parts) if len(parts) > 1 else np.array(parts[0], dtype=np.float32)
    out = np.empty((len(where), dim), dtype=np.float32)
    starts = np.cumsum(sizes) - sizes
    part = np.searchsorted(starts, where, side="right") - 1
    by_part = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[by_part], np.arange(len(parts) + 1))
    for j in np.flatnonzero(np.diff(bounds)).tolist():
        at = by_part[bounds[j] : bounds[j + 1]]
        out[at] = parts[j][where[at] - starts[j]]
    return out


def _vectors(array: Any, dim: int) -> npt.NDArray[np.float32]:
    """A fixed-size list array of floats as a (len, dim) float32 matrix."""
    import pyarrow as pa

    values = array.flatten() if len(array) else pa.array([], pa.float32())
    return np.ascontiguousarray(values.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(-1, dim)


def live_stats(
    usage: Mapping[tuple[str, int], UsageStats], keys: Iterable[tuple[str, int]], texts: Any
) -> list[UsageStats]:
    """Each version's usage: the live figures `usage` holds, else its stored `stats` (`texts`:
    the Arrow column of their JSON, each distinct text parsed once, one object for all its
    versions); by C-level passes (`dictionary_encode`, `map`), ~20 ms at 100k versions."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(texts.combine_chunks() if hasattr(texts, "combine_chunks") else texts)
    parsed = [UsageStats.model_validate(json.loads(t)) for t in encoded.dictionary.to_pylist()]
    stored = map(parsed.__getitem__, encoded.indices.to_numpy(zero_copy_only=False).tolist())
    return list(map(usage.get, keys, stored))


def interned(column: Any) -> list[str]:
    """A string column of few distinct values (a status) as a list, one `str` object per
    distinct value, not one a row."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(column.combine_chunks() if hasattr(column, "combine_chunks") else column)
    names = [*encoded.dictionary.to_pylist(), None]  # a null: None, as `to_pylist` gives it
    codes = encoded.indices.fill_null(len(names) - 1).to_numpy(zero_copy_only=False)
    return list(map(names.__getitem__, codes.tolist()))


def by_example(table: Any) -> npt.NDArray[np.bool_]:
    """Per row, whether its keys' shares were recorded (a workflow keyed by its examples)."""
    import pyarrow.compute as pc

    if "key_shares" not in table.column_names:
        return np.zeros(len(table), dtype=bool)
    return pc.is_valid(table.column("key_shares")).to_numpy(zero_copy_only=False).astype(bool)  # type: ignore[no-any-return]


def shares(table: Any, counts: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """Per key, its recorded share; 1 for a row whose shares are missing or do not match. By
    arrays: the recorded lists' values copied where their lengths match (~5 ms at 100k
    versions, against ~0.13 s through Python lists)."""
    import pyarrow.compute as pc

    out = np.ones(int(counts.sum()), dtype=np.float64)
    if "key_shares" not in table.column_names or not len(out):
        return out
    column = table.column("key_shares").combine_chunks()
    lengths = pc.list_value_length(column).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)[:-1]
    values = column.values.to_numpy(zero_copy_only=False).astype(np.float64)
    ok = (lengths == counts) & (counts > 0)
    n = counts[ok]
    start = (np.cumsum(counts) - counts)[ok]
    step = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    out[np.repeat(start, n) + step] = values[np.repeat(offsets[ok], n) + step]
    return out
