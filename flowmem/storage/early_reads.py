"""Reads of a local store through Lance itself while LanceDB is still being loaded.

An agent opens its memory and searches at once. Its writer thread loads LanceDB meanwhile
(`WorkflowMemory`): ~0.6-1 s on a 2-core machine, most of it building the pydantic models of
LanceDB's namespace client, which a local store never uses. Every read went through that
connection, so the first search waited for it, whatever the store's size (~0.8 s of the
~1.2 s a first search took on a store of 100 workflows). Lance, which LanceDB's tables are
made of, imports in ~0.13 s and reads the same tables.

So until the connection is open, `StoreBase._table` hands out an `EarlyTable` for a table of
a local store: the reads a search makes (`lance_ops.select`, `scans.arrow_batches`, a table's
`version`, `schema` and `uri`) go through Lance; anything else (a write, an index, a tag)
waits for the connection and goes to LanceDB's table, as before. Once the connection is open,
every call goes to LanceDB's table, so only what is read before it differs, and then only in
which library reads the same files: an agent's first search, whose writer opens the
connection meanwhile; and every read of a `Store` that has not written (a process that only
reads one, without a memory's writer, never loads LanceDB).

It is used only where reading first cannot differ from connecting first (`early_table`): a
local store (not object storage, whose connection also checks the endpoint), whose meta
table records this flowmem's schema version (connecting would migrate an older store and
refuse a newer one), a table that exists (connecting would create a missing one), whose
vectors are of the configured embedder (connecting would raise). Otherwise the reader waits
for the connection, as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from flowmem.storage.location import local_path

__all__ = ["EarlyTable", "SchemaCheck", "early_table"]


class EarlyTable:
    """One table of a local store, read through Lance until LanceDB's connection is open; every
    other use, and every use once it is open, goes to LanceDB's table (`real`)."""

    def __init__(self, path: Path, real: Callable[[], Any], connected: Callable[[], bool]) -> None:
        self._path = path
        self._real = real
        """LanceDB's handle of this table (opened through the connection, waiting for it)."""
        self._connected = connected

    @property
    def uri(self) -> str:
        """The table's directory, as LanceDB's handle of a local table names it."""
        return str(self._path)

    @property
    def version(self) -> int:
        """The table's latest version."""
        if self._connected():
            return int(self._real().version)
        return int(self._dataset().version)

    @property
    def schema(self) -> Any:
        """The table's Arrow schema (with its metadata: the embedder of its vectors)."""
        if self._connected():
            return self._real().schema
        return self._dataset().schema

    def search(self) -> Any:
        """A query of the table's rows (`where`, `select`, `limit`, then `to_arrow` or
        `to_batches`), through Lance while the connection is not open."""
        if self._connected():
            return self._real().search()
        return _Query(self)

    def to_arrow(self) -> Any:
        """Every row of the table, in Arrow."""
        if self._connected():
            return self._real().to_arrow()
        return self._dataset().to_table()

    def __getattr__(self, name: str) -> Any:  # asked only for what this class does not define
        if name.startswith("__") or name in ("_path", "_real", "_connected"):
            raise AttributeError(name)  # a copy's or pickle's probe: not LanceDB's table
        return getattr(self._real(), name)

    def _dataset(self) -> Any:
        """The table as a Lance dataset at its latest version (opened anew for each read, as
        LanceDB's connection with no read-consistency interval reads the latest)."""
        from flowmem.storage.lance_ops import lance_dataset

        return lance_dataset(str(self._path))


class _Query:
    """The subset of LanceDB's plain (not vector) query that the store's reads use, through
    Lance: a filter, the columns, a limit; then the rows at once or in batches."""

    def __init__(self, table: EarlyTable) -> None:
        self._table = table
        self._where: str | None = None
        self._columns: list[str] | None = None
        self._limit: int | None = None

    def where(self, where: str) -> _Query:
        self._where = where
        return self

    def select(self, columns: Sequence[str]) -> _Query:
        self._columns = list(columns)
        return self

    def limit(self, limit: int | None) -> _Query:
        self._limit = limit
        return self

    def to_arrow(self) -> Any:
        """The rows, as one Arrow table."""
        dataset = self._table._dataset()
        return dataset.to_table(columns=self._columns, filter=self._where, limit=self._limit)

    def to_batches(self, batch_size: int | None = None) -> Iterator[Any]:
        """The rows, as Arrow record batches of at most `batch_size` rows."""
        dataset = self._table._dataset()
        kw: dict[str, Any] = {} if batch_size is None else {"batch_size": batch_size}
        yield from dataset.to_batches(columns=self._columns, filter=self._where, limit=self._limit, **kw)

    def __getattr__(self, name: str) -> Any:  # another way to run it: LanceDB's query, alike
        if name.startswith("__") or name in ("_table", "_where", "_columns", "_limit"):
            raise AttributeError(name)
        query = self._table._real().search()
        if self._where is not None:
            query = query.where(self._where)
        if self._columns is not None:
            query = query.select(self._columns)
        return getattr(query.limit(self._limit), name)


class SchemaCheck:
    """Whether a local store records this flowmem's schema version, read once through Lance
    (its meta table); None until asked."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answer: bool | None = None

    def holds(self, root: Path, expected: int, read: Callable[[Any, str], int]) -> bool:
        """Whether the store at `root` records schema version `expected` (`read` reads the
        version from the meta table's handle: `migrations.read_version`). False for a store
        without a meta table, or whose meta table cannot be read: the connection decides."""
        with self._lock:
            if self._answer is None:
                from flowmem.storage.migrations import META

                path = root / f"{META}.lance"
                meta = EarlyTable(path, _unconnected, lambda: False)  # read whole: `to_arrow`
                try:
                    found = path.is_dir() and read(meta, str(root)) == expected
                except Exception:  # unreadable here: the connection reads it, and says why
                    found = False
                self._answer = found
            return self._answer


def _unconnected() -> Any:
    """No LanceDB table behind a handle read only through Lance (the meta table's, above)."""
    raise AttributeError("read through Lance only")


def early_table(
    db: str,
    name: str,
    embedder_key: bytes,
    expected: bytes | None,
    schema_ok: Callable[[Path], bool],
    real: Callable[[], Any],
    connected: Callable[[], bool],
) -> EarlyTable | None:
    """An `EarlyTable` of table `name` of the store at `db`, or None where reading it before
    the connection could differ from reading it after (the module docstring): not a local
    store, its schema version not this flowmem's (`schema_ok`), the table not there, or its
    vectors not of the configured embedder (`expected`: the `embedder_key` metadata the
    table's schema must hold)."""
    root = local_path(db)
    if root is None or not schema_ok(root):
        return None
    path = root / f"{name}.lance"
    if not path.is_dir():
        return None
    table = EarlyTable(path, real, connected)
    try:
        stored = (table.schema.metadata or {}).get(embedder_key)
    except Exception:  # not a table Lance can read here: the connection says why
        return None
    return table if stored == expected else None
