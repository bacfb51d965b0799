"""Ingest: every input path stores trajectories here, scrubbed; bad lines are quarantined."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from flowmem.interchange import Rejection, read_trajectories, write_lines
from flowmem.models import DEMONSTRATION, Trajectory
from flowmem.policy.scrub import DEFAULT_SCRUB, ScrubKind, scrub_text, scrub_trajectory
from flowmem.settings import Settings
from flowmem.storage import Store

__all__ = ["IngestReport", "ingest_files", "quarantine", "store_new_trajectories", "store_trajectories"]

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


def store_trajectories(store: Store, trajectories: Iterable[Trajectory], scrub: Collection[ScrubKind]) -> int:
    """Scrub trajectories (`scrub` kinds, see `flowmem.policy.scrub`) and store them, skipping
    ids already stored; returns how many were new. Every input path — files, the spool, the
    hooks, the API, the MCP server — stores through here, so only masked secrets and
    personal data reach the store."""
    return len(store_new_trajectories(store, trajectories, scrub))


def store_new_trajectories(
    store: Store, trajectories: Iterable[Trajectory], scrub: Collection[ScrubKind]
) -> set[tuple[str, str]]:
    """`store_trajectories`, returning the (namespace, id) of each trajectory it stored: what
    a group commit needs to tell each request how many of its own were new."""
    if scrub:
        trajectories = (scrub_trajectory(t, scrub) for t in trajectories)
    return store.insert_trajectories(trajectories)


def quarantine(
    rejections: Iterable[Rejection], path: Path, scrub: Collection[ScrubKind] = DEFAULT_SCRUB
) -> int:
    """Append rejections to the quarantine file, their raw lines scrubbed like stored
    trajectories (`scrub` kinds); returns how many were written."""
    lines = [
        dataclasses.replace(r, raw=scrub_text(r.raw, scrub) if scrub else r.raw).to_json() for r in rejections
    ]
    return write_lines(path, lines, append=True) if lines else 0


def ingest_files(
    paths: Sequence[Path],
    store: Store,
    settings: Settings,
    *,
    progress: Callable[[Path, int], None] | None = None,
    demonstrations: bool = False,
) -> IngestReport:
    """Validate and store every line of the files, in batches; quarantine the bad lines.

    `progress(path, bytes_read)` is called as the files are read. With `demonstrations`, each
    run is marked as one (`meta["demonstration"]`): workflows induced from such runs alone
    have provenance mode `offline` (AWM's offline setting).
    """
    report = IngestReport(quarantine=settings.quarantine_path)
    batch: list[Trajectory] = []

    def flush() -> None:
        report.stored += store_trajectories(store, batch, settings.scrub)
        batch.clear()

    for path in paths:
        on_bytes = None if progress is None else (lambda n, p=path: progress(p, n))
        for item in read_trajectories(path, settings, progress=on_bytes):
            if isinstance(item, Rejection):
                report.rejected.append(item)
                continue
            report.valid += 1
            if demonstrations:
                item = item.model_copy(update={"meta": {**item.meta, DEMONSTRATION: True}})
            batch.append(item)
            if len(batch) >= _BATCH:
                flush()
    if batch:
        flush()
    quarantine(report.rejected, settings.quarantine_path, settings.scrub)
    return report
