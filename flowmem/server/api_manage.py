"""The API's routes for looking after workflows: history, diffs, induction runs, rollback,
manual status changes and induction on demand — what `flowmem workflows ...` and `flowmem
induce` do, over HTTP. Reads are guarded like every read, the rest like every write."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Body, FastAPI, HTTPException, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from flowmem.jobs.status import Verb
from flowmem.server.payloads import DiffOut, History, InducedRun, RunOut, StatusChanged
from flowmem.server.service import Busy, Service
from flowmem.storage import NotFoundError, StoreError

__all__ = ["StatusChange", "manage_routes"]


class Rollback(BaseModel):
    """Why a run is rolled back (kept with the rollback)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    note: str | None = Field(None, max_length=10_000)
    """Free text kept with the rollback run."""


class StatusChange(BaseModel):
    """A manual status change of a workflow version, logged with who and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Verb
    """promote (serve as active), deprecate (stop serving) or retire (never serve again)."""
    why: str = Field(min_length=1, max_length=2_000, pattern=r"\S")
    """The reason, kept in the lifecycle log."""
    by: str = Field("api", min_length=1, max_length=200)
    """Who made the change."""
    version: int | None = Field(None, ge=1)
    """The version; by default the latest (retire: every served version)."""


class InduceNow(BaseModel):
    """Options of an induction run started through the API."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inducer: Literal["rule", "llm"] | None = None
    """rule or llm; by default llm when FLOWMEM_LLM_MODEL is set, else rule."""
    all: bool = False
    """Re-induce every cluster, not only those whose runs changed."""


def manage_routes(app: FastAPI, svc: Service, read: Any, write: Any) -> None:
    """Add the routes to `app`; `read` and `write` are the token guards."""
    _workflow_routes(app, svc, read, write)
    _induction_routes(app, svc, read, write)


def _workflow_routes(app: FastAPI, svc: Service, read: Any, write: Any) -> None:

    @app.get("/v1/workflows/{workflow_id}/history", tags=["workflows"], dependencies=[read])
    def history(workflow_id: str) -> History:
        """Every version of a workflow (status, parent, provenance, content hash) and every
        status transition it went through, oldest first."""
        return svc.history(workflow_id)

    @app.get("/v1/workflows/{workflow_id}/diff", tags=["workflows"], dependencies=[read])
    def diff(
        workflow_id: str,
        old: Annotated[int, Query(ge=1, description="The version compared from.")],
        new: Annotated[int, Query(ge=1, description="The version compared to.")],
    ) -> DiffOut:
        """Step-level diff between two versions, and the other fields that changed."""
        return svc.diff(workflow_id, old, new)

    @app.post("/v1/workflows/{workflow_id}/status", tags=["workflows"], dependencies=[write])
    def change_status(workflow_id: str, change: StatusChange) -> StatusChanged:
        """Promote, deprecate or retire a version by hand; the transitions made (none when
        it already had that status) are logged with `by` and `why`."""
        try:
            return svc.set_status(
                workflow_id, change.action, why=change.why, by=change.by, version=change.version
            )
        except NotFoundError:
            raise
        except StoreError as err:
            raise HTTPException(409, str(err)) from None


def _induction_routes(app: FastAPI, svc: Service, read: Any, write: Any) -> None:
    @app.get("/v1/induction/runs", tags=["induction"], dependencies=[read])
    def runs() -> list[RunOut]:
        """Induction runs and rollbacks, oldest first: full ids (what a rollback takes), tags,
        table versions, counts and the workflows each run retired."""
        return svc.runs()

    @app.post(
        "/v1/induction/runs",
        tags=["induction"],
        dependencies=[write],
        response_model=InducedRun,
        responses={502: {"model": InducedRun, "description": "Every cluster the run tried failed."}},
    )
    async def induce_now(options: Annotated[InduceNow | None, Body()] = None) -> InducedRun | JSONResponse:
        """Run induction now, as `flowmem induce` does; its summary once it is committed.
        409 while another one started here runs; 502, with the summary, when every cluster
        it tried failed (e.g. the LLM was unreachable)."""
        chosen = options or InduceNow()
        try:
            summary = await run_in_threadpool(svc.induce, inducer=chosen.inducer, force=chosen.all)
        except Busy as err:
            raise HTTPException(409, str(err)) from None
        except ValueError as err:
            raise HTTPException(400, str(err)) from None
        if summary.every_cluster_failed:
            return JSONResponse(summary.model_dump(mode="json"), status_code=502)
        return summary

    @app.post("/v1/induction/runs/{run_id}/rollback", tags=["induction"], dependencies=[write])
    def rollback(run_id: str, body: Annotated[Rollback | None, Body()] = None) -> RunOut:
        """Restore the workflows to the table version before a run; the rollback is itself a
        tagged run, and what the run retired is served again. 409 when the run was already
        rolled back or has no version to restore."""
        try:
            return svc.rollback(run_id, note=body.note if body is not None else None)
        except NotFoundError:
            raise
        except StoreError as err:
            raise HTTPException(409, str(err)) from None
