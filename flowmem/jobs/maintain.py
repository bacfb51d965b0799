"""Maintain: compact every table, prune old versions, prove every run tag still reads.

What `flowmem maintain` and the scheduled `maintain` flow run. The API's group commit also
compacts the trajectories table every so many commits (`flowmem.server.service`); this job
does the whole store: compaction and pruning of every table (LanceDB `optimize`, which would
also update indexes — flowmem creates none), keeping on each workflows table every version a
run tag or a rollback needs, then a checkout of every run tag.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field

from flowmem.storage import Store
from flowmem.storage.maintenance import TableMaintenance

__all__ = ["DEFAULT_KEEP", "MaintainReport", "Maintained", "MaintainedTable", "maintain", "said"]

DEFAULT_KEEP = timedelta(minutes=5)
"""Versions younger than this are kept, so reads and writes in flight never lose their files."""

_WORKFLOWS = "workflows__"


class MaintainedTable(BaseModel):
    """One table's figures before and after a maintenance, each a `[before, after]` pair."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    versions: tuple[int, int]
    """Table versions on disk."""
    fragments: tuple[int, int]
    """Data files of the latest version."""
    files: tuple[int | None, int | None]
    """Data files on disk (null on object storage, which is not listed)."""
    rows: tuple[int | None, int | None]
    """Rows of the latest version."""
    kept_from_version: int | None = Field(default=None, exclude_if=lambda v: v is None)
    """On a workflows table, the oldest version kept for run tags and rollbacks (with every
    later one); absent elsewhere."""


class Maintained(BaseModel):
    """What a maintenance run did, in figures: the same object for `flowmem maintain --json`
    (this model's JSON) and the maintain flow's result."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    keep_seconds: float
    """Versions younger than this were kept."""
    tables: dict[str, MaintainedTable]
    """Each table by name, before and after."""
    tags_checked: int
    """Run tags checked out after the maintenance, each readable."""


class MaintainReport(BaseModel, frozen=True):
    """What a maintenance run did."""

    tables: list[TableMaintenance]
    """Each table, before and after."""
    tags: dict[str, int]
    """Every run tag of every workflows table (`namespace/tag`), checked out after the
    maintenance, with its row count."""
    keep_seconds: float
    """Versions younger than this were kept."""

    def summary(self) -> Maintained:
        """Versions, files and rows before and after per table, and the tags checked."""
        return Maintained(
            keep_seconds=self.keep_seconds,
            tables={
                t.before.table: MaintainedTable(
                    versions=(t.before.versions, t.after.versions),
                    fragments=(t.before.fragments, t.after.fragments),
                    files=(t.before.files, t.after.files),
                    rows=(t.before.rows, t.after.rows),
                    kept_from_version=t.kept_from,
                )
                for t in self.tables
            },
            tags_checked=len(self.tags),
        )

    def lines(self) -> list[str]:
        """What the run did, in words and figures: one line per table, one for the keep and
        one for the run tags; a figure that is not known (data files on object storage) is
        said to be unknown, never printed as a number it is not."""
        if self.keep_seconds:
            pruned = f"table versions older than {self.keep_seconds:g} s (--keep)"
        else:
            pruned = "every table version older than the latest (--keep 0)"
        out = [
            f"Compacted every table's data files and pruned {pruned}, "
            "except those that run tags and rollbacks need."
        ]
        out += [said(t) for t in self.tables]
        names = sorted(self.tags)
        if not names:
            out.append("No run tag to check out.")
        else:
            shown = ", ".join(f"{n} ({_plural(self.tags[n], 'row')})" for n in names[:_SHOWN_TAGS])
            more = f" and {len(names) - _SHOWN_TAGS} more" if len(names) > _SHOWN_TAGS else ""
            out.append(f"{_plural(len(names), 'run tag')} checked out, each readable: {shown}{more}.")
        return out


_SHOWN_TAGS = 5
"""Run tags named in `MaintainReport.lines` (the rest are counted)."""


def _plural(n: int, unit: str) -> str:
    return f"{n:,} {unit}{'' if n == 1 else 's'}"


def _change(before: int, after: int, unit: str, fewer: str, more: str = "more") -> str:
    """`12 table versions -> 1 (11 pruned)`, `... (unchanged)`, `... (3 more)`."""
    if after < before:
        how = f"{before - after:,} {fewer}"
    elif after > before:
        how = f"{after - before:,} {more}"
    else:
        how = "unchanged"
    return f"{_plural(before, unit)} -> {after:,} ({how})"


def said(t: TableMaintenance) -> str:
    """One table's maintenance in words: table versions, data files of the latest version
    (fragments), data files on disk (or that they were not counted) and rows, before -> after."""
    b, a = t.before, t.after
    versions = _change(b.versions, a.versions, "table version", "pruned", "more: the compaction's commits")
    if t.kept_from is not None:
        versions += f"; every one from v{t.kept_from} on kept, for the run tags and rollbacks"
    parts = [
        versions,
        _change(b.fragments, a.fragments, "data file", "compacted away") + " in the latest version",
    ]
    if b.files is None or a.files is None:
        parts.append("data files on disk: not counted (object storage is not listed)")
    else:
        parts.append(_change(b.files, a.files, "data file", "removed") + " on disk")
    if b.rows is not None and a.rows is not None:
        parts.append(_plural(a.rows, "row") + (" (unchanged)" if a.rows == b.rows else f" (were {b.rows:,})"))
    return f"{b.table}: " + "; ".join(parts) + "."


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
