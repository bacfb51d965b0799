"""The successful stored runs search chooses with when a task recurs (`induction.cover.Evidence`)."""

from __future__ import annotations

import numpy as np

from flowmem.induction.cover import Evidence
from flowmem.settings import Settings
from flowmem.storage.store import Store

__all__ = ["evidence_of", "newest_successes"]


def evidence_of(store: Store, namespace: str, settings: Settings) -> Evidence:
    """The newest `settings.evidence_limit` successful runs of `namespace` (none when serving
    does not choose by evidence: `settings.cover_weight` is None)."""
    return newest_successes(store, namespace, 0 if settings.cover_weight is None else settings.evidence_limit)


def newest_successes(store: Store, namespace: str, limit: int) -> Evidence:
    """The newest `limit` successful runs of `namespace` as evidence."""
    if limit == 0:
        return Evidence([], [], np.zeros((0, store.embedder.dim), dtype=np.float32))
    found = store.trajectory_columns(
        ["task", "actions", "vector"], namespace=namespace, success=True, limit=limit
    )
    return Evidence(found["task"], [a or [] for a in found["actions"]], found["vector"])
