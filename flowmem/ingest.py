"""Ingest interchange files into the store: every valid line stored, every bad one quarantined."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flowmem.interchange import Rejection, read_trajectories
from flowmem.models import Trajectory
from flowmem.scrub import scrub_text
from flowmem.settings import DEFAULT_SCRUB, ScrubKind, Settings
from flowmem.storage import Store

__all__ = ["IngestReport", "ingest_files", "quarantine"]

_BATCH = 1_000


@dataclass
class IngestReport:
    """What an ingest did."""

    valid: int = 0
    """Valid lines read."""
    stored: int = 0
    """Of those, newly stored (the rest were already in the store)."""
    rejected: list[Rejection] = field(default_factory=list)
    """Lines that were not stored, with reasons."""
    quarantine: Path | None = None
    """Where the rejected lines were written."""

    @property
    def duplicates(self) -> int:
        """Valid lines whose trajectory was already stored."""
        return self.valid - self.stored

    def summary(self) -> str:
        """One line: `stored N, rejected M (see PATH)`."""
        line = f"stored {self.stored}"
        if self.duplicates:
            line += f" ({self.duplicates} already stored)"
        line += f", rejected {len(self.rejected)}"
        if self.rejected and self.quarantine is not None:
            line += f" (see {self.quarantine})"
        return line


def quarantine(
    rejections: Iterable[Rejection], path: Path, scrub: Collection[ScrubKind] = DEFAULT_SCRUB
) -> int:
    """Append rejections to the quarantine file, their raw lines scrubbed like stored
    trajectories (`scrub` kinds); returns how many were written."""
    items = list(rejections)
    if not items:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        for r in items:
            raw = scrub_text(r.raw, scrub) if scrub else r.raw
            fh.write(dataclasses.replace(r, raw=raw).to_json() + "\n")
    return len(items)


def ingest_files(
    paths: Sequence[Path],
    store: Store,
    settings: Settings,
    *,
    progress: Callable[[Path, int], None] | None = None,
) -> IngestReport:
    """Validate and store every line of the files, in batches; quarantine the bad lines.

    `progress(path, bytes_read)` is called as the files are read.
    """
    report = IngestReport(quarantine=settings.quarantine_path)
    batch: list[Trajectory] = []

    def flush() -> None:
        report.stored += store.add_trajectories(batch)
        batch.clear()

    for path in paths:
        on_bytes = None if progress is None else (lambda n, p=path: progress(p, n))
        for item in read_trajectories(path, settings, progress=on_bytes):
            if isinstance(item, Rejection):
                report.rejected.append(item)
                continue
            report.valid += 1
            batch.append(item)
            if len(batch) >= _BATCH:
                flush()
    if batch:
        flush()
    quarantine(report.rejected, settings.quarantine_path, settings.scrub)
    return report
