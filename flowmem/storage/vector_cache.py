"""A persistent embedding cache in the store's database (for network embedders)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import numpy as np

from flowmem.retrieval.embed import Vectors
from flowmem.storage import rows
from flowmem.storage.lance_ops import quote, retry_conflicts, select

__all__ = ["StoreVectorCache"]


class StoreVectorCache:
    """Embeddings by content hash in a table of the database at `uri` (one table per
    embedder), so a network embedder embeds a text once across processes.

    It opens its own connection on first use: the store receives the embedder this cache
    serves, so the cache cannot borrow the store's.
    """

    def __init__(
        self, uri: str, embedder: str, dim: int, *, storage_options: Mapping[str, str] | None = None
    ) -> None:
        self.uri, self.dim = uri, dim
        self.storage_options = dict(storage_options) if storage_options else None
        """The store's (`flowmem.storage.object_store.storage_options`)."""
        self.name = "embeddings__" + "".join(c if c.isalnum() else "_" for c in embedder)
        self._table: Any = None

    def table(self) -> Any:
        """The cache table, created on first use."""
        if self._table is None:
            from flowmem.storage.lance_import import load_lancedb

            lancedb = load_lancedb()

            db = lancedb.connect(
                self.uri, read_consistency_interval=timedelta(0), storage_options=self.storage_options
            )
            schema = rows.vector_cache_schema(self.dim)
            try:
                self._table = db.open_table(self.name)
            except ValueError:  # not there yet; another process may be creating it right now
                self._table = db.create_table(self.name, schema=schema, exist_ok=True)
        return self._table

    def get_many(self, keys: Sequence[str]) -> dict[str, Vectors]:
        """The cached vectors among `keys`."""
        table = self.table()
        found: dict[str, Vectors] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            where = f"key IN ({', '.join(quote(k) for k in chunk)})"
            for r in rows.rows_of(select(table, where)):
                found[r["key"]] = np.asarray(r["vector"], dtype=np.float32)
        return found

    def put_many(self, vectors: dict[str, Vectors]) -> None:
        """Remember vectors (a key already stored is kept as it is)."""
        if not vectors:
            return
        table = self.table()
        data = [{"key": k, "vector": v.tolist()} for k, v in vectors.items()]
        retry_conflicts(lambda: table.merge_insert("key").when_not_matched_insert_all().execute(data))
