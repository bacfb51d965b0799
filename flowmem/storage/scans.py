"""Reads of a namespace's trajectories that never hold all of them at once: batches of a few
columns (what a full induction run plans from, `induction.plan.catalog.scan`), and the runs of one
cluster read by id, a bounded number per query (what it induces from).

A read by id goes through a BTREE index on the trajectories' `id` column (`index_ids`, built
before the first read and rebuilt once `INDEX_SLACK` rows were appended since): without it each
`id IN (…)` filter scanned the id column of the whole table, so a namespace's reads cost the
number of reads times its size. Rows appended after the index was built are still found: Lance
scans the fragments an index does not cover, and only those.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from flowmem.models import Trajectory
from flowmem.storage import rows
from flowmem.storage.lance_ops import quote, retry_conflicts, select
from flowmem.storage.store import Store

__all__ = [
    "BATCH",
    "ID_INDEX",
    "INDEX_SLACK",
    "READ_CHUNK",
    "TRAJECTORY_COLUMNS",
    "index_ids",
    "trajectories_by_id",
    "trajectory_batches",
]

BATCH = 10_000
"""Rows per batch of `trajectory_batches`."""
READ_CHUNK = 5_000
"""Ids per query of `trajectories_by_id`: each query holds its rows in Arrow, as dicts and as
trajectories at once."""
ID_INDEX = "id_idx"
"""The name LanceDB gives the BTREE index on the trajectories' `id` column."""
INDEX_SLACK = 20_000
"""Rows appended since the id index was built that a read may scan (the fragments it does not
cover) before `index_ids` builds it again: a rebuild reads every id once, a read that scans the
uncovered rows pays for them each time."""
TRAJECTORY_COLUMNS = (
    "namespace", "id", "task", "agent", "parent_id", "success", "score", "final_answer", "feedback",
    "source", "group", "steps", "workflows_used", "meta", "created_at",
)  # fmt: skip
"""What `rows.trajectory_from_row` reads: not the task's vector, which as Python floats (384 per
row) would cost more than the trajectory it is read with."""


def trajectory_batches(
    store: Store,
    columns: Sequence[str],
    *,
    namespace: str,
    batch_size: int = BATCH,
    success: bool | None = None,
) -> Iterator[dict[str, Any]]:
    """Some columns of every trajectory of a namespace (only the successful or failed ones), in
    batches of at most `batch_size` rows (a list per column, `steps` as its JSON text, `vector`
    as one float32 matrix), in no particular order."""
    where = f"namespace = {quote(store._ns(namespace))}"
    if success is not None:
        where += f" AND success = {'true' if success else 'false'}"
    query = store._trajectories().search().where(where).select(list(columns)).limit(None)
    for batch in query.to_batches(batch_size):
        for start in range(0, batch.num_rows, batch_size):  # whatever size the reader chose
            part = batch.slice(start, batch_size)
            yield {name: _values(part.column(name), store.embedder.dim, name) for name in columns}


def _values(column: Any, dim: int, name: str) -> Any:
    """A column as a list, or the vectors as a float32 matrix (never 384 Python floats a row)."""
    if name != "vector":
        return column.to_pylist()
    flat = column.flatten().to_numpy() if len(column) else []
    return np.asarray(flat, dtype=np.float32).reshape(len(column), dim)


def trajectories_by_id(
    store: Store, ids: Sequence[str], *, namespace: str, chunk: int = READ_CHUNK
) -> dict[str, Trajectory]:
    """The stored trajectories among `ids`, by id (ids not stored are left out), read
    `chunk` ids per query through the id index (`index_ids`), their columns only
    (`TRAJECTORY_COLUMNS`)."""
    found: dict[str, Trajectory] = {}
    if ids:
        index_ids(store)
    ns = quote(store._ns(namespace))
    for start in range(0, len(ids), chunk):
        listed = ", ".join(quote(i) for i in ids[start : start + chunk])
        table = select(store._trajectories(), f"namespace = {ns} AND id IN ({listed})", TRAJECTORY_COLUMNS)
        found.update((r["id"], rows.trajectory_from_row(r)) for r in rows.rows_of(table))
    return found


def index_ids(store: Store, *, slack: int = INDEX_SLACK) -> bool:
    """Build the BTREE index on the trajectories' `id` column when there is none, or when more
    than `slack` rows were appended since it was built; True when it built one."""
    table = store._trajectories()
    stats = table.index_stats(ID_INDEX)
    if stats is not None and stats.num_unindexed_rows <= slack:
        return False
    from lancedb.index import BTree  # here: an agent that only records never loads LanceDB

    retry_conflicts(lambda: table.create_index("id", config=BTree(), replace=True))
    return True
