"""The successful stored runs search chooses with when a task recurs (`retrieval.cover.Evidence`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from flowmem.retrieval.cover import Evidence
from flowmem.settings import Settings
from flowmem.storage.scans import BATCH, arrow_batches
from flowmem.storage.store import Store
from flowmem.storage.task_shapes import task_shapes

_COLUMNS = ("id", "created_at", "task", "actions", "vector", "success")

__all__ = ["evidence_of", "newest_successes"]


def evidence_of(store: Store, namespace: str, settings: Settings) -> Evidence:
    """The newest `settings.evidence_limit` successful runs of `namespace` (none when serving
    does not choose by evidence: `settings.cover_weight` is None)."""
    limit = 0 if settings.cover_weight is None else settings.evidence_limit
    return newest_successes(store, namespace, limit, share=settings.literal_share)


def newest_successes(
    store: Store, namespace: str, limit: int, *, share: float = 0.1, batch_size: int = BATCH
) -> Evidence:
    """The newest `limit` successful runs of `namespace` as evidence (ties by id; `share`: the
    literal share its task words are told apart with), and the task vectors of the newest
    `limit` other runs (failed, or of no known outcome) as what else the namespace has seen;
    read in batches: at most `limit` runs of each and one batch are held at once.

    In Arrow until the end: each outcome's newest rows kept as a table, trimmed to `limit` by
    Arrow's sort as batches come, and only the tasks and actions of the rows kept turned into
    Python lists once (at 100k runs ~0.3 s against ~0.8–2 s for every column of every batch
    as Python lists, their creation times as `datetime`s, sorted in Python)."""
    won, other = _Newest(), _Newest()
    if limit > 0:
        import pyarrow.compute as pc

        for batch in arrow_batches(store, _COLUMNS, namespace=namespace, batch_size=batch_size):
            succeeded = pc.fill_null(pc.equal(batch.column("success"), True), False)
            won.add(batch.filter(succeeded), limit)
            other.add(batch.filter(pc.invert(succeeded)), limit)
    dim = store.embedder.dim
    column = won.arrow("task")
    tasks, others = ([] if column is None else column.to_pylist()), other.column("task")
    return Evidence(
        tasks,
        [a or [] for a in won.column("actions")],
        won.vectors(dim),
        share,
        others=_others(set(tasks), others, other.vectors(dim)),
        shapes=None if column is None else task_shapes(column, share),
    )


class _Newest:
    """The newest runs read so far as one Arrow table, at most a limit of them (created_at
    descending, id ascending: Arrow's sort is stable, ties in the order read)."""

    _ORDER = (("created_at", "descending"), ("id", "ascending"))

    def __init__(self) -> None:
        self._parts: list[Any] = []
        self._rows = 0
        self._order: tuple[Any, Any] | None = None
        """The rows kept as one table and their order, newest first, once worked out (`ordered`)."""

    def add(self, batch: Any, limit: int) -> None:
        """A batch's rows added, and the newest `limit` of all kept when there are more."""
        if not batch.num_rows:
            return
        import pyarrow as pa

        self._parts.append(pa.Table.from_batches([batch]))
        self._rows += batch.num_rows
        self._order = None
        if self._rows > limit:
            table = self._table()
            self._parts = [table.take(self._sorted(table)[:limit])]
            self._rows = limit

    def _table(self) -> Any:
        import pyarrow as pa

        return pa.concat_tables(self._parts) if self._parts else None

    @classmethod
    def _sorted(cls, table: Any) -> Any:
        import pyarrow.compute as pc

        return pc.sort_indices(table, sort_keys=list(cls._ORDER))

    def ordered(self) -> tuple[Any, Any] | None:
        """The rows kept as one table, and their positions newest first (None: none): each
        column is taken in that order when asked for, not the whole table (its vectors ~150 MB
        at 100k runs) before."""
        if self._order is None and self._parts:
            table = self._table()
            self._order = (table, self._sorted(table))
        return self._order

    def column(self, name: str) -> list[Any]:
        """A column of the rows kept, newest first, as a list."""
        found = self.arrow(name)
        return [] if found is None else found.to_pylist()

    def arrow(self, name: str) -> Any:
        """A column of the rows kept, newest first, in Arrow (None: no rows kept)."""
        found = self.ordered()
        return None if found is None else found[0].column(name).take(found[1])

    def vectors(self, dim: int) -> npt.NDArray[np.float32]:
        """The task vectors of the rows kept, newest first, as one float32 matrix."""
        found = self.ordered()
        if found is None or not len(found[1]):
            return np.zeros((0, dim), dtype=np.float32)
        taken = found[0].column("vector").take(found[1]).combine_chunks()
        flat = taken.flatten().to_numpy(zero_copy_only=False)
        return np.ascontiguousarray(flat, dtype=np.float32).reshape(len(found[1]), dim)


def _others(kept: set[str], tasks: list[str], vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The vectors of the distinct task texts not in `kept`, each once (the first of its runs)."""
    first: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task not in kept:
            first.setdefault(task, i)
    return vectors[sorted(first.values())]
