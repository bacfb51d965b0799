"""The search route's hot path: a well-formed `GET /v1/workflows/search` answered before
FastAPI's routing, dependency solving and parameter validation, which cost more than the
rest of the request but the search itself (~0.4 ms on a 2-core machine, against ~0.2 ms for
everything else around a search).

Only requests whose every parameter is plainly valid take it, with the answer the route
gives (the same JSON, status and headers: `Service.search_json`); anything else — a
parameter missing, repeated, out of range or not a plain number, a read token required and
not given exactly, another method, a mounted root path — goes on to the route, which
answers or refuses it as always. The route stays what OpenAPI describes.
"""

from __future__ import annotations

import hmac

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from flowmem.server.service import Service

__all__ = ["MAX_K", "MAX_TASK", "PATH", "SearchFastPath", "plain_search", "search_body"]

PATH = "/v1/workflows/search"
"""The route it answers for."""

MAX_TASK = 10_000
"""The longest task a search takes (the route's `Query(max_length=...)`)."""
MAX_K = 20
"""The largest k a search takes (the route's `Query(le=...)`)."""
_KNOWN = frozenset(("task", "k", "agent"))


def plain_search(query_string: bytes) -> tuple[str, int, str | None] | None:
    """The task, k and agent of a query string the route would accept as it is, or None
    when the route should judge it (its validation errors are its own)."""
    params = QueryParams(query_string)  # decoded as the route decodes it
    given = [key for key, _ in params.multi_items() if key in _KNOWN]
    if len(given) != len(set(given)):
        return None  # a repeated parameter: the route picks which one counts
    task, k, agent = params.get("task"), params.get("k", "3"), params.get("agent")
    if task is None or not 1 <= len(task) <= MAX_TASK:
        return None
    if not (k.isascii() and k.isdigit() and len(k) <= 2 and 1 <= int(k) <= MAX_K):
        return None
    return task, int(k), agent


class SearchFastPath:
    """ASGI middleware: answers plainly valid searches itself, passes everything else on."""

    def __init__(self, app: ASGIApp, *, service: Service, open_reads: bool, token: bytes | None) -> None:
        """`open_reads`: reads need no token; else they need `token` (none when it is None)."""
        self.app, self.service, self.open_reads, self.token = app, service, open_reads, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "GET"
            and scope["path"] == PATH
            and not scope.get("root_path")
            and self._authorized(scope)
        ):
            found = plain_search(scope["query_string"])
            if found is not None:
                await self._answer(found, scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        """Reads are open, or the first Authorization header is exactly `Bearer <token>`."""
        if self.open_reads:
            return True
        if self.token is None:
            return False
        header = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        return header[:7].lower() == b"bearer " and hmac.compare_digest(header[7:], self.token)

    async def _answer(
        self, found: tuple[str, int, str | None], scope: Scope, receive: Receive, send: Send
    ) -> None:
        body = await search_body(self.service, *found)
        await Response(body, media_type="application/json")(scope, receive, send)


async def search_body(svc: Service, task: str, k: int, agent: str | None) -> bytes:
    """A search's JSON, for this path and the route alike. A search between two index checks
    is about a millisecond of CPU and no I/O: it runs on the event loop, and its JSON is
    written as is (not validated again against the response model it was built as). One that
    will check the store, or reload it, goes to a worker thread."""
    if svc.search_is_cpu_only():
        return svc.search_json(task, k, agent=agent)
    return await run_in_threadpool(svc.search_json, task, k, agent=agent)
