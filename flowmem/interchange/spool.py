"""The spool: a directory of JSONL files that recording hooks in other processes leave for the
`collect` job.

A writer writes `NAME.jsonl.tmp` and renames it to `NAME.jsonl` when complete (a rename is
atomic), so the collector never reads half a file; `flowmem.jobs.collect` ingests each
complete file and moves it to `done/` (or `failed/`) afterwards.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from flowmem.interchange.jsonl import write_jsonl
from flowmem.models import Trajectory

__all__ = ["pending_files", "write_spool_file"]


def write_spool_file(spool: Path, trajectories: Iterable[Trajectory]) -> Path | None:
    """Write trajectories as one complete spool file (tmp + fsync + atomic rename); None if empty."""
    items = list(trajectories)
    if not items:
        return None
    name = f"{time.time_ns()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
    tmp = spool / (name + ".tmp")
    write_jsonl(tmp, items, durable=True)
    final = spool / name
    tmp.rename(final)
    return final


def pending_files(spool: Path) -> list[Path]:
    """The complete files waiting in the spool, oldest name first."""
    return sorted(p for p in spool.glob("*.jsonl*") if p.is_file() and not p.name.endswith(".tmp"))
