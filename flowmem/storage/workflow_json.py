"""A served version's `Workflow`, read from its Arrow row as one JSON document.

A search builds the `Workflow` of each hit (two or three a search) from the served columns
(`storage.served.ServedRows`). Read value by value (`as_py` per column, `json.loads` per JSON
column, then one validation of the nested dicts) that cost ~36 µs a hit after the ANN's
search had taken the CPU caches. Here the row is written out as one JSON text instead, its
JSON columns (steps, parameters, pitfalls, provenance: stored as JSON) copied in as they are,
its text columns sliced straight out of their Arrow buffers, and its live status, stats and
creation time written in; pydantic parses and validates it in one call (its parser is in
Rust): ~32 µs a hit alone after the ANN's search, ~20 µs with warm caches; a search's hits
as one JSON array, in one call.

A row the JSON route refuses (a lone surrogate's escape in a stored text, say) is read the
old way, `rows.workflow_from_row`, so that what is served, and any error, is the same as
before."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
from pydantic import ValidationError

from flowmem.models import UsageStats, Workflow
from flowmem.storage import rows

if TYPE_CHECKING:
    import pyarrow as pa
    from pydantic import TypeAdapter

__all__ = ["WorkflowReader"]

_JSON = ("steps", "parameters", "pitfalls", "provenance")
"""Columns stored as JSON text: copied into the document as they are."""
_TEXT = ("id", "name", "description")
_FEW = ("scope", "agent", "namespace", "kind")
"""Text columns of a few distinct values: encoded once, each value quoted once."""
_NUMBER = ("version", "parent_version", "cluster_id")
_quoted: Callable[[str], str] = json.encoder.encode_basestring_ascii


def _text(array: pa.Array) -> Callable[[int], str]:
    """The text at a row of a string column: sliced out of its Arrow buffers when it has no
    nulls (~0.25 µs), else read by `as_py` (~0.5 µs)."""
    import pyarrow as pa

    kind = array.type
    if array.null_count == 0 and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        width = np.int64 if pa.types.is_large_string(kind) else np.int32
        _, offsets_buffer, data = array.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=width)[array.offset : array.offset + len(array) + 1]
        view = memoryview(data if data is not None else b"")
        return lambda i: str(view[offsets[i] : offsets[i + 1]], "utf-8")
    return lambda i: array[i].as_py()


def _few(array: pa.Array, default: str | None = None) -> Callable[[int], str]:
    """The quoted JSON text at a row of a column of few distinct values (`default` for a null:
    none allowed without one)."""
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(array)
    values = [_quoted(v) if v is not None else "null" for v in encoded.dictionary.to_pylist()]
    codes = encoded.indices.fill_null(len(values)).to_numpy(zero_copy_only=False)
    values.append(_quoted(default) if default is not None else "null")
    return lambda i: values[codes[i]]


def _number(array: pa.Array) -> Callable[[int], str]:
    """The JSON text of an integer column's value at a row (`null` for a null)."""
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    numbers = array.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    return lambda i: str(int(numbers[i])) if valid[i] else "null"


@functools.cache
def _many() -> TypeAdapter[list[Workflow]]:
    """The validator of a JSON array of workflows (made, and pydantic's `TypeAdapter` imported,
    on the first search rather than at import)."""
    from pydantic import TypeAdapter

    return TypeAdapter(list[Workflow])


class WorkflowReader:
    """Builds the `Workflow` at a row of the served columns (one chunk each)."""

    def __init__(self, columns: dict[str, pa.Array]) -> None:
        self.columns = columns
        self._quoted = [(f',"{name}":', _text(columns[name])) for name in _TEXT]
        self._few = [
            (f',"{name}":', _few(columns[name], "task" if name == "kind" else None))
            for name in _FEW
            if name in columns
        ]
        if "kind" not in columns:  # versions from before schema v2 have none
            self._few.append((',"kind":', lambda i: '"task"'))
        self._numbers = [(f',"{name}":', _number(columns[name])) for name in _NUMBER]
        self._json = [(f',"{name}":', _text(columns[name])) for name in _JSON]
        self._sources = columns["source_trajectory_ids"]

    def document(self, i: int, *, status: str, stats: UsageStats, created_at: datetime) -> str:
        """The JSON document of the row at position i, with this live status and stats and
        this creation time (every field of `rows.WORKFLOW_FIELDS`)."""
        parts = [
            f'{{"status":{_quoted(status)},"stats":{stats.model_dump_json()},'
            f'"created_at":"{created_at.isoformat()}"'
        ]
        for label, read in self._quoted:
            parts += (label, _quoted(read(i)))
        for label, read in (*self._few, *self._numbers, *self._json):
            parts += (label, read(i))
        sources = self._sources[i].as_py() or []
        parts.append(f',"source_trajectory_ids":[{",".join(map(_quoted, sources))}]}}')
        return "".join(parts)

    def workflows(
        self,
        positions: Sequence[int],
        statuses: Sequence[str],
        stats: Sequence[UsageStats],
        created: Sequence[datetime],
    ) -> list[Workflow]:
        """The `Workflow`s at these positions, with these live statuses, stats and creation
        times: one JSON array, validated in one call (a search's hits: the validator's code is
        brought back into the CPU's caches once, not once a hit); row by row when it refuses."""
        items = list(zip(positions, statuses, stats, created, strict=True))
        try:
            documents = [self.document(i, status=s, stats=u, created_at=c) for i, s, u, c in items]
            return _many().validate_json(f"[{','.join(documents)}]")
        except (ValidationError, ValueError, KeyError):
            return [self.workflow(i, status=s, stats=u, created_at=c) for i, s, u, c in items]

    def workflow(self, i: int, *, status: str, stats: UsageStats, created_at: datetime) -> Workflow:
        """The `Workflow` at position i, with its live status and stats."""
        try:
            document = self.document(i, status=status, stats=stats, created_at=created_at)
            return Workflow.model_validate_json(document)
        except (ValidationError, ValueError, KeyError):  # read the old way: the same result, or error
            row = {
                name: column[i].as_py()
                for name, column in self.columns.items()
                if name in rows.WORKFLOW_FIELDS
            }
            row["created_at"] = created_at
            return rows.workflow_from_row(row, status=status, stats=stats)
