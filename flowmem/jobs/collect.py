"""Collect: ingest the spool files other processes left, and the configured import paths.

The collector ingests each complete spool file (good lines stored, bad lines quarantined) and
moves it to `done/` only after its rows are committed; a file that cannot be read at all goes
to `failed/`. Ingesting is idempotent by trajectory id, so a crash between commit and move
stores nothing twice on the next run.
"""

from __future__ import annotations

import glob
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from flowmem.interchange import pending_files
from flowmem.jobs.ingest import ingest_files
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["CollectReport", "collect"]


@dataclass
class CollectReport:
    """What a collect pass did."""

    files: int = 0
    """Files ingested and moved to done/."""
    stored: int = 0
    """Trajectories newly stored."""
    duplicates: int = 0
    """Valid lines already stored."""
    rejected: int = 0
    """Lines quarantined."""
    failed_files: list[str] = field(default_factory=list)
    """Files that could not be read (moved to failed/)."""

    def summary(self) -> dict[str, int | list[str]]:
        """The figures as JSON-ready data."""
        return {
            "files": self.files,
            "stored": self.stored,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "failed_files": self.failed_files,
        }


def _import_paths(settings: Settings) -> list[Path]:
    found: list[Path] = []
    for pattern in settings.import_paths:
        found += sorted(Path(p) for p in glob.glob(pattern) if Path(p).is_file())
    return found


def collect(store: Store, settings: Settings) -> CollectReport:
    """Ingest every complete spool file (then move it to done/) and every import path."""
    report = CollectReport()
    spool = settings.spool_path
    for path in [*pending_files(spool), *_import_paths(settings)]:
        result = ingest_files([path], store, settings)
        unreadable = any(r.reason.startswith("file unreadable") for r in result.rejected)
        report.stored += result.stored
        report.duplicates += result.duplicates
        report.rejected += len(result.rejected)
        if path.parent != spool:
            continue  # an import path stays where it is; re-reading it stores nothing twice
        target = spool / ("failed" if unreadable else "done")
        target.mkdir(exist_ok=True)
        shutil.move(str(path), target / path.name)
        if unreadable:
            report.failed_files.append(path.name)
        else:
            report.files += 1
    return report
