"""The HTTP API (`flowmem api`): agents in any language post trajectories, search workflows,
get a workflow's versions and report outcomes; operators read histories, diffs and runs, roll
back, change a status and start induction (`api_manage`). OpenAPI docs at /docs, offline.

Writes need `Authorization: Bearer <FLOWMEM_API_TOKEN>` (compared in constant time); with no
token configured, writes are refused. Reads are open unless FLOWMEM_API_READ_TOKEN=true. The
token never appears in a response or a log line. One server serves one namespace.
"""

import contextlib
import hmac
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from flowmem import __version__
from flowmem.interchange import RecordError, loads
from flowmem.server.api_docs import add_docs
from flowmem.server.api_manage import manage_routes
from flowmem.server.dashboard import add_dashboard
from flowmem.server.fast_search import MAX_K, MAX_TASK, PATH, SearchFastPath, search_body
from flowmem.server.payloads import Health, OutcomeSet, Recorded, SearchHit, WorkflowDetail, WorkflowOut
from flowmem.server.service import MAX_BATCH, Service
from flowmem.settings import Settings
from flowmem.storage import NotFoundError

__all__ = ["MAX_BODY_BYTES", "app_from_environment", "create_app", "listener", "run"]

log = logging.getLogger("flowmem.api")

MAX_BODY_BYTES = 64 * 1024 * 1024
"""Largest accepted request body."""

_JSONL_TYPES = ("application/x-ndjson", "application/jsonl", "application/x-jsonlines")


class Outcome(BaseModel):
    """A run's outcome, reported after the fact."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    success: bool
    """Whether the run reached its goal."""
    feedback: str | None = Field(None, max_length=10_000)
    """Free-text feedback (e.g. from the user)."""


_TRAJECTORIES_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": (
            f"Up to {MAX_BATCH} trajectories in the interchange format: a JSON array, an object "
            '{"trajectories": [...]}, or JSON Lines (Content-Type: application/x-ndjson).'
        ),
        "content": {
            "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
            "application/x-ndjson": {"schema": {"type": "string"}},
        },
    }
}


def _guard(settings: Settings) -> tuple[Callable[..., Awaitable[None]], Callable[..., Awaitable[None]]]:
    """The dependencies that check the bearer token on writes (and reads when configured)."""
    expected = settings.api_token.get_secret_value().encode() if settings.api_token is not None else None
    bearer = HTTPBearer(auto_error=False, description="FLOWMEM_API_TOKEN")

    def check(credentials: HTTPAuthorizationCredentials | None) -> None:
        if expected is None:
            raise HTTPException(403, "this server has no FLOWMEM_API_TOKEN set, so it accepts no writes")
        # Header values arrive decoded as latin-1: encoding back gives the bytes that were sent.
        given = credentials.credentials.encode("latin-1", "replace") if credentials is not None else b""
        if not hmac.compare_digest(given, expected):
            raise HTTPException(
                401, "missing or invalid bearer token", headers={"WWW-Authenticate": "Bearer"}
            )

    # Async: they only compare bytes, so they need no worker thread of their own.
    async def write(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
        check(credentials)

    async def read(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
        if settings.api_read_token:
            check(credentials)

    return write, read


def create_app(settings: Settings, *, service: Service | None = None) -> FastAPI:
    """The API app for the settings' store and namespace."""
    svc = service if service is not None else Service(settings)
    write, read = _guard(settings)
    app = FastAPI(
        title="flowmem",
        version=__version__,
        description=(
            f"Workflow memory for LLM agents, namespace `{svc.namespace}`. Writes need a bearer token."
        ),
        docs_url=None,  # `add_docs` serves /docs and /redoc with local assets instead of a CDN's
        redoc_url=None,
    )
    add_docs(app)

    @app.exception_handler(NotFoundError)
    async def not_found(request: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # The offending input is not echoed back: it may carry secrets.
        errors = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", "")} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.get("/health", tags=["meta"])
    def health() -> Health:
        """Liveness, version and the namespace served."""
        return Health(status="ok", version=__version__, namespace=svc.namespace)

    _read_routes(app, svc, Depends(read))
    _write_routes(app, svc, Depends(write))
    manage_routes(app, svc, Depends(read), Depends(write))
    add_dashboard(app, svc)  # the dashboard's pages: /, /workflows/..., /runs; HTML errors off the API
    token = settings.api_token.get_secret_value().encode() if settings.api_token is not None else None
    app.add_middleware(SearchFastPath, service=svc, open_reads=not settings.api_read_token, token=token)
    return app


def _read_routes(app: FastAPI, svc: Service, guard: Any) -> None:
    @app.get(PATH, tags=["workflows"], dependencies=[guard], response_model=list[SearchHit])
    async def search(
        task: Annotated[str, Query(min_length=1, max_length=MAX_TASK, description="The task to solve.")],
        k: Annotated[int, Query(ge=1, le=MAX_K, description="How many workflows.")] = 3,
        agent: Annotated[str | None, Query(description="Only workflows of this agent.")] = None,
    ) -> Response:
        """The served workflows that fit a task best, with scores and prompt text."""
        # (A plainly valid search is answered before it gets here: `fast_search`.)
        return Response(await search_body(svc, task, k, agent), media_type="application/json")

    @app.get("/v1/workflows", tags=["workflows"], dependencies=[guard])
    def list_workflows(
        status: Annotated[str | None, Query(pattern="^(candidate|active|deprecated|retired)$")] = None,
    ) -> list[WorkflowOut]:
        """The latest version of every workflow (optionally of one status)."""
        return [WorkflowOut.of(w) for w in svc.store.list_workflows(namespace=svc.namespace, status=status)]

    @app.get("/v1/workflows/{workflow_id}", tags=["workflows"], dependencies=[guard])
    def get_workflow(
        workflow_id: str,
        version: Annotated[int | None, Query(ge=1, description="A version; the latest by default.")] = None,
    ) -> WorkflowDetail:
        """One version of a workflow and the list of all its versions."""
        return svc.get_workflow(workflow_id, version)


def _write_routes(app: FastAPI, svc: Service, guard: Any) -> None:
    @app.post(
        "/v1/trajectories",
        tags=["trajectories"],
        dependencies=[guard],
        openapi_extra=_TRAJECTORIES_BODY,
        response_model=Recorded,
        responses={
            409: {"model": Recorded, "description": "A record reuses a stored id with other content."},
            422: {"model": Recorded, "description": "Every record was rejected."},
        },
    )
    async def post_trajectories(request: Request) -> Recorded | JSONResponse:
        """Store a batch of trajectories; each invalid one is rejected with its reason. 200 when
        any record was valid; 422, with the same body, when every record was rejected; 409,
        with the same body, when any record reuses a stored id with other content (listed in
        `conflicts` with the stored version's `stored_hash`; the rest are stored as usual)."""
        body = await _body(request)
        if request.headers.get("content-type", "").split(";")[0].strip() in _JSONL_TYPES:
            lines = [line for line in body.splitlines() if line.strip()]
            if len(lines) > MAX_BATCH:
                raise HTTPException(413, f"at most {MAX_BATCH} trajectories per request, got {len(lines)}")
            result = await run_in_threadpool(svc.record_lines, lines)
        else:
            result = await run_in_threadpool(svc.record, _records(body))
        if result.all_rejected:
            return JSONResponse(result.model_dump(mode="json"), status_code=422)
        if result.conflicts:
            return JSONResponse(result.model_dump(mode="json"), status_code=409)
        return result

    @app.post("/v1/runs/{run_id}/outcome", tags=["trajectories"], dependencies=[guard])
    def report_outcome(run_id: str, outcome: Outcome) -> OutcomeSet:
        """Set a stored run's outcome; the learn flow folds it into the served versions' stats."""
        return svc.report_outcome(run_id, success=outcome.success, feedback=outcome.feedback)


def _records(body: bytes) -> list[Any]:
    """The records of a JSON body: an array, or an object with a `trajectories` array."""
    try:
        data = loads(body)
    except RecordError as exc:
        raise HTTPException(400, f"body: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("trajectories"), list):
        data = data["trajectories"]
    if not isinstance(data, list):
        raise HTTPException(400, 'body: expected a JSON array of trajectories or {"trajectories": [...]}')
    if len(data) > MAX_BATCH:
        raise HTTPException(413, f"at most {MAX_BATCH} trajectories per request, got {len(data)}")
    return data


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise HTTPException(413, f"body larger than {MAX_BODY_BYTES} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise HTTPException(413, f"body larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def app_from_environment() -> FastAPI:
    """The app for the settings of the environment (FLOWMEM_*), its store connected: what
    each worker process of `run(..., workers=N)` serves."""
    settings = Settings()
    service = Service(settings)
    service.store.prepare()  # imports and connects now, not on the first request
    service.warm()
    return create_app(settings, service=service)


def listener(bound: socket.socket) -> socket.socket:
    """The bound socket, saying it is TCP when it is: uvicorn binds the socket of its worker
    processes with `proto` 0, which accepted connections inherit, and asyncio turns Nagle's
    algorithm off only for those that say `IPPROTO_TCP` — so each keep-alive response after
    the first waited ~40 ms for the client's delayed ACK (uvicorn issue #3149). The same file
    descriptor; a Unix socket is returned as it is."""
    if bound.family not in (socket.AF_INET, socket.AF_INET6) or bound.proto == socket.IPPROTO_TCP:
        return bound
    return socket.socket(bound.family, bound.type, socket.IPPROTO_TCP, fileno=bound.detach())


def _serve_workers(config: Any) -> None:
    """`uvicorn.run` with workers, on a `listener` (uvicorn's own `Multiprocess` supervisor)."""
    from uvicorn.supervisors import Multiprocess

    with contextlib.suppress(KeyboardInterrupt):
        Multiprocess(config, sockets=[listener(config.bind_socket())]).run()


def run(settings: Settings, *, host: str, port: int, access_log: bool = False, workers: int = 1) -> None:
    """Serve the API with uvicorn until interrupted: HTTP parsed by httptools (h11, uvicorn's
    pure-Python default, costs ~0.5 ms more per request), one log line per request only with
    `access_log`.

    With `workers` > 1, uvicorn runs that many server processes on the port, each started by
    spawn (never fork: LanceDB does not survive one) and building its own app from the
    environment (`app_from_environment`); `settings` must then be the environment's.

    Raises:
        ValueError: if `workers` > 1 and `settings` are not the environment's.
    """
    import uvicorn

    if settings.api_token is None:
        log.warning("FLOWMEM_API_TOKEN is not set: the API serves reads only and refuses writes")
    options: dict[str, Any] = {
        "host": host,
        "port": port,
        "log_level": "info",
        "http": "httptools",
        "access_log": access_log,
    }
    if workers > 1:
        if settings != Settings():
            raise ValueError("with workers, each worker reads its settings from the environment (FLOWMEM_*)")
        app = f"{__name__}:app_from_environment"
        _serve_workers(uvicorn.Config(app, factory=True, workers=workers, **options))
        return
    service = Service(settings)
    service.store.prepare()  # imports and connects now, not on the first request
    service.warm()
    uvicorn.run(create_app(settings, service=service), **options)
