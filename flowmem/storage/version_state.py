"""A version's live state, kept apart from its immutable content: usage stats and lifecycle
status. Apart, because a rollback restores the versions table and must not erase what was
learnt since, and because a status change is not a new version."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict

from flowmem.docstrings import attribute_descriptions
from flowmem.models import UsageStats, Workflow, now
from flowmem.policy.lifecycle import Cause, Status, Transition
from flowmem.storage import rows
from flowmem.storage.base import StoreBase
from flowmem.storage.lance_ops import compaction_only, lance_dataset, quote, retry_conflicts, select

__all__ = ["LoggedTransition", "VersionStateMixin"]


logger = logging.getLogger(__name__)

USAGE_COMPACT_EVERY = 16
"""A store's usage commits after which it compacts the usage table's files. Each outcome is one
merge commit, which adds a fragment, and a read of the table costs per fragment (~0.4 ms each
through LanceDB: 90 ms for 200 rows in 200 fragments), which every outcome and every served
index's reload after one make; `flowmem maintain` compacts hourly."""


_FIGURES: dict[tuple[int, int, int], UsageStats] = {}
"""One `UsageStats` per distinct (served, successes, failures) read, shared by every read: a
served index compares two reads' figures by identity first (`ServedRows.with_usage`)."""
_FIGURES_KEPT = 100_000
"""Distinct figures kept in `_FIGURES` at most (past it, a read makes its own)."""

USAGE_WRITTEN_KEPT = 64
"""A store's usage commits whose figures it keeps (`usage_since`), the newest."""


_COUNTS = ("served", "successes", "failures")
"""The usage table's figures, in `UsageStats`' order."""


def _distinct(counts: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct columns of a (figures, rows) matrix, as rows, and each row's index among
    them: one `lexsort` (`np.unique(axis=0)` takes longer than a dict lookup a row)."""
    count = counts.shape[1]
    order = np.lexsort(counts[::-1])
    ranked = counts[:, order]
    starts = np.ones(count, dtype=bool)
    starts[1:] = np.any(ranked[:, 1:] != ranked[:, :-1], axis=0)
    which = np.empty(count, dtype=np.int64)
    which[order] = np.cumsum(starts) - 1
    return ranked[:, starts].T, which


def _figures(served: int, successes: int, failures: int) -> UsageStats:
    """The `UsageStats` of these figures that reads share (`_FIGURES`), made if none yet."""
    found = _FIGURES.get((served, successes, failures))
    return found or _shared(UsageStats(served=served, successes=successes, failures=failures))


def _shared(stats: UsageStats) -> UsageStats:
    """The `UsageStats` a read of the same figures gives (`_FIGURES`), this one if none yet."""
    key = (stats.served, stats.successes, stats.failures)
    found = _FIGURES.get(key)
    if found is None and len(_FIGURES) < _FIGURES_KEPT:
        found = _FIGURES[key] = stats
    return found or stats


class LoggedTransition(BaseModel):
    """A status change as the lifecycle log holds it: the `Transition` and when it was logged."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra=attribute_descriptions)

    workflow_id: str
    """The workflow's stable id."""
    version: int
    """The version whose status changed."""
    old: Status
    """Its status before."""
    new: Status
    """Its status after."""
    reason: str
    """Short text with the figures."""
    cause: Cause
    """Why, as a value code can branch on."""
    at: datetime
    """When it was logged."""

    @property
    def key(self) -> tuple[str, int]:
        """The version it changed: (workflow id, version)."""
        return self.workflow_id, self.version

    @property
    def transition(self) -> Transition:
        """The change, as the lifecycle rules take it."""
        return Transition(self.workflow_id, self.version, self.old, self.new, self.reason, self.cause)


class VersionStateMixin(StoreBase):
    """Usage stats and the lifecycle log of workflow versions."""

    def _usage_table(self, namespace: str) -> Any:
        return self._table(f"usage__{namespace}", rows.usage_schema())

    def _lifecycle_table(self, namespace: str) -> Any:
        return self._table(f"lifecycle__{namespace}", rows.lifecycle_schema())

    def put_usage(self, usage: Mapping[tuple[str, int], UsageStats], *, namespace: str | None = None) -> int:
        """Store usage stats per workflow version. Returns how many versions were updated."""
        data = [{"id": i, "version": v, **u.model_dump()} for (i, v), u in usage.items()]
        if data:
            ns = self._ns(namespace)
            table = self._usage_table(ns)
            merge = (
                table.merge_insert(["id", "version"]).when_matched_update_all().when_not_matched_insert_all()
            )
            done = retry_conflicts(lambda: merge.execute(data))
            written = self._usage_written.setdefault(ns, {})
            version = getattr(done, "version", None)
            if isinstance(version, int):  # the table version this commit made
                written[version] = {key: _shared(u) for key, u in usage.items()}
                for old in sorted(written)[:-USAGE_WRITTEN_KEPT]:
                    del written[old]
            self.writes += 1
            self._usage_commits += 1
            if self._usage_commits % USAGE_COMPACT_EVERY == 0:
                self._compact(table, written)
        return len(data)

    def _compact(self, table: Any, written: dict[int, dict[tuple[str, int], Any]]) -> None:
        """Compact the usage table's files (Lance's compaction); a failure is logged, not raised:
        the table stays as it is, only slower to read, until `flowmem maintain`. The versions the
        compaction made are kept as commits of this store's that wrote no figure (`usage_since`),
        when nothing else was committed among them (`lance_ops.compaction_only`): a served index
        then applies its outcomes across them without reading the table whole (~0.3 s at 100k
        versions with usage, once every `USAGE_COMPACT_EVERY` outcomes)."""
        try:
            dataset = lance_dataset(table.uri, storage_options=self.storage_options)
            before = dataset.version
            retry_conflicts(lambda: dataset.optimize.compact_files())
            after = dataset.version
            if compaction_only(dataset, before, after):
                written.update((version, {}) for version in range(before + 1, after + 1))
        except Exception:
            logger.warning("compacting %s failed; flowmem maintain compacts it", table.name, exc_info=True)

    def add_usage(self, delta: Mapping[tuple[str, int], UsageStats], *, namespace: str | None = None) -> int:
        """Add outcome counts to the stored stats of these versions (never below 0), so a
        finished run moves the ranking at once; the learn flow recomputes them exactly from
        the stored runs. Returns how many versions were updated."""
        if not delta:
            return 0
        current = self.usage(namespace=namespace, ids=sorted({i for i, _ in delta}))
        merged = {}
        for key, d in delta.items():
            c = current.get(key, UsageStats())
            merged[key] = UsageStats(
                served=max(0, c.served + d.served),
                successes=max(0, c.successes + d.successes),
                failures=max(0, c.failures + d.failures),
            )
        return self.put_usage(merged, namespace=namespace)

    def usage_since(
        self, before: int, after: int, *, namespace: str | None = None
    ) -> dict[tuple[str, int], UsageStats] | None:
        """What changed in the usage table from version `before` to `after` when this store's
        own commits made every version between (an outcome it reported, say): the figures they
        wrote, the later over the earlier. None when any other commit is among them (another
        process's, a compaction): then only a read of the table says."""
        written = self._usage_written.get(self._ns(namespace), {})
        if after <= before or any(v not in written for v in range(before + 1, after + 1)):
            return None
        changed: dict[tuple[str, int], UsageStats] = {}
        for version in range(before + 1, after + 1):
            changed.update(written[version])
        return changed

    def usage(
        self, *, namespace: str | None = None, ids: Sequence[str] | None = None
    ) -> dict[tuple[str, int], UsageStats]:
        """Usage stats per (workflow id, version), of these workflows' versions only when `ids`
        are given (what an outcome adds to).

        Read as columns through Lance itself (LanceDB's query path took ~36 ms for 100k rows,
        Lance ~9 ms), and one `UsageStats` per distinct figures (`_distinct`), kept across reads
        (`_FIGURES`: most versions share a few), handed out by index: 100k versions with usage
        read in ~60 ms, against ~0.14 s by LanceDB and a lookup a row, ~0.5 s by a dict and a
        validation a row."""
        if ids is not None and not ids:
            return {}
        table = self._usage_table(self._ns(namespace))
        where = f"id IN ({', '.join(map(quote, ids))})" if ids is not None else None
        dataset = lance_dataset(table.uri, storage_options=self.storage_options)
        found = dataset.to_table(columns=["id", "version", *_COUNTS], filter=where)
        if not len(found):
            return {}
        counts = np.stack(
            [
                np.asarray(found.column(c).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
                for c in _COUNTS
            ]
        )
        distinct, which = _distinct(counts)
        shared = [_figures(served, successes, failures) for served, successes, failures in distinct.tolist()]
        keys = zip(found.column("id").to_pylist(), found.column("version").to_pylist(), strict=True)
        return dict(zip(keys, [shared[i] for i in which.tolist()], strict=True))

    def record_transitions(self, transitions: Iterable[Transition], *, namespace: str | None = None) -> int:
        """Append status transitions to the lifecycle log (one commit)."""
        at = now()
        data = [
            {
                "id": t.workflow_id,
                "version": t.version,
                "old": t.old,
                "new": t.new,
                "cause": t.cause,
                "reason": t.reason,
                "at": at,
            }
            for t in transitions
        ]
        if data:
            table = self._lifecycle_table(self._ns(namespace))
            retry_conflicts(lambda: table.add(data))
            self.writes += 1
        return len(data)

    def transitions(
        self, *, namespace: str | None = None, workflow_id: str | None = None
    ) -> list[LoggedTransition]:
        """The lifecycle log, oldest first (optionally of one workflow)."""
        found = rows.rows_of(select(self._lifecycle_table(self._ns(namespace)), None))
        logged = [
            LoggedTransition(
                workflow_id=r["id"],
                version=r["version"],
                old=r["old"],
                new=r["new"],
                reason=r["reason"] or "",
                cause=r["cause"] or "manual",  # `Transition`'s default
                at=r["at"],
            )
            for r in found
            if workflow_id is None or r["id"] == workflow_id
        ]
        return sorted(logged, key=lambda t: (t.at, t.workflow_id, t.version))

    def live_statuses(self, *, namespace: str | None = None) -> dict[tuple[str, int], Status]:
        """Each version's status as the lifecycle log last set it (a version it never
        changed keeps the status it was stored with)."""
        return {t.key: t.new for t in self.transitions(namespace=namespace)}

    def with_live_state(
        self, workflows: Sequence[Workflow], *, namespace: str | None = None
    ) -> list[Workflow]:
        """The versions with their current usage stats and status merged in."""
        usage = self.usage(namespace=namespace)
        status = self.live_statuses(namespace=namespace)
        out = []
        for w in workflows:
            update: dict[str, Any] = {}
            if (w.id, w.version) in usage:
                update["stats"] = usage[(w.id, w.version)]
            if (w.id, w.version) in status:
                update["status"] = status[(w.id, w.version)]
            out.append(w.model_copy(update=update) if update else w)
        return out
