"""The spool: a directory of JSONL files that recording hooks in other processes leave for the
`collect` flow.

A writer writes `NAME.jsonl.tmp` and renames it to `NAME.jsonl` when complete (a rename is
atomic), so the collector never reads half a file. The collector ingests each complete file
(good lines stored, bad lines quarantined) and moves it to `done/` only after its rows are
committed; a file that cannot be read at all goes to `failed/`. Ingesting is idempotent by
trajectory id, so a crash between commit and move stores nothing twice on the next run.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from flowmem.ingest import ingest_files
from flowmem.interchange import dump_record
from flowmem.models import Trajectory
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["CollectReport", "collect", "write_spool_file"]


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


def write_spool_file(spool: Path, trajectories: Iterable[Trajectory]) -> Path | None:
    """Write trajectories as one complete spool file (tmp + atomic rename); None if empty."""
    lines = [json.dumps(dump_record(t), ensure_ascii=False) for t in trajectories]
    if not lines:
        return None
    spool.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
    tmp = spool / (name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    final = spool / name
    tmp.rename(final)
    return final


def _pending(settings: Settings) -> list[Path]:
    files = sorted(
        p for p in settings.spool_path.glob("*.jsonl*") if p.is_file() and not p.name.endswith(".tmp")
    )
    for pattern in settings.import_paths:
        files += sorted(Path(p) for p in glob.glob(pattern) if Path(p).is_file())
    return files


def collect(store: Store, settings: Settings) -> CollectReport:
    """Ingest every complete spool file (then move it to done/) and every import path."""
    report = CollectReport()
    spool = settings.spool_path
    for path in _pending(settings):
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
