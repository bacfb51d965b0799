"""The stored runs' task words and templates (`retrieval.cover.Evidence`), worked out by Arrow's
kernels over the task column the evidence read holds.

`Evidence` works out, from its runs' task texts, which words at least `share` of the distinct
texts hold (the rest are example values) and each run's `task_template`: a regular expression
per text, then a pass of Python over every text's words, ~0.7 s of CPU at 100k runs (2-core
Xeon, under load). Here the same figures come from one regular-expression split of the whole
column, a count of each distinct text's distinct words by numpy, and one join per template:
~0.3 s. Only for columns of ASCII text, where `str.casefold` is Arrow's `ascii_lower` and
Python's `\\w` is `[a-z0-9_]` once lowered; any other column (None here) is worked out by
`Evidence` itself. `tests/test_task_shapes.py` holds the two to each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from flowmem.retrieval.unique import grouped, sorted_unique

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["task_shapes"]

_SEPARATORS = "[^a-z0-9_]+"
"""What lies between two words of a lowered ASCII text (`retrieval.cover`'s `\\w+`, casefolded)."""


def task_shapes(tasks: pa.Array | pa.ChunkedArray, share: float) -> tuple[frozenset[str], list[str]] | None:
    """The words at least `share` of the distinct task texts hold (texts told apart by their
    words, as `Evidence` tells them), and each task's `task_template` with them; None when the
    column is empty, holds a null, or holds a text that is not ASCII."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(tasks, pa.ChunkedArray):
        tasks = tasks.combine_chunks()
    if not pa.types.is_string(tasks.type):  # the kernels below take `string` (32-bit offsets)
        try:
            tasks = tasks.cast(pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
    if not len(tasks) or tasks.null_count or not pc.all(pc.string_is_ascii(tasks)).as_py():
        return None
    split = pc.split_pattern_regex(pc.ascii_lower(tasks), _SEPARATORS)
    flat = pc.list_flatten(split)
    word = pc.not_equal(pc.binary_length(flat), 0)  # the empty ends of a text, left out
    words = flat.filter(word)
    owners = pc.list_parent_indices(split).filter(word).to_numpy()
    offsets = np.zeros(len(tasks) + 1, dtype=np.int32)
    np.cumsum(np.bincount(owners, minlength=len(tasks)), out=offsets[1:])
    bounds = pa.array(offsets)
    said = pc.binary_join(pa.ListArray.from_arrays(bounds, words), " ")
    # One text of each distinct sequence of words counts; each of its words once.
    keys = pc.dictionary_encode(said).indices.to_numpy()
    counted = np.zeros(len(tasks), dtype=np.bool_)
    first, _ = grouped(keys)
    counted[first] = True
    encoded = pc.dictionary_encode(words)
    vocabulary, codes = encoded.dictionary, encoded.indices.to_numpy().astype(np.int64)
    chosen = counted[owners]
    pairs = sorted_unique(owners[chosen].astype(np.int64) * len(vocabulary) + codes[chosen])
    held = np.bincount(pairs % max(len(vocabulary), 1), minlength=len(vocabulary))
    frequent = held >= share * len(first)
    shown = pc.if_else(pa.array(frequent[codes], type=pa.bool_()), words, "_")
    templates = pc.binary_join(pa.ListArray.from_arrays(bounds, shown), " ").to_pylist()
    return frozenset(vocabulary.filter(pa.array(frequent, type=pa.bool_())).to_pylist()), templates
