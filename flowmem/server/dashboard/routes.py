"""The dashboard's pages (`flowmem dashboard`): routes that read the store and render templates.

Every page is server-rendered HTML that works without JavaScript; the routes are left out of
the API's OpenAPI schema. Rollback goes through `Store.rollback`, as `flowmem workflows
rollback` does. Whatever goes wrong — a bad parameter (400), an unknown id or version (404), a
path no page has (404) — answers with the dashboard's own error page, never FastAPI's JSON
body; the API's routes keep their JSON errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, get_args
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from flowmem.agents.served_index import CONTEXT_K
from flowmem.induction.render.render import render_context
from flowmem.models import NAMESPACE_PATTERN, Workflow
from flowmem.policy.lifecycle import Status
from flowmem.retrieval.serving import served_versions
from flowmem.server.dashboard import charts
from flowmem.server.dashboard.clustermap import cluster_map
from flowmem.server.dashboard.detail import pitfall_sources, version_points
from flowmem.server.dashboard.home import DEFAULT_SORT, PAGE_SIZE, SORT_HELP, SORT_PATTERN, home_view
from flowmem.server.dashboard.pages import ROOT, Pages
from flowmem.server.dashboard.traces import add_trace_routes
from flowmem.server.dashboard.versions import explain, shown_fields
from flowmem.server.dashboard.views import learning_curve
from flowmem.server.service import Service
from flowmem.storage import NotFoundError, StoreError, pick_version

__all__ = ["API_PATHS", "PAGE_SIZE", "PageError", "PageRoute", "add_dashboard"]

Ns = Annotated[
    str | None, Query(pattern=NAMESPACE_PATTERN, description="a namespace: up to 64 letters, digits, _ or -")
]
_VERSION = "a version number, from 1"
_STATUSES: tuple[str, ...] = get_args(Status)
_KINDS: tuple[str, ...] = get_args(Workflow.model_fields["kind"].annotation)


def _either(choices: tuple[str, ...]) -> str:
    """`a, b or c`."""
    return ", ".join(choices[:-1]) + " or " + choices[-1] if len(choices) > 1 else choices[0]


def _one_of(choices: tuple[str, ...]) -> str:
    """The pattern of a filter: one of `choices`, or empty (the form's "any")."""
    return f"^({'|'.join(map(re.escape, choices))})?$"


API_PATHS = ("/v1/", "/health", "/docs", "/redoc", "/openapi.json")
"""Where the API's routes are: a path under these that no route has keeps FastAPI's JSON 404."""


class PageError(Exception):
    """What a page answers instead of itself: the dashboard's error page, with a status."""

    def __init__(self, status: int, message: str, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.details = status, message, details or []


def _bad_parameters(route: APIRoute, exc: RequestValidationError) -> list[str]:
    """One line per bad parameter: its name and what it accepts (the `description` of its
    `Query`), never the value sent (it may be long, or a secret)."""
    expected = {p.alias: p.field_info.description for p in route.dependant.query_params}
    lines = []
    for e in exc.errors():
        name = str(e.get("loc", ("", "?"))[-1])
        what = "missing" if e.get("type") == "missing" else "not valid"
        hint = expected.get(name) or str(e.get("msg", ""))
        lines.append(f"{name}: {what}; expected {hint}")
    return lines


class PageRoute(APIRoute):
    """A dashboard page: a bad parameter answers with the error page (400), an unknown id or
    version with it too (404), never with FastAPI's JSON body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                raise PageError(
                    400, "A parameter of this page is not valid.", _bad_parameters(self, exc)
                ) from None
            except NotFoundError as exc:
                raise PageError(404, str(exc)) from None

        return answer


def add_dashboard(app: FastAPI, service: Service) -> None:
    """Serve the dashboard's pages on `app`. Their errors answer with the dashboard's error
    page, and so does an HTTP error on a path no API route has (no page there: 404; a method
    the page does not take: 405); the API's routes keep FastAPI's JSON errors."""
    pages = Pages(service)
    app.include_router(_router(pages))

    async def page_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, PageError)
        return pages.error(request, exc.status, exc.message, details=exc.details)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        route = request.scope.get("route")
        unrouted = route is None and not request.url.path.startswith(API_PATHS)
        if exc.status_code >= 400 and (isinstance(route, PageRoute) or unrouted):
            message = "There is no page here." if exc.status_code == 404 else str(exc.detail)
            return pages.error(request, exc.status_code, message)
        return await http_exception_handler(request, exc)

    app.add_exception_handler(PageError, page_error)
    app.add_exception_handler(StarletteHTTPException, http_error)


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body())[:65_536].decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def _router(pages: Pages) -> APIRouter:
    """The dashboard's routes: the pages behind the read check, the login form before it."""
    router = APIRouter(include_in_schema=False, dependencies=[Depends(pages.reader)], route_class=PageRoute)
    _list_routes(router, pages)
    _workflow_routes(router, pages)
    _run_routes(router, pages)
    add_trace_routes(router, pages)
    open_router = APIRouter(include_in_schema=False, route_class=PageRoute)
    _login_routes(open_router, pages)
    open_router.include_router(router)
    return open_router


def _list_routes(router: APIRouter, pages: Pages) -> None:
    @router.get("/", response_class=HTMLResponse)
    def home(
        request: Request,
        ns: Ns = None,
        agent: str | None = None,
        status: Annotated[
            str | None, Query(pattern=_one_of(_STATUSES), description=_either(_STATUSES))
        ] = None,
        kind: Annotated[str | None, Query(pattern=_one_of(_KINDS), description=_either(_KINDS))] = None,
        q: Annotated[
            str | None, Query(max_length=2_000, description="a task of at most 2,000 characters")
        ] = None,
        page: Annotated[int, Query(ge=1, description="a page number, from 1")] = 1,
        sort: Annotated[str, Query(pattern=SORT_PATTERN, description=SORT_HELP)] = DEFAULT_SORT,
        retired: Annotated[bool, Query(description="true or false: list retired workflows too")] = False,
    ) -> HTMLResponse:
        space = pages.ns(ns)
        chosen = {"agent": agent, "status": status, "kind": kind}
        view = home_view(
            pages.home_cache.rows(space),
            pages.index(space),
            chosen=chosen,
            retired=retired,
            q=q or "",
            sort=sort,
            page=page,
        )
        return pages.render(
            request,
            "home.html",
            space,
            view=view,
            chosen=chosen,
            retired=retired,
            q=q or "",
            sort=sort,
            default_sort=DEFAULT_SORT,
            k=CONTEXT_K,
            index=pages.index(space),
            namespaces=sorted({*pages.store.namespaces(), space}),
        )

    @router.get("/learning", response_class=HTMLResponse)
    def learning(
        request: Request,
        ns: Ns = None,
        by: Annotated[str, Query(pattern="^(run|day)$", description="run or day")] = "run",
    ) -> HTMLResponse:
        space = pages.ns(ns)
        buckets = learning_curve(pages.store, space, by=by)
        x_title = "day" if by == "day" else "induction run (the runs recorded after it)"
        return pages.render(
            request,
            "learning.html",
            space,
            buckets=buckets,
            by=by,
            chart=charts.learning_svg(buckets, x_title=x_title),
            induced=any(r.kind == "induce" for r in pages.store.list_runs(namespace=space)),
        )

    @router.get("/clusters", response_class=HTMLResponse)
    def clusters(
        request: Request,
        ns: Ns = None,
        agent: Annotated[
            str | None, Query(max_length=200, description="an agent of this namespace (the menu lists them)")
        ] = None,
    ) -> HTMLResponse:
        space = pages.ns(ns)
        found = cluster_map(pages.store, space, agent=agent or None)
        href = pages.href(space)
        colours = charts.cluster_colours([c.id for c in found.clusters])
        chart = charts.cluster_svg(found, colours, lambda wid: href(f"/workflows/{wid}"))
        return pages.render(
            request, "clusters.html", space, map=found, chart=chart, colours=colours, noise=charts.NOISE
        )


def _workflow_routes(router: APIRouter, pages: Pages) -> None:
    @router.get("/workflows/{workflow_id}", response_class=HTMLResponse)
    def workflow(
        request: Request,
        workflow_id: str,
        ns: Ns = None,
        version: Annotated[int | None, Query(ge=1, description=_VERSION)] = None,
    ) -> HTMLResponse:
        space = pages.ns(ns)
        try:
            history = pages.store.history(workflow_id, namespace=space)
            w = pick_version(history, version)
        except NotFoundError as e:
            return pages.render(request, "error.html", space, status=404, message=str(e))
        sources = pages.store.get_trajectories(w.source_trajectory_ids[:50], namespace=space)
        return pages.render(
            request,
            "workflow.html",
            space,
            w=w,
            history=history,
            pitfalls=pitfall_sources(pages.store, w),
            sources=sources,
            more_sources=max(0, len(w.source_trajectory_ids) - len(sources)),
            chart=charts.versions_svg(version_points(history)),
            block=render_context([w]),
            serving=sorted(served_versions(history), key=lambda v: v.status != "active"),
            share=pages.index(space).params.candidate_share,
        )

    @router.get("/workflows/{workflow_id}/history", response_class=HTMLResponse)
    def history(request: Request, workflow_id: str, ns: Ns = None) -> HTMLResponse:
        space = pages.ns(ns)
        try:
            versions = pages.store.history(workflow_id, namespace=space)
        except NotFoundError as e:
            return pages.render(request, "error.html", space, status=404, message=str(e))
        transitions = pages.store.transitions(namespace=space, workflow_id=workflow_id)
        return pages.render(
            request, "history.html", space, wid=workflow_id, versions=versions, transitions=transitions
        )

    @router.get("/workflows/{workflow_id}/diff", response_class=HTMLResponse)
    def diff(
        request: Request,
        workflow_id: str,
        old: Annotated[int, Query(ge=1, description=_VERSION)],
        new: Annotated[int, Query(ge=1, description=_VERSION)],
        ns: Ns = None,
    ) -> HTMLResponse:
        space = pages.ns(ns)
        try:
            d = pages.store.diff(workflow_id, old, new, namespace=space)
        except NotFoundError as e:
            return pages.render(request, "error.html", space, status=404, message=str(e))
        story = explain(
            pages.store.history(workflow_id, namespace=space),
            pages.store.transitions(namespace=space, workflow_id=workflow_id),
            d,
        )
        return pages.render(request, "diff.html", space, d=d, fields=shown_fields(d), story=story)


def _run_routes(router: APIRouter, pages: Pages) -> None:
    @router.post("/runs/{run_id}/rollback", response_class=HTMLResponse)
    async def rollback(request: Request, run_id: str, ns: Ns = None) -> Response:
        space = pages.ns(ns)
        form = await _form(request)
        if not pages.guard.csrf_ok(request, form.get("csrf")):
            return pages.render(
                request, "error.html", space, status=403, message="refused: the form's CSRF check failed"
            )
        if not pages.guard.writable:
            return pages.render(
                request,
                "error.html",
                space,
                status=403,
                message="this server has no FLOWMEM_API_TOKEN set, so it accepts no writes",
            )
        if not (pages.guard.token_ok(form.get("token")) or pages.guard.signed_in(request)):
            return pages.render(
                request, "error.html", space, status=401, message="refused: missing or invalid token"
            )
        try:
            done = pages.store.rollback(run_id, namespace=space, note=form.get("note") or None)
        except StoreError as e:
            return pages.render(
                request,
                "error.html",
                space,
                status=409 if not isinstance(e, NotFoundError) else 404,
                message=str(e),
            )
        return RedirectResponse(pages.href(space)("/runs", done=done.id), status_code=303)


def _login_routes(router: APIRouter, pages: Pages) -> None:
    @router.get("/login", response_class=HTMLResponse)
    def login_form(request: Request, next: str = "/") -> HTMLResponse:
        return pages.form(request, "login.html", pages.svc.namespace, next=next)

    @router.post("/login", response_class=HTMLResponse)
    async def login(request: Request) -> Response:
        form = await _form(request)
        target = form.get("next") or "/"
        if not target.startswith("/") or target.startswith("//"):
            target = "/"  # never redirect off this server
        ns = pages.svc.namespace
        if not pages.guard.csrf_ok(request, form.get("csrf")):
            return pages.render(
                request, "error.html", ns, status=403, message="refused: the form's CSRF check failed"
            )
        if not pages.guard.token_ok(form.get("token")):
            return pages.render(
                request, "login.html", ns, status=401, next=target, csrf=form.get("csrf"), error="wrong token"
            )
        response = RedirectResponse(target, status_code=303)
        pages.guard.sign_in(response, request)
        return response

    @router.get("/static/dashboard.css")
    def css() -> Response:
        body = (ROOT / "static" / "dashboard.css").read_text(encoding="utf-8")
        return Response(body, media_type="text/css", headers={"Cache-Control": "max-age=300"})
