"""The dashboard's trace and run pages: the runs table, a run's tree of parent and subtask runs,
an induction run's changes, and the rollback confirmation with its preview.

The preview is `Store.rollback_plan`, the very plan `Store.rollback` applies.
"""

from __future__ import annotations

import math
from datetime import date
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from pydantic import BeforeValidator

from flowmem.models import NAMESPACE_PATTERN
from flowmem.server.dashboard.pages import Pages
from flowmem.server.dashboard.tracedata import RunCache, RunFilter, rollback_effect, run_changes, trace_tree
from flowmem.storage import NotFoundError, StoreError

__all__ = ["RUNS_PAGE_SIZE", "add_trace_routes"]

RUNS_PAGE_SIZE = 50
"""Runs per page of the runs table."""

_Blank = BeforeValidator(lambda v: v or None)
"""An empty value (the form's "any") is no filter."""
Ns = Annotated[
    str | None, Query(pattern=NAMESPACE_PATTERN, description="a namespace: up to 64 letters, digits, _ or -")
]
Day = Annotated[date | None, _Blank, Query(description="a day, YYYY-MM-DD")]
# An empty string filter is the form's "any" too: these patterns take it, the page drops it.
Agent = Annotated[str | None, Query(max_length=200, description="an agent role")]
Outcome = Annotated[
    str | None,
    Query(
        pattern="^(true|false|none)?$", description="true (succeeded), false (failed) or none (no outcome)"
    ),
]
WorkflowId = Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_.:-]{0,200}$", description="a workflow id")]
Page = Annotated[int, Query(ge=1, description="a page number, from 1")]


def add_trace_routes(router: APIRouter, pages: Pages) -> None:
    """Add the runs table, the run (trajectory) page, the induction runs' pages and the
    rollback confirmation to the dashboard's router."""
    _trajectory_routes(router, pages)
    _run_routes(router, pages)


def _trajectory_routes(router: APIRouter, pages: Pages) -> None:
    cache = RunCache(pages.store)

    @router.get("/trajectories", response_class=HTMLResponse)
    def trajectories(
        request: Request,
        ns: Ns = None,
        agent: Agent = None,
        success: Outcome = None,
        since: Day = None,
        until: Day = None,
        workflow: WorkflowId = None,
        page: Page = 1,
    ) -> HTMLResponse:
        if since and until and since > until:
            raise HTTPException(400, f"since ({since}) is after until ({until}): no run can be both")
        space = pages.ns(ns)
        rows = cache.rows(space)
        chosen = RunFilter.model_validate(
            {"agent": agent or None, "success": success or None, "since": since, "until": until}
            | {"workflow": workflow or None}
        )
        shown = [r for r in rows if chosen.keeps(r)]
        pages_total = max(1, math.ceil(len(shown) / RUNS_PAGE_SIZE))
        page = min(page, pages_total)
        return pages.render(
            request,
            "trajectories.html",
            space,
            rows=shown[(page - 1) * RUNS_PAGE_SIZE : page * RUNS_PAGE_SIZE],
            total=len(shown),
            all_total=len(rows),
            page=page,
            pages_total=pages_total,
            chosen=chosen,
            filters={k: v for k, v in chosen.model_dump(mode="json").items() if v is not None},
            agents=sorted({r.agent for r in rows}),
            workflows=sorted({wid for r in rows for wid, _ in r.used}),
        )

    @router.get("/trajectories/{trajectory_id:path}", response_class=HTMLResponse)
    def trajectory(request: Request, trajectory_id: str, ns: Ns = None) -> HTMLResponse:
        space = pages.ns(ns)
        t = pages.store.get_trajectory(trajectory_id, namespace=space)
        tree, missing = trace_tree(pages.store, t, space)
        return pages.render(request, "trajectory.html", space, t=t, tree=tree, missing_parent=missing)


def _run_routes(router: APIRouter, pages: Pages) -> None:
    @router.get("/runs", response_class=HTMLResponse)
    def runs(request: Request, ns: Ns = None, done: str | None = None) -> HTMLResponse:
        space = pages.ns(ns)
        found = pages.store.list_runs(namespace=space)
        undone = {r.rolled_back_run: r for r in found if r.rolled_back_run}
        result = next((r for r in found if r.id == done), None)
        return pages.render(
            request, "runs.html", space, runs=list(reversed(found)), undone=undone, result=result
        )

    @router.get("/runs/{run_id}", response_class=HTMLResponse)
    def run(request: Request, run_id: str, ns: Ns = None) -> HTMLResponse:
        space = pages.ns(ns)
        found = pages.store.list_runs(namespace=space)
        r = next((r for r in found if r.id == run_id), None)
        if r is None:
            raise NotFoundError(f"no run {run_id!r} in namespace {space!r}")
        undone_by = next((o for o in found if o.rolled_back_run == r.id), None)
        target = next((o for o in found if o.id == r.rolled_back_run), None)
        return pages.render(
            request,
            "run.html",
            space,
            run=r,
            undone_by=undone_by,
            target=target,
            changes=run_changes(pages.store, r) if r.kind != "rollback" else None,
            effect=rollback_effect(pages.store, r) if r.kind == "rollback" else None,
        )

    @router.get("/runs/{run_id}/rollback", response_class=HTMLResponse)
    def confirm(request: Request, run_id: str, ns: Ns = None) -> HTMLResponse:
        space = pages.ns(ns)
        try:
            plan = pages.store.rollback_plan(run_id, namespace=space)
        except NotFoundError:
            raise  # the page's 404
        except StoreError as e:  # no base version, or already rolled back: nothing to confirm
            return pages.render(request, "error.html", space, status=409, message=str(e))
        return pages.form(request, "rollback.html", space, run=plan.run, plan=plan)
