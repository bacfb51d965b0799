"""What a full induction run keeps of a namespace it reads in batches, pure: each row's steps
parsed into a light run that the literal index counts and the sub-routine shapes are cut from,
then dropped; what stays is a `Catalog` of a few compact columns and the segments' positions
(`Cuts`). Step 1 of `induction.plan.bounded`."""

from __future__ import annotations

import json
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, cast, overload

import numpy as np

from flowmem.induction.abstract.segments import segment, shape_of
from flowmem.induction.abstract.subroutines import Shape
from flowmem.induction.literals import LiteralIndex
from flowmem.models import Trajectory

__all__ = ["SCAN_COLUMNS", "Catalog", "Cuts", "LightRun", "Scan", "Shapes", "light_run", "scan"]

SCAN_COLUMNS = ("id", "agent", "task", "success", "parent_id", "created_at", "steps")
"""What a full run reads of every trajectory (in batches): never the vectors, nor the rest."""


class LightStep(NamedTuple):
    """What the literal index and the segmentation read of a step (a tuple: built for every
    step of every run, a frozen dataclass would cost more to make than the rest of a scan's
    step)."""

    action: str
    args: dict[str, Any]
    observation: str | None = None


@dataclass(frozen=True)
class LightRun:
    """What the literal index (`LiteralIndex.build`) and the segmentation (`segments.segment`)
    read of a trajectory: a validated `Trajectory` per run would cost more than the rest of a
    run, and would be kept for no use."""

    id: str
    agent: str
    task: str
    steps: list[LightStep]


def light_run(rid: str, agent: str, task: str, steps: str) -> LightRun:
    """A light run from a stored row's columns (`steps` as its JSON text)."""
    parsed = [LightStep(s["action"], s.get("args") or {}, s.get("observation")) for s in json.loads(steps)]
    return LightRun(rid, agent, task, parsed)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _micros(at: datetime) -> int:
    """A time as microseconds since the epoch (a naive one read as UTC), ordered as the times."""
    return ((at if at.tzinfo is not None else at.replace(tzinfo=UTC)) - _EPOCH) // _MICROSECOND


class Coded(Sequence[str]):
    """A column of few distinct texts: each row's code (`array`, 4 bytes) into the texts,
    each distinct text held once (a list of 1M rows would cost 8 bytes a row in pointers, and
    a dict from each text to itself, to share them, 100 bytes a distinct text)."""

    def __init__(self) -> None:
        self.values: list[str] = []
        """The distinct texts, in the order first seen."""
        self.codes = array("i")
        """Each row's text, as its place in `values`."""
        self._code: dict[str, int] | None = {}

    def extend(self, texts: Iterable[str]) -> None:
        """Append rows."""
        if self._code is None:
            raise ValueError("a closed column takes no more rows")
        code, values = self._code, self.values
        for text in texts:
            found = code.get(text)
            if found is None:
                found = code[text] = len(values)
                values.append(text)
            self.codes.append(found)

    def close(self) -> None:
        """Drop what only appending needs (the text -> code map)."""
        self._code = None

    @overload
    def __getitem__(self, row: int) -> str: ...
    @overload
    def __getitem__(self, row: slice) -> list[str]: ...
    def __getitem__(self, row: int | slice) -> str | list[str]:
        if isinstance(row, slice):
            return [self.values[c] for c in self.codes[row]]
        return self.values[self.codes[row]]

    def __len__(self) -> int:
        return len(self.codes)


_OUTCOME = {True: 1, False: 0, None: -1}


@dataclass
class Catalog:
    """The columns of every run of a namespace a full run plans from, one entry per row in the
    order read, held compactly: ids as strings (what the plan hands on), agents and task texts
    as codes (`Coded`), outcomes and times as numbers (`array`), a few bytes a row past its id."""

    ids: list[str] = field(default_factory=list)
    agents: Coded = field(default_factory=Coded)
    tasks: Coded = field(default_factory=Coded)
    outcomes: array[int] = field(default_factory=lambda: array("b"))
    """1 successful, 0 failed, -1 not known."""
    created: array[int] = field(default_factory=lambda: array("q"))
    """Microseconds since the epoch."""
    parents: set[str] = field(default_factory=set)

    def add(self, batch: Mapping[str, Sequence[Any]]) -> None:
        """Append a batch of rows (a list per column of `SCAN_COLUMNS`)."""
        self.ids += batch["id"]
        self.agents.extend(batch["agent"])
        self.tasks.extend(batch["task"])
        self.outcomes.extend(_OUTCOME[s] for s in batch["success"])
        self.created.extend(map(_micros, batch["created_at"]))
        self.parents.update(p for p in batch["parent_id"] if p)

    def close(self) -> None:
        """Once every batch is added: drop what only adding needs."""
        self.agents.close()
        self.tasks.close()

    def success(self, row: int) -> bool | None:
        """A row's outcome (None: not known)."""
        found = self.outcomes[row]
        return None if found < 0 else found == 1

    def order(self) -> list[int]:
        """The rows in the order a cluster's runs are induced in (`orchestrate.in_run_order`:
        newest first, then by id)."""
        by_id = np.array(sorted(range(len(self.ids)), key=self.ids.__getitem__), dtype=np.int64)
        created = np.frombuffer(self.created, dtype=np.int64)[by_id]
        newest: list[int] = by_id[np.argsort(-created, kind="stable")].tolist()  # by id among equals
        return newest

    def task_of(self) -> dict[str, str]:
        """Run id -> its task text."""
        texts, codes = self.tasks.values, self.tasks.codes
        return {rid: texts[c] for rid, c in zip(self.ids, codes, strict=True)}


Cut = tuple[int, int, tuple[int, ...], bool]
"""A segment: (its run's row, its goal position, its positions, whether it is the whole run)."""


class Cuts(Sequence[Cut]):
    """The segments of one shape, as `Cut`s, held in arrays (a tuple per segment, with its
    positions' tuple and its row's int, cost ~170 bytes; these ~20)."""

    def __init__(self) -> None:
        self.rows, self.goals, self.whole = array("i"), array("i"), array("b")
        self.positions, self.ends = array("i"), array("i")
        """Every segment's positions one after the other; where each segment's end."""

    def append(self, row: int, goal: int, positions: Sequence[int], whole: bool) -> None:
        """Add a segment."""
        self.rows.append(row)
        self.goals.append(goal)
        self.whole.append(whole)
        self.positions.extend(positions)
        self.ends.append(len(self.positions))

    @overload
    def __getitem__(self, i: int) -> Cut: ...
    @overload
    def __getitem__(self, i: slice) -> list[Cut]: ...
    def __getitem__(self, i: int | slice) -> Cut | list[Cut]:
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        start = self.ends[i - 1] if i > 0 else 0
        return self.rows[i], self.goals[i], tuple(self.positions[start : self.ends[i]]), bool(self.whole[i])

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class Shapes:
    """The segments of every run, by agent and shape (`segments.shape_of`), successful runs'
    and failed runs' apart; shapes of one action are not kept (`subroutines.keeps_shape`)."""

    ok: dict[str, dict[Shape, Cuts]] = field(default_factory=lambda: defaultdict(dict))
    failed: dict[str, dict[Shape, Cuts]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, row: int, run: LightRun, success: bool | None) -> None:
        """Cut one run (its row in the `Catalog`) into segments and keep where they are."""
        if success is None or not run.steps:
            return
        into = self.ok[run.agent] if success else self.failed[run.agent]
        for seg in segment(cast("Trajectory", run)):
            shape = shape_of(seg)
            if len(shape[1]) >= 2:
                whole = len(seg.positions) == len(run.steps)
                into.setdefault(shape, Cuts()).append(row, seg.goal, seg.positions, whole)


@dataclass
class Scan:
    """What `scan` keeps of a namespace."""

    catalog: Catalog
    literals: LiteralIndex
    shapes: Shapes | None
    """None when sub-routines are off."""


def scan(batches: Iterable[Mapping[str, Sequence[Any]]], *, literal_share: float, subroutines: bool) -> Scan:
    """Read a namespace's batches once: the columns kept, the literal index counted, the
    segments cut (with `subroutines`), each batch's steps dropped once read."""
    catalog = Catalog()
    shapes = Shapes() if subroutines else None

    def runs() -> Iterator[LightRun]:
        for batch in batches:
            start = len(catalog.ids)
            catalog.add(batch)
            rows = zip(
                batch["id"], batch["agent"], batch["task"], batch["steps"], batch["success"], strict=True
            )
            for j, (rid, agent, task, steps, success) in enumerate(rows):
                run = light_run(rid, agent, task, steps)
                if shapes is not None:
                    shapes.add(start + j, run, success)
                yield run

    literals = LiteralIndex.build(cast("Iterable[Trajectory]", runs()), max_share=literal_share)
    catalog.close()
    return Scan(catalog, literals, shapes)
