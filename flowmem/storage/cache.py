"""A persistent embedding cache in the store (for network embedders)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from flowmem.induction.embed import Vectors
from flowmem.storage import rows
from flowmem.storage.base import _retry, quote

if TYPE_CHECKING:
    from flowmem.storage.base import StoreBase

__all__ = ["StoreVectorCache"]


class StoreVectorCache:
    """Embeddings by content hash in a table of the store (one table per embedder), so a
    network embedder embeds a text once across processes."""

    def __init__(self, store: StoreBase) -> None:
        self.store = store

    def _table(self, dim: int) -> Any:
        import pyarrow as pa

        name = "embeddings__" + "".join(c if c.isalnum() else "_" for c in self.store.embedder.name)
        schema = pa.schema([pa.field("key", pa.string()), pa.field("vector", pa.list_(pa.float32(), dim))])
        return self.store._table(name, schema)

    def get_many(self, keys: Sequence[str]) -> dict[str, Vectors]:
        """The cached vectors among `keys`."""
        table = self._table(self.store.embedder.dim)
        found: dict[str, Vectors] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            where = f"key IN ({', '.join(quote(k) for k in chunk)})"
            for r in rows.rows_of(self.store._select(table, where)):
                found[r["key"]] = np.asarray(r["vector"], dtype=np.float32)
        return found

    def put_many(self, vectors: dict[str, Vectors]) -> None:
        """Remember vectors (a key already stored is kept as it is)."""
        if not vectors:
            return
        table = self._table(len(next(iter(vectors.values()))))
        data = [{"key": k, "vector": v.tolist()} for k, v in vectors.items()]
        _retry(lambda: table.merge_insert("key").when_not_matched_insert_all().execute(data))
