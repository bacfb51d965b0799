"""Schema migrations: the store records its schema version and is brought up to date on open.

The version is the `schema_version` row of the `flowmem_meta` table (key and value strings).
`StoreBase.db` calls `migrate` right after connecting, before any table is opened:

- a store without tables is new: it is stamped with `SCHEMA_VERSION`;
- a store with tables but no meta table was written by release 0.1.0: it is at version 0;
- a store at version N < `SCHEMA_VERSION` runs `STEPS[N]`, `STEPS[N + 1]`, ... in order, and
  the version is recorded after each step, so an interrupted migration resumes where it stopped;
- a store newer than `SCHEMA_VERSION` is refused with a `StoreError` (upgrade flowmem).

Two processes may open (and so migrate) the same store at once: the meta table is created
with `exist_ok`, the version is only ever raised (a conditional `merge_insert` on `key`), and
commit conflicts are retried.

To add a step (say v1 -> v2, a `kind` column on every workflows table):

1. Write one function that turns a version-1 store into a version-2 one. It must be
   idempotent (a concurrent opener or a resumed migration may run it again) and must cope
   with tables that do not exist (0.1.0 created the usage and lifecycle tables lazily)::

       def _add_workflow_kind(db: Any) -> None:
           # v1 -> v2: workflows get a `kind`; every earlier version is a "workflow".
           for name in table_names(db):
               if name.startswith("workflows__"):
                   table = db.open_table(name)
                   if "kind" not in table.schema.names:
                       table.add_columns({"kind": "'workflow'"})

2. Append it to `STEPS` (`SCHEMA_VERSION` follows), and change the schema in `rows.py` in
   the same commit, so new tables are created as the migrated ones look.
3. In `tests/test_migrations.py`, test it on a store at version 1: the output of the previous
   step on the 0.1.0 fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from flowmem.models import RunState
from flowmem.storage.errors import StoreError
from flowmem.storage.lance_ops import retry_conflicts

__all__ = ["META", "SCHEMA_VERSION", "STEPS", "migrate", "read_version", "schema_version", "table_names"]

META: Final = "flowmem_meta"
"""The table of store-wide facts: one row per key."""
_KEY: Final = "schema_version"
# Only ever raise the version: a slower process finishing an older step must not lower it.
_RAISE_ONLY: Final = "CAST(target.value AS BIGINT) < CAST(source.value AS BIGINT)"

Step = Callable[[Any], None]
"""A migration step: changes the store in place from version N to N + 1."""


def _v0_layout_is_v1(db: Any) -> None:
    """v0 -> v1: nothing to change; release 0.1.0 wrote the v1 layout but no version."""


def _workflow_kind(db: Any) -> None:
    """v1 -> v2: workflows get a `kind`; every earlier version was induced from a task cluster."""
    for name in table_names(db):
        if name.startswith("workflows__"):
            table = db.open_table(name)

            def add(table: Any = table) -> None:
                table.checkout_latest()  # a concurrent opener may have added it meanwhile
                if "kind" not in table.schema.names:
                    table.add_columns({"kind": "'task'"})

            retry_conflicts(add)


def _key_shares(db: Any) -> None:
    """v2 -> v3: workflows get `key_shares`, each retrieval key's share of its task; earlier
    versions have none (null), which search reads as whole."""
    import pyarrow as pa  # here: importing the store loads no Arrow (lancedb has by now)

    for name in table_names(db):
        if name.startswith("workflows__"):
            table = db.open_table(name)

            def add(table: Any = table) -> None:
                table.checkout_latest()
                if "key_shares" not in table.schema.names:
                    table.add_columns(pa.field("key_shares", pa.list_(pa.float32())))

            retry_conflicts(add)


def _typed_run_state(db: Any) -> None:
    """v3 -> v4: every run's `state` is a typed `RunState` (with its `version`): the untyped
    dict earlier runs kept is rewritten through `RunState.from_stored`, absent keys defaulted
    (a run that kept no fit leaves its next run to refit, as before)."""
    import pyarrow as pa  # here: importing the store loads no Arrow (lancedb has by now)

    if "runs" not in table_names(db):
        return
    table = db.open_table("runs")

    def rewrite() -> None:
        table.checkout_latest()  # a concurrent opener may have rewritten some meanwhile
        rows = table.to_arrow()
        old = rows.column("state").to_pylist()
        new = [RunState.from_stored(raw).to_stored() for raw in old]
        changed = [i for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]
        if changed:
            rows = rows.set_column(rows.schema.get_field_index("state"), "state", pa.array(new, pa.string()))
            merge = table.merge_insert(["namespace", "id"]).when_matched_update_all()
            merge.execute(rows.take(changed))

    retry_conflicts(rewrite)


STEPS: Final[tuple[Step, ...]] = (_v0_layout_is_v1, _workflow_kind, _key_shares, _typed_run_state)
"""`STEPS[n]` migrates version n to n + 1, in this order."""

SCHEMA_VERSION: Final = len(STEPS)
"""The schema version this flowmem reads and writes."""


def table_names(db: Any) -> list[str]:
    """Every table of the database, meta table included."""
    names: list[str] = []
    token = None
    while True:
        page = db.list_tables(page_token=token)
        names += page.tables
        token = page.page_token
        if not token:
            return sorted(names)


def _create_meta(db: Any, *, initial: int) -> Any:
    """The meta table, created holding version `initial` unless it exists (then it is kept)."""
    import pyarrow as pa  # here: importing the store loads no Arrow (lancedb has by now)

    row = [{"key": _KEY, "value": str(initial)}]
    schema = pa.schema(
        [pa.field("key", pa.string(), nullable=False), pa.field("value", pa.string(), nullable=False)]
    )
    try:
        return retry_conflicts(lambda: db.create_table(META, data=row, schema=schema, exist_ok=True))
    except Exception:  # a concurrent opener created it between our two calls
        return db.open_table(META)


def read_version(meta: Any, where: str) -> int:
    """The schema version the meta table's handle `meta` records (0: none; `where`: the
    store's location, for the message of an unreadable one)."""
    values = [r["value"] for r in meta.to_arrow().to_pylist() if r["key"] == _KEY]
    try:
        return int(values[0]) if values else 0
    except ValueError:
        raise StoreError(f"the store at {where} records an unreadable schema version {values[0]!r}") from None


def _record(meta: Any, version: int, where: str) -> None:
    row = [{"key": _KEY, "value": str(version)}]

    def write() -> None:
        meta.checkout_latest()  # a retry after a conflict must see the winner's commit
        if read_version(meta, where) < version:
            merge = meta.merge_insert("key").when_matched_update_all(where=_RAISE_ONLY)
            merge.when_not_matched_insert_all().execute(row)

    retry_conflicts(write)


def schema_version(db: Any) -> int | None:
    """The schema version a store records (None when it has no meta table)."""
    try:
        meta = db.open_table(META)
    except ValueError:
        return None
    return read_version(meta, str(db.uri))


def migrate(db: Any, *, where: str) -> int:
    """Bring the store on connection `db` to `SCHEMA_VERSION`; returns the version.

    Args:
        db: A LanceDB connection, before any table is opened through it.
        where: The store's location, for messages.

    Raises:
        StoreError: if the store is newer than this flowmem, or records no readable version.
    """
    try:
        meta = db.open_table(META)
    except ValueError:
        new = not db.list_tables(limit=1).tables
        meta = _create_meta(db, initial=SCHEMA_VERSION if new else 0)
    version = read_version(meta, where)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the store at {where} has schema version {version}, newer than this flowmem "
            f"understands ({SCHEMA_VERSION}): upgrade flowmem"
        )
    for step in range(version, SCHEMA_VERSION):
        STEPS[step](db)
        _record(meta, step + 1, where)
    return SCHEMA_VERSION
