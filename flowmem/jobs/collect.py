"""Collect: ingest the spool files other processes left, and the configured import paths.

The collector ingests each complete spool file (good lines stored, bad lines quarantined) and
moves it to `done/` only after its rows are committed; a file that cannot be read at all goes
to `failed/`. Ingesting is idempotent by trajectory id, so a crash between commit and move
stores nothing twice on the next run.
"""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from flowmem.interchange import pending_files
from flowmem.jobs.ingest import ingest_files
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["Collected", "collect"]


class Collected(BaseModel):
    """What a collect pass did: the same object for `flowmem run collect` (`--json`: this
    model's JSON), the collect flow's result and a cycle's summary."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    files: int
    """Spool files ingested and moved to done/."""
    stored: int
    """Trajectories newly stored."""
    duplicates: int
    """Valid lines already stored."""
    rejected: int
    """Lines quarantined."""
    failed_files: list[str]
    """Spool files that could not be read (moved to failed/)."""


def _import_paths(settings: Settings) -> list[Path]:
    found: list[Path] = []
    for pattern in settings.import_paths:
        found += sorted(Path(p) for p in glob.glob(pattern) if Path(p).is_file())
    return found


def collect(store: Store, settings: Settings) -> Collected:
    """Ingest every complete spool file (then move it to done/) and every import path."""
    files = stored = duplicates = rejected = 0
    failed_files: list[str] = []
    spool = settings.spool_path
    for path in [*pending_files(spool), *_import_paths(settings)]:
        result = ingest_files([path], store, settings)
        unreadable = any(r.reason.startswith("file unreadable") for r in result.rejected)
        stored += result.stored
        duplicates += result.duplicates
        rejected += len(result.rejected)
        if path.parent != spool:
            continue  # an import path stays where it is; re-reading it stores nothing twice
        target = spool / ("failed" if unreadable else "done")
        target.mkdir(exist_ok=True)
        shutil.move(str(path), target / path.name)
        if unreadable:
            failed_files.append(path.name)
        else:
            files += 1
    return Collected(
        files=files, stored=stored, duplicates=duplicates, rejected=rejected, failed_files=failed_files
    )
