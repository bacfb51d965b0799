"""The successful stored runs search chooses with when a task recurs (`induction.cover.Evidence`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from flowmem.induction.cover import Evidence
from flowmem.settings import Settings
from flowmem.storage.scans import BATCH, trajectory_batches
from flowmem.storage.store import Store

_COLUMNS = ("id", "created_at", "task", "actions", "vector")

__all__ = ["evidence_of", "newest_successes"]


def evidence_of(store: Store, namespace: str, settings: Settings) -> Evidence:
    """The newest `settings.evidence_limit` successful runs of `namespace` (none when serving
    does not choose by evidence: `settings.cover_weight` is None)."""
    limit = 0 if settings.cover_weight is None else settings.evidence_limit
    return newest_successes(store, namespace, limit, share=settings.literal_share)


def newest_successes(
    store: Store, namespace: str, limit: int, *, share: float = 0.1, batch_size: int = BATCH
) -> Evidence:
    """The newest `limit` successful runs of `namespace` as evidence (ties by id; `share`: the
    literal share its task words are told apart with), read in batches: at most `limit` runs
    and one batch are held at once, whatever the namespace."""
    tasks: list[str] = []
    actions: list[list[str]] = []
    vectors = np.zeros((0, store.embedder.dim), dtype=np.float32)
    created: list[Any] = []
    ids: list[str] = []
    if limit > 0:
        for batch in trajectory_batches(
            store, _COLUMNS, namespace=namespace, success=True, batch_size=batch_size
        ):
            tasks += batch["task"]
            actions += [a or [] for a in batch["actions"]]
            vectors = np.concatenate([vectors, batch["vector"]])
            created += batch["created_at"]
            ids += batch["id"]
            if len(ids) > limit:  # keep the newest: (created_at descending, id ascending)
                keep = sorted(range(len(ids)), key=lambda i: ids[i])
                keep = sorted(keep, key=lambda i: created[i], reverse=True)[:limit]
                tasks, actions = [tasks[i] for i in keep], [actions[i] for i in keep]
                created, ids, vectors = [created[i] for i in keep], [ids[i] for i in keep], vectors[keep]
    order = sorted(sorted(range(len(ids)), key=lambda i: ids[i]), key=lambda i: created[i], reverse=True)
    return Evidence([tasks[i] for i in order], [actions[i] for i in order], vectors[order], share)
