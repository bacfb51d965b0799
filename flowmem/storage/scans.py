"""Reads of a namespace's trajectories that never hold all of them at once: batches of a few
columns (what a full induction run plans from, `induction.plan.catalog.scan`), and the runs of one
cluster read by id, a bounded number per query (what it induces from).

A read by id goes through a BTREE index on the trajectories' `id` column (`index_ids`, built
before the first read and rebuilt once `INDEX_SLACK` rows were appended since): without it each
`id IN (…)` filter scanned the id column of the whole table, so a namespace's reads cost the
number of reads times its size. Rows appended after the index was built are still found: Lance
scans the fragments an index does not cover, and only those.

A read of most of a namespace's runs, a group of ids at a time (a full run's clusters), is made
in one pass instead (`spill_groups`, chosen by `one_pass`): each query by id touches nearly every
fragment of the namespace (a store as filled by many small appends holds thousands), so reads
by id of every run cost the number of queries times the number of fragments, while one pass in
storage order reads each fragment once. The pass keeps each group's rows, as Arrow, in a local
temporary file (`Spill`), from which each group is read when it is induced (`spilled`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
    "PASS_SHARE",
    "READ_CHUNK",
    "TRAJECTORY_COLUMNS",
    "Spill",
    "arrow_batches",
    "index_ids",
    "one_pass",
    "spill_groups",
    "spilled",
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
PASS_SHARE = 0.5
"""Reads of groups of ids that read at least this share of a namespace's rows (counting a run
read in several groups each time) are made in one pass (`one_pass`): the pass reads every row
of the namespace, so at most twice the rows wanted, in storage order, each fragment once."""
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
    for part in arrow_batches(store, columns, namespace=namespace, batch_size=batch_size, success=success):
        yield {name: _values(part.column(name), store.embedder.dim, name) for name in columns}


def arrow_batches(
    store: Store,
    columns: Sequence[str],
    *,
    namespace: str,
    batch_size: int = BATCH,
    success: bool | None = None,
) -> Iterator[Any]:
    """Some columns of every trajectory of a namespace (only the successful or failed ones) as
    Arrow record batches of at most `batch_size` rows, in no particular order (what
    `trajectory_batches` turns into lists)."""
    where = f"namespace = {quote(store._ns(namespace))}"
    if success is not None:
        where += f" AND success = {'true' if success else 'false'}"
    query = store._trajectories().search().where(where).select(list(columns)).limit(None)
    for batch in query.to_batches(batch_size):
        for start in range(0, batch.num_rows, batch_size):  # whatever size the reader chose
            yield batch.slice(start, batch_size)


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


def one_pass(store: Store, groups: Sequence[Sequence[str]], *, namespace: str) -> bool:
    """Whether reading these groups of ids (each group's at once) is better made in one pass
    (`spill_groups`) than by id: more than one group, reading at least `PASS_SHARE` of the
    namespace's rows."""
    wanted = sum(map(len, groups))
    if len(groups) < 2 or not wanted:
        return False
    return wanted >= PASS_SHARE * store.count_trajectories(namespace=namespace)


@dataclass
class Spill:
    """The runs of groups of ids, read in one pass (`spill_groups`) and held in a local
    temporary Arrow file (a record batch per group and batch read): each group's read back by
    `spilled`. `close` removes the file."""

    directory: tempfile.TemporaryDirectory[str]
    """Where the file lies (removed by `close`)."""
    path: Path
    """The Arrow IPC file (none when no row was wanted)."""
    batches: list[list[int]] = field(default_factory=list)
    """Each group's record batches, by their number in the file."""
    reader: Any = None

    def close(self) -> None:
        """Remove the file."""
        self.reader = None
        self.directory.cleanup()

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _where(groups: Sequence[Sequence[str]]) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Each id's first group, and the further groups of those wanted in several."""
    first: dict[str, int] = {}
    more: dict[str, list[int]] = {}
    for g, ids in enumerate(groups):
        for i in ids:
            at = first.setdefault(i, g)
            if at != g and g not in more.setdefault(i, []):
                more[i].append(g)
    return first, more


def _routed(ids: list[str], first: dict[str, int], more: dict[str, list[int]]) -> tuple[list[int], list[int]]:
    """The rows of a batch that are wanted (a row once per group that wants it), and their groups."""
    rows_at: list[int] = []
    groups: list[int] = []
    for row, i in enumerate(ids):
        g = first.get(i)
        if g is None:
            continue
        rows_at.append(row)
        groups.append(g)
        for h in more.get(i, ()) if more else ():
            rows_at.append(row)
            groups.append(h)
    return rows_at, groups


def spill_groups(
    store: Store,
    groups: Sequence[Sequence[str]],
    *,
    namespace: str,
    batch_size: int = BATCH,
    directory: str | None = None,
) -> Spill:
    """The stored trajectories among each group of `ids`, read in one pass over the namespace
    in storage order (`TRAJECTORY_COLUMNS`, in batches of `batch_size` rows) and written to a
    local temporary file (in `directory`, or the system's temporary directory), a group's rows
    of each batch as one record batch: what `trajectories_by_id` of each group would read, but
    each of the table's fragments read once, not once per group. Ids not stored are left out."""
    import pyarrow as pa  # here: an agent that only records never loads Arrow

    first, more = _where(groups)
    spill = Spill(tempfile.TemporaryDirectory(prefix="flowmem-reads-", dir=directory), Path())
    spill.path = Path(spill.directory.name) / "runs.arrow"
    spill.batches = [[] for _ in groups]
    where = f"namespace = {quote(store._ns(namespace))}"
    query = store._trajectories().search().where(where).select(list(TRAJECTORY_COLUMNS)).limit(None)
    writer: Any = None
    written = 0
    try:
        for batch in query.to_batches(batch_size):
            rows_at, at = _routed(batch.column("id").to_pylist(), first, more)
            if not rows_at:
                continue
            order = np.argsort(np.asarray(at), kind="stable")
            taken = batch.take(pa.array(np.asarray(rows_at)[order]))
            sorted_at = np.asarray(at)[order]
            starts = [0, *(np.flatnonzero(np.diff(sorted_at)) + 1).tolist(), len(sorted_at)]
            if writer is None:
                options = pa.ipc.IpcWriteOptions(compression="lz4")
                writer = pa.ipc.new_file(str(spill.path), taken.schema, options=options)
            for start, end in zip(starts, starts[1:], strict=False):
                writer.write_batch(taken.slice(start, end - start))
                spill.batches[int(sorted_at[start])].append(written)
                written += 1
    except BaseException:
        spill.close()
        raise
    finally:
        if writer is not None:
            writer.close()
    return spill


def spilled(spill: Spill, group: int) -> dict[str, Trajectory]:
    """One group's trajectories of a `Spill`, by id."""
    import pyarrow as pa

    numbers = spill.batches[group]
    if not numbers:
        return {}
    if spill.reader is None:
        # Read, not mapped: a mapped file's pages read stay in the process's RSS until it ends.
        spill.reader = pa.ipc.open_file(pa.OSFile(str(spill.path)))
    table = pa.Table.from_batches([spill.reader.get_batch(n) for n in numbers])
    return {r["id"]: rows.trajectory_from_row(r) for r in rows.rows_of(table)}
