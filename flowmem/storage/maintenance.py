"""Table upkeep: compact small files, prune old table versions, keep what tags and rollbacks need.

Every small commit adds a LanceDB version and a data file; reads and merges slow down with the
number of files (a merge over 1,000 one-commit fragments took 206 ms against 17 ms compacted,
measured here). LanceDB's `optimize` compacts files, prunes versions older than a cutoff and
updates indexes (flowmem creates none). Pruning refuses to remove a tagged version, and a
rollback restores a run's untagged `base_version`, so on a workflows table the cutoff is moved
back to just before the oldest version that a run tag or a run's base version names.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flowmem.storage.base import TRAJECTORIES
from flowmem.storage.errors import StoreError
from flowmem.storage.lance_ops import lance_dataset, retry_conflicts
from flowmem.storage.migrations import table_names
from flowmem.storage.runs import RunsMixin

__all__ = ["MaintenanceMixin", "TableMaintenance", "TableState"]

_WORKFLOWS = "workflows__"
_MARGIN = timedelta(seconds=0.5)
"""Versions made this shortly before the oldest needed one are kept too: LanceDB takes its
cutoff from its own clock a few milliseconds after ours."""
_FOREVER = timedelta(days=365 * 100)

_MOVES_NO_KEY = {"Rewrite", "BaseOperation"}
"""Lance operations that add or remove no row: a compaction's rewrite, and its reservation of
fragment ids (an operation pylance 13 does not name: `BaseOperation`)."""

COMPACT_TARGET_ROWS = 8_192
"""A frequent compaction leaves fragments of this many rows alone (see `compact_trajectories`)."""


class TableState(BaseModel, frozen=True):
    """How many versions and files a table has."""

    table: str
    """The table's name."""
    versions: int
    """LanceDB versions still on disk (each one can be checked out)."""
    fragments: int
    """Fragments (data files) of the latest version: what a read or a merge goes through."""
    files: int | None
    """Data files on disk, of every version kept (None for a store that is not a local path:
    object storage is not listed)."""
    rows: int | None = None
    """Rows of the latest version (None: not read)."""


class TableMaintenance(BaseModel, frozen=True):
    """One table before and after `maintain_table`."""

    before: TableState
    """The table before."""
    after: TableState
    """The table after."""
    kept_from: int | None
    """On a workflows table, the oldest version a run tag or rollback needs (kept with every
    later one); None elsewhere."""


def _utc(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)  # LanceDB gives naive UTC


class MaintenanceMixin(RunsMixin):
    """The upkeep verbs of `Store` (which versions to keep depends on the runs)."""

    def table_state(self, name: str) -> TableState:
        """Versions and files of one table."""
        table = self.db.open_table(name)
        versions = table.list_versions()
        stats = table.stats()
        return TableState(
            table=name,
            versions=len(versions),
            fragments=int(stats["fragment_stats"]["num_fragments"]),
            files=self._files(name),
            rows=int(stats["num_rows"]),
        )

    def maintained_tables(self) -> list[str]:
        """Every table of the store, trajectories first (the one small writes fragment)."""
        names = table_names(self.db)
        return sorted(names, key=lambda n: (n != TRAJECTORIES, n))

    def needed_versions(self, namespace: str) -> set[int]:
        """The versions of a namespace's workflows table that a run tag points at or that a
        rollback would restore (every run's `base_version`)."""
        table = self._workflows(namespace)
        needed = {int(info["version"]) for info in table.tags.list().values()}
        needed |= {r.base_version for r in self.list_runs(namespace=namespace) if r.base_version is not None}
        return needed

    def maintain_table(self, name: str, *, keep: timedelta) -> TableMaintenance:
        """Compact a table's files and prune its versions older than `keep` (the latest one
        always stays; on a workflows table, so do the versions `needed_versions` names and
        every one after the oldest of them)."""
        before = self.table_state(name)
        table = self.db.open_table(name)
        if not name.startswith(_WORKFLOWS):
            self._optimize(table, keep)
            if table.list_indices():
                # Lance compacts no fragment its indexes cover with one they do not (the rows
                # appended since the trajectories' id index was built): the first pass brought
                # the index over them, the second merges them.
                self._optimize(table, keep)
            return TableMaintenance(before=before, after=self.table_state(name), kept_from=None)
        # Compact first, pruning nothing: LanceDB measures a cutoff from the time it prunes,
        # after its compaction, so the cutoff below is computed only once that is done.
        self._optimize(table, _FOREVER)
        needed = self.needed_versions(name.removeprefix(_WORKFLOWS))
        stamps = {int(v["version"]): _utc(v["timestamp"]) for v in table.list_versions()}
        present = sorted(v for v in needed if v in stamps)
        cutoff = datetime.now(UTC) - keep
        if present:
            cutoff = min(cutoff, stamps[present[0]] - _MARGIN)
        self._optimize(table, datetime.now(UTC) - cutoff)
        left = {int(v["version"]) for v in table.list_versions()}
        if lost := sorted(set(present) - left):
            raise StoreError(f"{name}: maintenance lost versions {lost} that runs need")
        return TableMaintenance(
            before=before, after=self.table_state(name), kept_from=present[0] if present else None
        )

    def compact_trajectories(self, *, keep: timedelta, target_rows: int = COMPACT_TARGET_ROWS) -> None:
        """Compact the trajectories table's recent files and prune its versions older than
        `keep`: what a writer that commits often calls every so many commits.

        Only fragments under `target_rows` rows are rewritten (Lance's own compaction,
        through `lance`: LanceDB's `optimize` rewrites every fragment under 1M rows, so each
        of its compactions cost time in proportion to the table). A compaction moves no
        trajectory, so this store's next write does not read the table's keys again."""
        table = self._trajectories()
        dataset = lance_dataset(table.uri, storage_options=self.storage_options)
        before = int(dataset.version)
        retry_conflicts(lambda: dataset.optimize.compact_files(target_rows_per_fragment=target_rows))
        if (after := int(dataset.version)) > before:
            # Lance's compaction commits twice (fragment ids reserved, then the rewrite); a
            # writer that committed between them stays unexplained.
            done = dataset.get_transactions(after - before)  # the latest first
            moved_no_key = {
                v
                for v, tx in zip(range(after, before, -1), done, strict=False)
                if tx is not None and type(tx.operation).__name__ in _MOVES_NO_KEY
            }
            with self._known.lock:
                self._known.neutral |= moved_no_key
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*older_than.*")
            dataset.cleanup_old_versions(older_than=max(keep, timedelta(0)))
        table.checkout_latest()

    def checkout_tags(self, namespace: str) -> dict[str, int]:
        """Check out every run tag of a namespace's workflows table and count its rows: a tag
        that cannot be read raises."""
        table = self.db.open_table(f"{_WORKFLOWS}{namespace}")
        counts = {}
        for name in sorted(table.tags.list()):
            table.checkout(name)
            counts[name] = int(table.count_rows())
        table.checkout_latest()
        return counts

    def _optimize(self, table: Any, older_than: timedelta) -> None:
        older_than = max(older_than, timedelta(0))
        with warnings.catch_warnings():
            # The warning says a zero cutoff breaks readers of older versions; callers choose it
            # (`flowmem maintain --keep 0` when nothing else has the store open).
            warnings.filterwarnings("ignore", message=r"optimize\(cleanup_older_than=0\)")
            retry_conflicts(lambda: table.optimize(cleanup_older_than=older_than))
        table.checkout_latest()

    def _files(self, name: str) -> int | None:
        if "://" in self.settings.db:
            return None
        data = Path(self.settings.db) / f"{name}.lance" / "data"
        return sum(1 for p in _walk(data) if p.is_file())


def _walk(path: Path) -> Iterable[Path]:
    return path.rglob("*") if path.is_dir() else ()
