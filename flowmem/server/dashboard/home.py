"""The dashboard's home page: the workflows table, filtered, sorted and paged, and the search
box, which shows what `WorkflowMemory.context` gives an agent for a task.

Each row is the version agents are served (`views.workflow_rows`, from `Store.served_rows`);
the search runs the same index search with the same k and renders the same block
(`render_context`) as `WorkflowMemory.context`, so what the page says an agent gets is what it
gets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from flowmem.agents.served_index import CONTEXT_K, ServedIndex
from flowmem.induction.render.render import render_context
from flowmem.retrieval.search import Hit
from flowmem.server.dashboard.views import WorkflowRow

__all__ = [
    "DEFAULT_SORT",
    "PAGE_SIZE",
    "SORTS",
    "SORT_HELP",
    "SORT_PATTERN",
    "Answer",
    "HomeView",
    "answer",
    "home_view",
    "sort_rows",
]

PAGE_SIZE = 50
"""Workflows per home page."""

_STATUS_ORDER: dict[str, int] = {"active": 0, "candidate": 1, "deprecated": 2, "retired": 3}
"""Served first: the order statuses sort in."""

SORTS: dict[str, Callable[[WorkflowRow], Any]] = {
    "name": lambda r: (r.name.lower(), r.name),
    "description": lambda r: r.description.lower(),
    "kind": lambda r: r.kind,
    "agent": lambda r: r.agent,
    "status": lambda r: _STATUS_ORDER.get(r.status, len(_STATUS_ORDER)),
    "version": lambda r: r.version,
    "support": lambda r: r.support,
    "served": lambda r: r.served,
    "success": lambda r: r.served_rate,
    "unserved": lambda r: r.unserved_rate,
    "changed": lambda r: r.changed_at,
}
"""The columns the table sorts by, and each one's key (None: sorted last either way)."""

DEFAULT_SORT = "-changed"
"""Newest change first."""

SORT_PATTERN = f"^-?({'|'.join(SORTS)})$"
SORT_HELP = "a column: " + ", ".join(SORTS) + "; with a leading - for descending"


def sort_rows(rows: Sequence[WorkflowRow], sort: str) -> list[WorkflowRow]:
    """The rows by one column (`-name`: descending), ties by id; rows without a value last."""
    column = sort.removeprefix("-")
    key = SORTS[column]
    valued = [r for r in rows if key(r) is not None]
    ordered = sorted(valued, key=lambda r: (key(r), r.id), reverse=sort.startswith("-"))
    return ordered + [r for r in rows if key(r) is None]


@dataclass(frozen=True)
class Answer:
    """What an agent asking a task is given: `WorkflowMemory.context` for it."""

    hits: list[Hit]
    """The workflows served, best first (at most `CONTEXT_K`)."""
    block: str
    """The text put in the agent's instructions ("" when none fits)."""


def answer(index: ServedIndex, task: str, *, agent: str | None = None) -> Answer:
    """What `WorkflowMemory.context(task, agent=agent)` returns on this index: the same search
    (k, relevance floor, gap and ratio, composition with sub-routines) and the same block."""
    hits = index.search(task, k=CONTEXT_K, agent=agent)
    return Answer(hits, render_context([h.workflow for h in hits]))


@dataclass(frozen=True)
class HomeView:
    """What the home page shows."""

    rows: list[WorkflowRow]
    """This page's rows."""
    total: int
    """Rows that pass the filters (and the search)."""
    all_total: int
    """Every workflow of the namespace."""
    hidden_retired: int
    """Retired workflows left out (none when `retired` is asked for or filtered on)."""
    page: int
    pages_total: int
    options: dict[str, list[str]]
    """Each filter's values."""
    answer: Answer | None
    """The search box's answer (None: no task asked)."""


FILTERS = ("agent", "status", "kind")


def home_view(
    rows: Sequence[WorkflowRow],
    index: ServedIndex,
    *,
    chosen: dict[str, str | None],
    retired: bool,
    q: str,
    sort: str,
    page: int,
) -> HomeView:
    """Filter (retired left out unless asked for), search, sort and page the workflow rows; with
    a task asked, the rows are those served for it, in the order served (`sort` is not used)."""
    options = {f: sorted({getattr(r, f) for r in rows}) for f in FILTERS}
    shown = [r for r in rows if all(not v or getattr(r, f) == v for f, v in chosen.items())]
    hidden = 0
    if not retired and chosen.get("status") != "retired":
        hidden = sum(r.status == "retired" for r in shown)
        shown = [r for r in shown if r.status != "retired"]
    found = answer(index, q, agent=chosen.get("agent") or None) if q.strip() else None
    if found is None:
        shown = sort_rows(shown, sort)
    else:  # the rows served, in the order served (the order of the block an agent reads)
        rank = {h.workflow.id: i for i, h in enumerate(found.hits)}
        shown = sorted((r for r in shown if r.id in rank), key=lambda r: rank[r.id])
    pages_total = max(1, math.ceil(len(shown) / PAGE_SIZE))
    page = min(page, pages_total)
    return HomeView(
        rows=shown[(page - 1) * PAGE_SIZE : page * PAGE_SIZE],
        total=len(shown),
        all_total=len(rows),
        hidden_retired=hidden,
        page=page,
        pages_total=pages_total,
        options=options,
        answer=found,
    )
