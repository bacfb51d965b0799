"""The HNSW indexes search builds, kept on disk for the next process that opens the store.

A process that serves a store builds an HNSW of its keys and one of its stored tasks in the
background (`served_index`): at 100k of each, 20–50 s of both cores, during which its searches
score every key (~3–7 ms) and every stored run of a recurring task (~13–18 ms). Every agent
process did it again on the same vectors. Here a build is named by what it is built of
(`retrieval.ann.ann_identity`: a hash of the rows, their scale, the build's parameters and
faiss's version) and written once built; a process that needs the same one reads it
(~0.1–0.3 s at 100k) instead of building it.

A file is written under a name of its own and renamed into place, so a reader never finds one
half written, and two processes that build the same index at once write the same thing. A file
read is marked used (its time set), and past `limit` bytes the least recently used are
removed. A file that cannot be read, or is not what its name says, is logged, removed and
built anew. Nothing here is needed: an error is logged and the index built as without it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from flowmem.retrieval.ann import KeyANN, ann_available, ann_identity, build_ann
from flowmem.settings import Settings

__all__ = ["SUFFIX", "AnnCache", "built"]

logger = logging.getLogger(__name__)

SUFFIX = ".hnsw"
"""A kept index's file name: its identity, then this."""

_STALE_PART = 3600.0
"""Seconds after which a part-written file (a process that died while writing) is removed."""


@dataclass(frozen=True)
class AnnCache:
    """A directory of built HNSW indexes, by identity, at most `limit` bytes of them."""

    directory: Path
    limit: int
    """Bytes kept at most (the least recently used removed past it); one index is always kept."""

    @classmethod
    def of(cls, settings: Settings) -> AnnCache | None:
        """The settings' cache (`Settings.ann_cache_path`), or None when it keeps nothing."""
        if not settings.ann_cache_mb:
            return None
        return cls(settings.ann_cache_path, settings.ann_cache_mb * 1_000_000)

    def path(self, identity: str) -> Path:
        """Where the index of this identity is kept."""
        return self.directory / f"{identity}{SUFFIX}"

    def load(self, identity: str, rows: int, dim: int) -> KeyANN | None:
        """The index of this identity (of `rows` vectors of `dim`), if kept; None otherwise,
        and when the file cannot be read (logged, and removed)."""
        path = self.path(identity)
        if not path.exists():
            return None
        try:
            found = KeyANN.read(path, rows, dim)
        except Exception:  # torn or foreign: built anew, and written over
            if not path.exists():
                return None  # removed meanwhile (another process's eviction): a miss
            logger.warning("the kept HNSW %s could not be read; building it anew", path, exc_info=True)
            path.unlink(missing_ok=True)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used: the last to be removed
        return found

    def save(self, identity: str, ann: KeyANN) -> None:
        """Keep an index (written beside, then renamed into place), and remove the least
        recently used past `limit`. An error is logged: the index is served all the same."""
        path = self.path(identity)
        part = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            ann.write(part)
            os.replace(part, path)
        except Exception:
            logger.warning("keeping the HNSW in %s failed", self.directory, exc_info=True)
            with contextlib.suppress(OSError):
                part.unlink(missing_ok=True)
            return
        self._evict(keep=path)

    def _evict(self, keep: Path) -> None:
        """Remove the least recently used indexes past `limit` (never `keep`), and part-written
        files older than `_STALE_PART`."""
        now, kept = time.time(), []
        for entry in self.directory.iterdir():
            try:
                stat = entry.stat()
            except FileNotFoundError:  # removed meanwhile by another process
                continue
            if entry.name.endswith(".part"):
                if now - stat.st_mtime > _STALE_PART:
                    entry.unlink(missing_ok=True)
            elif entry.name.endswith(SUFFIX):
                kept.append((entry == keep, stat.st_mtime, stat.st_size, entry))
        total = 0
        for is_kept, _, size, entry in sorted(kept, reverse=True):  # `keep` first, then the newest
            total += size
            if total > self.limit and not is_kept:
                entry.unlink(missing_ok=True)


def built(
    vectors: npt.NDArray[np.float32],
    scale: npt.NDArray[np.float64] | None,
    cache: AnnCache | None,
    stop: threading.Event | None = None,
) -> KeyANN | None:
    """The HNSW of these rows (scaled by `scale`) as `build_ann` builds it: read from `cache`
    when it holds one of the same identity, else built (and kept there)."""
    if cache is None or not ann_available() or not len(vectors):
        return build_ann(vectors, scale=scale, stop=stop)
    identity = ann_identity(vectors, scale)
    found = cache.load(identity, len(vectors), vectors.shape[1])
    if found is not None:
        return found
    ann = build_ann(vectors, scale=scale, stop=stop)
    if ann is not None:
        cache.save(identity, ann)
    return ann
