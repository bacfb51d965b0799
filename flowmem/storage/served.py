"""The served versions of a namespace as columns: what the agents' search index is built from.

One Arrow read of the workflows table, no `Workflow` object per row: the versions search may
serve (`retrieval.serving.served_versions`, with live status and stats) as numpy arrays, their
retrieval keys as one float32 matrix in owner order, and their other columns kept in Arrow so
that a hit's `Workflow` is built only when it is served (`ServedRows.workflow`). Arrow is
imported by the functions that read, so that importing the store does not load it.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from flowmem.induction.abstract.loops import decoded
from flowmem.models import UsageStats, Workflow
from flowmem.retrieval.align import Pattern
from flowmem.storage import served_columns as columns
from flowmem.storage import served_pick
from flowmem.storage.base import StoreBase
from flowmem.storage.lance_ops import quote, select
from flowmem.storage.rows import rows_of
from flowmem.storage.served_pick import Candidates
from flowmem.storage.workflow_json import WorkflowReader

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Candidates", "ServedMixin", "ServedRows"]


@dataclass(frozen=True)
class ServedRows:
    """The served versions of one namespace, by workflow id, newest first within a workflow."""

    ids: list[str]
    versions: npt.NDArray[np.int64]
    statuses: list[str]
    stats: list[UsageStats]
    """Live usage stats (the usage table's, else the row's)."""
    agents: npt.NDArray[np.int32]
    """Per version: its agent's position in `agent_names`."""
    agent_names: list[str]
    scopes: npt.NDArray[np.int32]
    scope_names: list[str]
    keys: npt.NDArray[np.float32]
    """Every version's retrieval keys, one row each, a version's keys together in order."""
    owners: npt.NDArray[np.int64]
    """Per key: the position of its version."""
    shares: npt.NDArray[np.float64]
    """Per key: its share of its task (1 where none is recorded)."""
    subroutine: npt.NDArray[np.bool_]
    """Per version: whether it is a sub-routine (`retrieval.serving.compose` looks at those)."""
    by_example: npt.NDArray[np.bool_]
    """Per version: whether it is keyed by example tasks with their shares (its source tasks,
    as induction commits it) rather than by the embedding of its own name, description and
    actions (a workflow committed without keys)."""
    table: Any = field(repr=False)
    """The versions' other columns (Arrow), read for the workflows that are served."""
    _chunks: dict[str, pa.Array] = field(default_factory=dict, repr=False, compare=False)
    """`table`'s columns by name, each its one chunk: looked up once, not per hit."""
    _micros: npt.NDArray[np.int64] | None = field(default=None, repr=False, compare=False)
    """`created_at` in microseconds (`_created`), read once."""
    _reader: WorkflowReader | None = field(default=None, repr=False, compare=False)
    """What builds a served version's `Workflow` (`workflows`), made on the first."""
    _sources: frozenset[str] | None = field(default=None, repr=False, compare=False)
    """`sources`, read once."""
    usage: Mapping[tuple[str, int], UsageStats] = field(default_factory=dict, repr=False, compare=False)
    """The usage table's figures `stats` were read with: `with_usage` changes only the versions
    whose figures differ from these."""
    candidates: Candidates | None = field(default=None, repr=False, compare=False)
    """What the whole read these rows come from chose among (`restatus`)."""
    picked: npt.NDArray[np.int64] | None = field(default=None, repr=False, compare=False)
    """Per version: its position in `candidates`."""
    lifecycle: Mapping[tuple[str, int], str] = field(default_factory=dict, repr=False, compare=False)
    """The lifecycle log's statuses these versions were picked with (`restatus` picks again
    only the workflows whose statuses differ from these)."""

    @classmethod
    def empty(cls, dim: int) -> ServedRows:
        """No served version."""
        none, codes = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        return cls(
            ids=[],
            versions=none,
            statuses=[],
            stats=[],
            agents=codes,
            agent_names=[],
            scopes=codes,
            scope_names=[],
            keys=np.zeros((0, dim), dtype=np.float32),
            owners=none,
            shares=np.zeros(0),
            subroutine=np.zeros(0, dtype=bool),
            by_example=np.zeros(0, dtype=bool),
            table=None,
        )

    def __len__(self) -> int:
        return len(self.ids)

    def with_usage(self, usage: Mapping[tuple[str, int], UsageStats]) -> tuple[ServedRows, list[int]]:
        """These versions with their usage read anew from the usage table's figures (a version
        without any keeps its row's `stats`), all else as it is, what was read of the columns
        too: what a change of the usage table alone changes (which versions are served, their
        status and keys are the workflows' and the lifecycle's); and the positions whose stats
        changed. Only the figures that differ from `usage`'s are looked at, each version found
        by a binary search of the sorted ids: an outcome reported costs its versions, not every
        served one."""
        if self.table is None:
            return self, []
        changed: dict[int, UsageStats] = {}
        old = self.usage.flat() if isinstance(self.usage, _Layered) else self.usage
        get = old.get
        # The same figures are the same object (`Store.usage`): one pass by identity (~10 ms at
        # 100k versions with usage, against ~50 ms comparing in the loop), then the few moved.
        moved = [key for key, figures in usage.items() if get(key) is not figures]
        for key in moved:
            figures, before = usage[key], get(key)
            if figures != before and (at := self.position(key)) is not None:
                changed[at] = figures
        if len(usage) - sum(key not in old for key in moved) < len(old):  # some figures gone:
            for key in old.keys() - usage.keys():  # the row's own stats again
                if (at := self.position(key)) is not None:
                    changed[at] = self._stored_stats(at)
        return self._restated(changed, usage), sorted(changed)

    def with_figures(self, figures: Mapping[tuple[str, int], UsageStats]) -> tuple[ServedRows, list[int]]:
        """`with_usage` when what changed in the usage table is known (`Store.usage_since`: the
        figures this process's own commits wrote): only those versions looked at, not every
        figure read anew (an outcome reported, at 100k versions with usage: ~1 ms against
        ~0.13 s)."""
        if self.table is None:
            return self, []
        changed: dict[int, UsageStats] = {}
        for key, stats in figures.items():
            at = self.position(key)
            if at is not None and stats is not self.stats[at] and stats != self.stats[at]:
                changed[at] = stats
        return self._restated(changed, _Layered.over(self.usage, figures)), sorted(changed)

    def _restated(
        self, changed: Mapping[int, UsageStats], usage: Mapping[tuple[str, int], UsageStats]
    ) -> ServedRows:
        """These versions with the stats at `changed` positions replaced, read with `usage`;
        what was read of the columns kept."""
        stats = self.stats
        if changed:
            stats = list(stats)
            for at, figures in changed.items():
                stats[at] = figures
        return replace(
            self,
            stats=stats,
            usage=usage,
            _chunks=self._chunks,
            _micros=self._micros,
            _reader=self._reader,
            _sources=self._sources,
        )

    def restatus(self, live: Mapping[tuple[str, int], str]) -> ServedRows | None:
        """These versions after a change of status alone (the workflows table as it was when
        they were read): `live`, the lifecycle log's statuses (`live_statuses`), applied to
        the candidates, the served versions picked again (`served_pick.pick`), and those rows taken from
        these (`take`), their keys, stats and columns as read. None when a version not served
        here would be (one served again: a promotion, a rollback), or when the whole read left
        out a run not recorded: then only a whole read (`served_rows`) has it.

        Only the workflows whose statuses in `live` differ from those these versions were
        picked with (`lifecycle`) are picked again, the rest served as they are: at 100k
        versions a retirement costs its workflow, not a pass over every candidate (~0.17 s)."""
        found = self.candidates
        if found is None or found.torn or self.picked is None:
            return None
        before = self.lifecycle
        moved = {key for key, _ in live.items() - before.items()} | (before.keys() - live.keys())
        drop: list[int] = []
        statuses = self.statuses
        for workflow_id in sorted({key[0] for key in moved}):
            picked = served_pick.pick_one(found, workflow_id, live)
            lo = bisect.bisect_left(self.ids, workflow_id)
            hi = bisect.bisect_right(self.ids, workflow_id, lo)
            served = dict(zip(self.picked[lo:hi].tolist(), range(lo, hi), strict=True))
            if any(i not in served for i in picked):
                return None
            if statuses is self.statuses:
                statuses = list(statuses)
            for i, at in served.items():
                if i in picked:
                    statuses[at] = picked[i]
                else:
                    drop.append(at)
        if not drop:
            return replace(self, statuses=statuses, lifecycle=live)
        keep = np.ones(len(self), dtype=bool)
        keep[drop] = False
        positions = np.flatnonzero(keep)
        rows = self.take(positions, [statuses[i] for i in positions.tolist()])
        return replace(rows, lifecycle=live)

    def take(self, positions: npt.NDArray[np.int64], statuses: list[str]) -> ServedRows:
        """The versions at these positions (ascending), with these statuses: their keys, stats
        and columns as these hold them."""
        counts = np.bincount(self.owners, minlength=len(self))
        starts = np.cumsum(counts) - counts
        kept = counts[positions]
        first = np.cumsum(kept) - kept
        keys = np.repeat(starts[positions] - first, kept) + np.arange(int(kept.sum()), dtype=np.int64)
        import pyarrow as pa

        return replace(
            self,
            ids=[self.ids[i] for i in positions.tolist()],
            versions=self.versions[positions],
            statuses=statuses,
            stats=[self.stats[i] for i in positions.tolist()],
            agents=self.agents[positions],
            scopes=self.scopes[positions],
            keys=self.keys[keys],
            owners=np.repeat(np.arange(len(positions), dtype=np.int64), kept),
            shares=self.shares[keys],
            subroutine=self.subroutine[positions],
            by_example=self.by_example[positions],
            table=self.table.take(pa.array(positions, pa.int64())).combine_chunks(),
            _chunks={},
            _micros=None if self._micros is None else self._micros[positions],
            _reader=None,
            _sources=None,
            picked=None if self.picked is None else self.picked[positions],
        )

    def position(self, key: tuple[str, int]) -> int | None:
        """Where version `key` (id, version) is served, if it is (`ids` are sorted)."""
        wid, version = key
        at = bisect.bisect_left(self.ids, wid)
        while at < len(self.ids) and self.ids[at] == wid:
            if int(self.versions[at]) == version:
                return at
            at += 1
        return None

    def _stored_stats(self, i: int) -> UsageStats:
        """The stats the row at position i holds (what a version without usage figures has)."""
        return UsageStats.model_validate(json.loads(self.columns()["stats"][i].as_py()))

    def actions(self, i: int) -> Pattern:
        """The actions of the version at position i as its `Workflow.pattern` (a loop as its
        body's tuple), without building its `Workflow`."""
        return decoded(self.columns()["actions"][i].as_py() or [])

    def columns(self) -> dict[str, pa.Array]:
        """`table`'s columns by name, each as its one chunk (combined when read)."""
        if not self._chunks:
            self._chunks.update((name, self.table.column(name).chunk(0)) for name in self.table.column_names)
        return self._chunks

    def workflow(self, i: int) -> Workflow:
        """The `Workflow` at position i, with its live status and stats (its row read as one
        JSON document: `storage.workflow_json`)."""
        return self.workflows([i])[0]

    def text_bytes(self) -> npt.NDArray[np.int64]:
        """Per version: the bytes of text its row holds (its id, name, description, steps,
        parameters, pitfalls, provenance and source run ids): what its built `Workflow`'s
        memory follows (`retrieval.built.estimate`). Arrow's kernels over the columns, no row
        read."""
        out = np.zeros(len(self), dtype=np.int64)
        if self.table is None:
            return out
        import pyarrow.compute as pc

        found = self.columns()
        for name in _SIZED:
            if name in found:
                out += pc.binary_length(found[name]).fill_null(0).to_numpy(zero_copy_only=False)
        sources = self._source_column()
        if sources is not None and len(sources):
            lengths = pc.binary_length(pc.list_flatten(sources)).fill_null(0).to_numpy(zero_copy_only=False)
            parents = pc.list_parent_indices(sources).to_numpy(zero_copy_only=False)
            out += np.bincount(parents, weights=lengths, minlength=len(self)).astype(np.int64)
        return out

    def sources(self) -> frozenset[str]:
        """The source trajectory ids of every served version (`Workflow.source_trajectory_ids`,
        all of them), read from their column once, without building a `Workflow`."""
        found = self._sources
        if found is None:
            import pyarrow.compute as pc

            column = self._source_column()
            found = frozenset() if column is None else frozenset(pc.list_flatten(column).to_pylist())
            object.__setattr__(self, "_sources", found)
        return found

    def drawing(self, runs: Collection[str]) -> dict[int, int]:
        """Position -> how many of these runs the version there was induced from (distinct
        ids of its `Workflow.source_trajectory_ids`), for the versions induced from any: one
        pass of Arrow's kernels over their column, no `Workflow` built."""
        column = self._source_column()
        if column is None or not runs:
            return {}
        import pyarrow as pa
        import pyarrow.compute as pc

        flat = pc.list_flatten(column)
        hit = pc.is_in(flat, value_set=pa.array(list(runs), type=flat.type))
        parents = pc.list_parent_indices(column).filter(hit).to_pylist()
        pairs = set(zip(parents, flat.filter(hit).to_pylist(), strict=True))
        return dict(Counter(position for position, _ in pairs))

    def _source_column(self) -> pa.Array | None:
        """The `source_trajectory_ids` column (None: no table, or one from before it)."""
        return None if self.table is None else self.columns().get("source_trajectory_ids")

    def workflows(self, positions: Sequence[int]) -> list[Workflow]:
        """The `Workflow`s at these positions, with their live status and stats, validated in
        one call (`storage.workflow_json.WorkflowReader.workflows`)."""
        reader = self._reader
        if reader is None:
            reader = WorkflowReader(self.columns())
            object.__setattr__(self, "_reader", reader)
        micros = self._created()
        return reader.workflows(
            positions,
            [self.statuses[i] for i in positions],
            [self.stats[i] for i in positions],
            [_EPOCH + timedelta(microseconds=int(micros[i])) for i in positions],
        )

    def _created(self) -> npt.NDArray[np.int64]:
        """`created_at` as microseconds since the epoch, one array read once (a timestamp's
        `as_py` costs ~7 µs, a quarter of a hit's reading)."""
        found = self._micros
        if found is None:
            import pyarrow as pa

            found = self.columns()["created_at"].cast(pa.int64()).to_numpy(zero_copy_only=False)
            object.__setattr__(self, "_micros", found)
        return found


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_SIZED = ("id", "name", "description", "steps", "parameters", "pitfalls", "provenance")
"""The text columns a built `Workflow` holds (`ServedRows.text_bytes`)."""

_LAYERED_MAX = 4096
"""Figures a `_Layered` holds over its whole read at most; past it they are merged into one
dict (a copy of every figure: ~2 ms at 100k, once per that many versions' outcomes)."""


class _Layered(Mapping[tuple[str, int], UsageStats]):
    """The usage figures a served index's rows were read with (`ServedRows.usage`): a whole
    read of the usage table and, over it, the figures this process's own commits wrote since
    (`ServedRows.with_figures`), so that an outcome copies those, not every version's (~1.7 ms
    an outcome at 100k versions with usage, and as long to free)."""

    __slots__ = ("base", "top")

    def __init__(
        self, base: Mapping[tuple[str, int], UsageStats], top: dict[tuple[str, int], UsageStats]
    ) -> None:
        self.base, self.top = base, top

    @classmethod
    def over(
        cls, usage: Mapping[tuple[str, int], UsageStats], figures: Mapping[tuple[str, int], UsageStats]
    ) -> Mapping[tuple[str, int], UsageStats]:
        """`usage` with `figures` over it: layered while few, else one dict."""
        base, top = (usage.base, usage.top) if isinstance(usage, _Layered) else (usage, {})
        top = {**top, **figures}
        return cls(base, top) if len(top) <= _LAYERED_MAX else {**base, **top}

    def flat(self) -> dict[tuple[str, int], UsageStats]:
        """Every figure in one dict."""
        return {**self.base, **self.top}

    def __getitem__(self, key: tuple[str, int]) -> UsageStats:
        found = self.top.get(key)
        return found if found is not None else self.base[key]

    def __iter__(self) -> Iterator[tuple[str, int]]:
        yield from self.top
        yield from (key for key in self.base if key not in self.top)

    def __len__(self) -> int:
        return len(self.base) + sum(key not in self.base for key in self.top)


class ServedMixin(StoreBase):
    """Reads the served versions as columns."""

    def served_rows(self, *, namespace: str | None = None) -> ServedRows:
        """The versions search serves, as `ServedRows` (see the module docstring)."""
        import pyarrow as pa

        ns = self._ns(namespace)
        source, where = self._workflows(ns), f"namespace = {quote(ns)}"
        # The key vectors stay out of every Arrow copy below (filter, take): see `served_columns.key_matrix`.
        table = select(source, where, [c for c in source.schema.names if c != "vector"])
        keys = table.column("keys") if "keys" in table.column_names else None
        table = table.drop_columns(["keys"]) if keys is not None else table
        everything = len(table)
        runs = self.runs_version()  # type: ignore[attr-defined]  # read before the runs are listed
        table, rows = self._recorded(table, ns)
        ids, versions = table.column("id").to_pylist(), table.column("version").to_pylist()
        changed = self.live_statuses(namespace=ns)  # type: ignore[attr-defined]
        stored = columns.interned(table.column("status"))
        # The log's status where it has one (`dict.get` with the stored one as default, by `map`).
        statuses = list(map(changed.get, zip(ids, versions, strict=True), stored))
        order = served_pick.order(ids, versions)
        chosen = served_pick.pick(ids, statuses, order)
        torn = len(table) < everything
        candidates = Candidates(
            ids, np.array(versions, dtype=np.int64), stored, order, torn, runs if torn else None
        )
        table = table.take(pa.array(chosen, pa.int64()))

        def vectors_of(missing: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
            """The `vector` of the chosen versions at these positions, by id and version."""
            wanted = [(ids[chosen[j]], versions[chosen[j]]) for j in missing.tolist()]
            listed = ", ".join(quote(i) for i in sorted({i for i, _ in wanted}))
            found = rows_of(select(source, f"{where} AND id IN ({listed})", ["id", "version", "vector"]))
            by_key = {(r["id"], r["version"]): r["vector"] for r in found}
            return np.array([by_key[k] for k in wanted], dtype=np.float32).reshape(-1, self.embedder.dim)

        matrix, counts = columns.key_matrix(keys, rows[chosen], self.embedder.dim, vectors_of)
        shares = columns.shares(table, counts)
        usage = self.usage(namespace=ns)  # type: ignore[attr-defined]
        served_ids, served_versions = [ids[i] for i in chosen], [versions[i] for i in chosen]
        live = columns.live_stats(usage, zip(served_ids, served_versions, strict=True), table.column("stats"))
        kinds = table.column("kind").to_pylist() if "kind" in table.column_names else ["task"] * len(table)
        agents, agent_names = columns.codes(table.column("agent").to_pylist())
        scopes, scope_names = columns.codes(table.column("scope").to_pylist())
        return ServedRows(
            ids=served_ids,
            versions=np.array(served_versions, dtype=np.int64),
            statuses=[statuses[i] for i in chosen],
            stats=live,
            agents=agents,
            agent_names=agent_names,
            scopes=scopes,
            scope_names=scope_names,
            keys=matrix,
            owners=np.repeat(np.arange(len(chosen), dtype=np.int64), counts),
            shares=shares,
            subroutine=np.array([k == "subroutine" for k in kinds], dtype=bool),
            by_example=columns.by_example(table),
            table=table.combine_chunks(),
            usage=usage,
            candidates=candidates,
            picked=np.array(chosen, dtype=np.int64),
            lifecycle=changed,
        )

    def _recorded(self, table: Any, ns: str) -> tuple[Any, npt.NDArray[np.int64]]:
        """The rows of `table` that no run wrote or a recorded run wrote (a crashed run's are
        left out), and their positions in it."""
        import pyarrow as pa

        rows = np.arange(len(table), dtype=np.int64)
        run_ids = table.column("run_id").to_pylist()
        if any(r is not None for r in run_ids):
            recorded = {r.id for r in self.list_runs(namespace=ns)}  # type: ignore[attr-defined]
            keep = np.array([r is None or r in recorded for r in run_ids], dtype=bool)
            table, rows = table.filter(pa.array(keep, pa.bool_())), rows[keep]
        return table, rows
