"""Helpers over LanceDB tables that know nothing of flowmem's tables: filter literals, reads,
write retries, and a table opened through Lance itself.

A leaf below `flowmem.storage.base` and `flowmem.storage.migrations` (it imports only
`flowmem.storage.errors`): the connection migrates the store on open, and the migrations
retry their writes with `retry_conflicts`, so neither may import the other's plumbing. The
`storage-leaves` import contract (pyproject.toml) keeps it so.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from flowmem.storage import object_store
from flowmem.storage.errors import StoreError

__all__ = ["compaction_only", "lance_dataset", "quote", "retry_conflicts", "select"]

T = TypeVar("T")

_LANCE_CACHE = 16 * 1024 * 1024


def quote(value: str) -> str:
    """A SQL string literal for a LanceDB filter, refusing characters that have no place there."""
    if any(ord(c) < 32 for c in value):
        raise StoreError("control characters are not allowed in ids")
    return "'" + value.replace("'", "''") + "'"


# the backoff's own generator: the `random` module's shared state is left to the caller's code
_JITTER = random.Random()


def retry_conflicts(op: Callable[[], T], *, attempts: int = 8) -> T:
    """Run a write, retrying LanceDB commit conflicts from concurrent writers with backoff."""
    for attempt in range(attempts):
        try:
            return op()
        except Exception as err:  # lancedb raises plain RuntimeError/OSError for conflicts
            text = str(err).lower()
            if attempt == attempts - 1 or ("conflict" not in text and "retry" not in text):
                raise
            if object_store.failure(err) is not None:  # a request the store refused or never
                raise  # answered (Lance's `RetryError` after its own retries): not a conflict
            time.sleep(min(2.0, 0.02 * 2**attempt) * (0.5 + _JITTER.random()))
    raise AssertionError("unreachable")


def select(table: Any, where: str | None, columns: Sequence[str] | None = None) -> Any:
    """The rows of a table that match a filter (all when `where` is empty), as Arrow."""
    query = table.search()
    if where:
        query = query.where(where)
    if columns is not None:
        query = query.select(list(columns))
    return query.limit(None).to_arrow()


def lance_dataset(
    uri: str, *, version: int | None = None, storage_options: Mapping[str, str] | None = None
) -> Any:
    """A table opened through Lance itself (what LanceDB does not expose: compaction with a
    fragment size, a version's fragments), with a bounded metadata cache and no index cache;
    `storage_options` are the store's (`flowmem.storage.object_store`)."""
    import lance

    return lance.dataset(
        uri,
        version=version,
        storage_options=dict(storage_options) if storage_options else None,
        metadata_cache_size_bytes=_LANCE_CACHE,
        index_cache_size_bytes=0,
    )


def compaction_only(dataset: Any, before: int, after: int) -> bool:
    """Whether the commits that took a table from version `before` to `after` (at least one)
    are one compaction's and nothing else, so that every row reads as it did at `before`: each
    read version `before`, and each rewrote files (`Rewrite`) or is an operation Lance's
    Python API does not name (the fragment ids a compaction reserves first: every operation
    that changes rows is named). A commit of another writer in between (an append, a merge, a
    delete, a restore), or a transaction that cannot be read, makes it False."""
    import lance

    kept = (lance.LanceOperation.Rewrite, lance.LanceOperation.BaseOperation)
    try:
        transactions = [dataset.read_transaction(v) for v in range(before + 1, after + 1)]
    except Exception:  # unreadable: not known to be a compaction's
        return False
    return bool(transactions) and all(
        t is not None and t.read_version == before and type(t.operation) in kept for t in transactions
    )
