"""Maintain: compact every table, prune old versions, prove every run tag still reads.

What `flowmem maintain` and the scheduled `maintain` flow run. The API's group commit also
compacts the trajectories table every so many commits (`flowmem.server.service`); this job
does the whole store: compaction and pruning of every table (LanceDB `optimize`, which would
also update indexes — flowmem creates none), keeping on each workflows table every version a
run tag or a rollback needs, then a checkout of every run tag.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from flowmem.storage import Store
from flowmem.storage.maintenance import TableMaintenance

__all__ = ["DEFAULT_KEEP", "MaintainReport", "maintain"]

DEFAULT_KEEP = timedelta(minutes=5)
"""Versions younger than this are kept, so reads and writes in flight never lose their files."""

_WORKFLOWS = "workflows__"


class MaintainReport(BaseModel, frozen=True):
    """What a maintenance run did."""

    tables: list[TableMaintenance]
    """Each table, before and after."""
    tags: dict[str, int]
    """Every run tag of every workflows table (`namespace/tag`), checked out after the
    maintenance, with its row count."""
    keep_seconds: float
    """Versions younger than this were kept."""

    def summary(self) -> dict[str, Any]:
        """Versions and files before → after per table, and the tags checked (JSON-ready)."""
        return {
            "keep_seconds": self.keep_seconds,
            "tables": {
                t.before.table: {
                    "versions": [t.before.versions, t.after.versions],
                    "fragments": [t.before.fragments, t.after.fragments],
                    "files": [t.before.files, t.after.files],
                    **({"kept_from_version": t.kept_from} if t.kept_from is not None else {}),
                }
                for t in self.tables
            },
            "tags_checked": len(self.tags),
        }


def maintain(store: Store, *, keep: timedelta = DEFAULT_KEEP) -> MaintainReport:
    """Compact and prune every table of the store; then check out every run tag (a tag that
    no longer reads raises, so a maintenance that broke one never reports success)."""
    tables = [store.maintain_table(name, keep=keep) for name in store.maintained_tables()]
    tags: dict[str, int] = {}
    for t in tables:
        if t.before.table.startswith(_WORKFLOWS):
            namespace = t.before.table.removeprefix(_WORKFLOWS)
            tags |= {f"{namespace}/{tag}": n for tag, n in store.checkout_tags(namespace).items()}
    return MaintainReport(tables=tables, tags=tags, keep_seconds=keep.total_seconds())
