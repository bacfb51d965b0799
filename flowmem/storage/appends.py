"""Storing new trajectories by appending, not merging: a write that costs the same at any size.

A LanceDB `merge_insert` that skips stored keys joins the batch against the key columns of
every row, so each write costs more as the table grows (measured in LanceDB 0.40, 4 rows a
write: 14 ms at 2,000 rows, 21 ms at 100,000; an `add` of the same rows: 5.3 and 5.7 ms).
A store instead remembers the (namespace, id) of every stored trajectory as of one table
version (`KnownKeys`), appends the rows whose key it does not hold, and keeps that memory
only while the table moves by its own appends:

- when the table is at another version than the one remembered (another process wrote, or an
  update ran), the keys of the fragments added since are read before the write — what the
  other writers added, not the table; a compaction that this store ran
  (`KnownKeys.neutral`) moves no key and needs no read. The first write reads every key;
- when something else committed between that look and the append, the append is checked
  (and the next write catches up): a key that the table held at the version just before it
  was stored by an earlier commit, which keeps it, and this append's row of it (told by its
  `stored_at`) is deleted. Of two writers that store a key at once, the later commit always
  sees the earlier one, so the key ends stored once — what a merge did not give (two
  concurrent merges of one new key both inserted it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from flowmem.storage.base import Key, KnownKeys
from flowmem.storage.lance_ops import lance_dataset, quote, retry_conflicts, select

__all__ = ["append_new"]


def append_new(
    table: Any,
    known: KnownKeys,
    keys: Sequence[Key],
    build: Callable[[list[int]], list[dict[str, Any]]],
    stored_at: datetime,
    reopen: Callable[[], Any],
    *,
    storage_options: Mapping[str, str] | None = None,
) -> set[Key]:
    """Append the rows of the keys not stored yet; returns the keys this call stored.

    `keys` are distinct; `build(positions)` makes the rows of those positions (each with
    `stored_at` as given); `reopen()` opens another handle of the table, to read an older
    version without moving `table`. `table` is a handle that does not look for newer versions
    by itself (a connection with no read-consistency interval): through one that does, the
    version an append returns is at times the latest one after it, not its own (measured in
    LanceDB 0.40: 2 of 160 concurrent appends), and the check would take its own rows for
    earlier ones. `storage_options` are the store's, to open the table through Lance."""

    def once() -> set[Key]:
        with known.lock:
            table.checkout_latest()
            version = int(table.version)
            if not known.explains(known.version, version):
                _catch_up(table.uri, known, version, storage_options)
            known.version = version
            new = [i for i, key in enumerate(keys) if key not in known.keys]
            if not new:
                return set()
            data = build(new)
            committed = int(retry_conflicts(lambda: table.add(data)).version)
            added = {keys[i] for i in new}
            if known.explains(version, committed - 1):
                known.keys |= added
                known.version = committed
                return added
            known.checks += 1  # `version` stays the last one accounted for: the next write catches up
            before = reopen()
            before.checkout(committed - 1)
            earlier = _stored(before, added)
            if earlier:
                _delete_mine(table, earlier, stored_at)
            known.keys |= added - earlier
            return added - earlier

    return _again_if_refused(once)


_ATTEMPTS = 8
"""Attempts at an append that another writer's commit made impossible to rebase."""


def _again_if_refused(append: Callable[[], set[Key]]) -> set[Key]:
    """Run an append; when Lance refuses its commit as an "Incompatible transaction" (another
    writer committed what it cannot be rebased on, e.g. a racing creation of the table, which
    commits as an overwrite), nothing of it was committed: run it again, from a fresh look at
    the table."""
    for attempt in range(_ATTEMPTS):
        try:
            return append()
        except Exception as err:  # lancedb raises plain RuntimeError for a commit it refused
            if attempt == _ATTEMPTS - 1 or "incompatible transaction" not in str(err).lower():
                raise
    raise AssertionError("unreachable")


def _catch_up(uri: str, known: KnownKeys, version: int, storage_options: Mapping[str, str] | None) -> None:
    """Bring `known` to `version`: every key on a store's first write, then only those of the
    fragments added since (other writers' appends and merges, compactions' outputs), so a
    write after another process's costs what that process wrote, not the table. A key another
    writer deleted stays known (flowmem deletes none but its own second copies)."""
    dataset = lance_dataset(uri, version=version, storage_options=storage_options)
    fragments = dataset.get_fragments()
    first = known.version < 0
    chosen = fragments if first else [f for f in fragments if f.fragment_id not in known.fragments]
    if first:
        known.keys = set()
    if chosen:
        got = dataset.scanner(columns=["namespace", "id"], fragments=chosen).to_table()
        known.keys |= set(zip(got["namespace"].to_pylist(), got["id"].to_pylist(), strict=True))
        known.keys_read += got.num_rows
    known.fragments = {f.fragment_id for f in fragments}
    if first:
        known.refreshes += 1
    else:
        known.catch_ups += 1


def _filters(keys: set[Key]) -> Iterator[tuple[str, str]]:
    """(namespace, a filter on its keys among `keys`) for each namespace of them."""
    for ns in sorted({n for n, _ in keys}):
        ids = ", ".join(quote(i) for n, i in sorted(keys) if n == ns)
        yield ns, f"namespace = {quote(ns)} AND id IN ({ids})"


def _stored(table: Any, keys: set[Key]) -> set[Key]:
    found: set[Key] = set()
    for ns, where in _filters(keys):
        found |= {(ns, i) for i in select(table, where, ["id"])["id"].to_pylist()}
    return found


def _delete_mine(table: Any, keys: set[Key], stored_at: datetime) -> None:
    when = stored_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    for _, where in _filters(keys):
        mine = f"{where} AND stored_at = TIMESTAMP '{when}'"
        retry_conflicts(lambda mine=mine: table.delete(mine))  # type: ignore[misc]
