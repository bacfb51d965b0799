"""The successful stored runs search chooses with when a task recurs (`retrieval.cover.Evidence`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from flowmem.retrieval.cover import Evidence
from flowmem.settings import Settings
from flowmem.storage.scans import BATCH, trajectory_batches
from flowmem.storage.store import Store

_COLUMNS = ("id", "created_at", "task", "actions", "vector", "success")

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
    literal share its task words are told apart with), and the task vectors of the newest
    `limit` other runs (failed, or of no known outcome) as what else the namespace has seen;
    read in batches: at most `limit` runs of each and one batch are held at once."""
    won, other = _Newest(store.embedder.dim), _Newest(store.embedder.dim)
    if limit > 0:
        for batch in trajectory_batches(store, _COLUMNS, namespace=namespace, batch_size=batch_size):
            for outcome, kept in ((True, won), (False, other)):
                rows = [i for i, ok in enumerate(batch["success"]) if (ok is True) == outcome]
                kept.add(batch, rows, limit)
    order, seen = won.order(), other.order()
    return Evidence(
        [won.tasks[i] for i in order],
        [won.actions[i] for i in order],
        won.vectors[order],
        share,
        others=_others({won.tasks[i] for i in order}, [other.tasks[i] for i in seen], other.vectors[seen]),
    )


class _Newest:
    """The newest runs read so far, at most a limit of them (created_at descending, id ascending)."""

    def __init__(self, dim: int) -> None:
        self.tasks: list[str] = []
        self.actions: list[list[str]] = []
        self._vectors = [np.zeros((0, dim), dtype=np.float32)]
        """The rows' vectors, a batch's at a time: joined once when asked for (`vectors`), not
        copied again with every batch (~0.4 s over 100k runs)."""
        self.created: list[Any] = []
        self.ids: list[str] = []

    @property
    def vectors(self) -> npt.NDArray[np.float32]:
        """The rows' task vectors, in the order they were added."""
        if len(self._vectors) > 1:
            self._vectors = [np.concatenate(self._vectors)]
        return self._vectors[0]

    def add(self, batch: dict[str, Any], rows: list[int], limit: int) -> None:
        self.tasks += [batch["task"][i] for i in rows]
        self.actions += [batch["actions"][i] or [] for i in rows]
        self._vectors.append(batch["vector"][rows])
        self.created += [batch["created_at"][i] for i in rows]
        self.ids += [batch["id"][i] for i in rows]
        if len(self.ids) > limit:
            keep = self.order()[:limit]
            self.tasks, self.actions = [self.tasks[i] for i in keep], [self.actions[i] for i in keep]
            self.created, self.ids = [self.created[i] for i in keep], [self.ids[i] for i in keep]
            self._vectors = [self.vectors[keep]]

    def order(self) -> list[int]:
        """Positions, newest first (ties by id)."""
        by_id = sorted(range(len(self.ids)), key=lambda i: self.ids[i])
        return sorted(by_id, key=lambda i: self.created[i], reverse=True)


def _others(kept: set[str], tasks: list[str], vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The vectors of the distinct task texts not in `kept`, each once (the first of its runs)."""
    first: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task not in kept:
            first.setdefault(task, i)
    return vectors[sorted(first.values())]
