"""Ingest: every input path stores trajectories here, scrubbed; bad lines are quarantined."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from flowmem.interchange import Rejection, read_trajectories, write_lines
from flowmem.models import Trajectory, as_demonstration
from flowmem.policy.scrub import DEFAULT_SCRUB, ScrubKind, scrub_text, scrub_trajectory
from flowmem.settings import Settings

if TYPE_CHECKING:  # imported when first used: an agent's writer builds its store apart
    from flowmem.storage import Store

__all__ = [
    "Conflict",
    "IngestReport",
    "Stored",
    "ingest_files",
    "quarantine",
    "store_trajectories",
]

_BATCH = 1_000

Key = tuple[str, str]
"""(namespace, id) of a trajectory."""


@dataclass(frozen=True)
class Conflict:
    """A trajectory sent under an id the store already holds with other content."""

    namespace: str
    id: str
    stored_hash: str
    """`Trajectory.content_hash` of the version in the store (which is kept)."""
    sent_hash: str
    """That of the version sent (scrubbed, as it would have been stored)."""


@dataclass(frozen=True)
class Stored:
    """What `store_trajectories` did with a sequence of trajectories."""

    keys: frozenset[Key]
    """The (namespace, id) of those it stored, new to the store (of a key given twice, the
    first copy)."""
    conflicts: Mapping[int, Conflict] = field(default_factory=dict)
    """Position in the input -> conflict, for each one not stored whose content differs from
    the stored version's; asked for with `conflicts=True`, else empty."""

    @property
    def count(self) -> int:
        """How many were new."""
        return len(self.keys)


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
    conflicts: list[Conflict] = field(default_factory=list)
    """Valid lines whose id was already stored with other content (not stored)."""

    @property
    def duplicates(self) -> int:
        """Valid lines whose trajectory was already stored."""
        return self.valid - self.stored

    def summary(self) -> str:
        """One line: `stored N, rejected M (see PATH)`."""
        line = f"stored {self.stored}"
        if self.duplicates:
            line += f" ({self.duplicates} already stored)"
        if self.conflicts:
            line += f", {len(self.conflicts)} conflicting with a stored id"
        line += f", rejected {len(self.rejected)}"
        if self.rejected and self.quarantine is not None:
            line += f" (see {self.quarantine})"
        return line


def store_trajectories(
    store: Store, trajectories: Iterable[Trajectory], scrub: Collection[ScrubKind], *, conflicts: bool = False
) -> Stored:
    """Scrub trajectories (`scrub` kinds, see `flowmem.policy.scrub`) and store them, skipping
    ids already stored; what was new. Every input path — files, the spool, the hooks, the API,
    the MCP server — stores through here, so only masked secrets and personal data reach the
    store (`Store.insert_trajectories` stores as given).

    With `conflicts`, also tells which of those not stored differ from the stored version of
    their id (compared by `Trajectory.content_hash`, after scrubbing); only ids that were
    already taken cost a read."""
    if scrub:
        trajectories = (scrub_trajectory(t, scrub) for t in trajectories)
    if not conflicts:
        return Stored(frozenset(store.insert_trajectories(trajectories)))
    sent = list(trajectories)
    stored = store.insert_trajectories(sent)
    return Stored(frozenset(stored), _conflicts(store, sent, stored))


def _conflicts(store: Store, sent: Sequence[Trajectory], stored: Set[Key]) -> dict[int, Conflict]:
    """Position in `sent` -> conflict, for each one not stored (an id taken before, or given
    twice) whose content differs from the version its id has in the store."""
    first: dict[Key, int] = {}
    for i, t in enumerate(sent):
        first.setdefault((t.namespace, t.id), i)
    kept = {key: sent[i].content_hash() for key, i in first.items() if key in stored}
    taken = sorted(key for key in first if key not in stored)
    for ns in sorted({n for n, _ in taken}):
        for t in store.get_trajectories([i for n, i in taken if n == ns], namespace=ns):
            kept[(ns, t.id)] = t.content_hash()
    found: dict[int, Conflict] = {}
    for i, t in enumerate(sent):
        key = (t.namespace, t.id)
        if first[key] == i and key in stored:
            continue
        mine = t.content_hash()
        if key in kept and kept[key] != mine:
            found[i] = Conflict(t.namespace, t.id, kept[key], mine)
    return found


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
        written = store_trajectories(store, batch, settings.scrub, conflicts=True)
        report.stored += written.count
        report.conflicts += written.conflicts.values()
        batch.clear()

    for path in paths:
        on_bytes = None if progress is None else (lambda n, p=path: progress(p, n))
        for item in read_trajectories(path, settings, progress=on_bytes):
            if isinstance(item, Rejection):
                report.rejected.append(item)
                continue
            report.valid += 1
            if demonstrations:
                item = as_demonstration(item)
            batch.append(item)
            if len(batch) >= _BATCH:
                flush()
    if batch:
        flush()
    quarantine(report.rejected, settings.quarantine_path, settings.scrub)
    return report
