"""The dashboard of one service (`Pages`): its store, caches, guard and templates, and what
every page's routes use to render (the template filters)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.resources import files
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup, escape

from flowmem.agents.served_index import ServedIndex
from flowmem.induction.render.render import where_from
from flowmem.models import NAMESPACE_PATTERN, PLACEHOLDER
from flowmem.server.dashboard.counts import counted
from flowmem.server.dashboard.security import Guard
from flowmem.server.dashboard.views import HomeCache
from flowmem.server.service import Service

__all__ = ["ROOT", "Pages"]

ROOT = files("flowmem.server.dashboard")
"""The package's folder: templates/ and static/."""


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(ROOT / "templates")), autoescape=True)
    env.filters["args"] = _args
    env.filters["where_from"] = where_from
    env.filters["bdi"] = _bdi
    env.filters["counted"] = counted
    env.filters["isolated"] = _isolated
    env.filters["pct"] = lambda v: "—" if v is None else f"{v:.0%}"
    env.filters["num"] = lambda v, d=1: "—" if v is None else f"{v:.{d}f}"
    return env


def _bdi(text: Any) -> Markup:
    """Text someone else wrote (a task, a query, a name), isolated from the page around it: a
    right-to-left character in it cannot reorder the heading or line it sits in."""
    return Markup(f"<bdi>{escape(text)}</bdi>")


def _isolated(text: Any) -> str:
    """`_bdi` for where no element can go (the page's title): the text between FIRST STRONG
    ISOLATE and POP DIRECTIONAL ISOLATE."""
    return f"\u2068{text}\u2069"


def _args(args: Mapping[str, object]) -> Markup:
    """Step arguments as `key=value` text, every `{placeholder}` highlighted."""
    parts = []
    for key, value in args.items():
        text = str(escape(value if isinstance(value, str) else repr(value)))
        # A placeholder survives escaping unchanged (it holds no character HTML escapes).
        text = PLACEHOLDER.sub(lambda m: f'<mark class="ph">{m.group(0)}</mark>', text)
        parts.append(f'<span class="arg">{escape(key)}=<code>{text}</code></span>')
    return Markup(", ".join(parts))


class Pages:
    """The dashboard of one service: its store, caches, guard and templates."""

    def __init__(self, service: Service) -> None:
        self.svc = service
        self.store = service.store
        self.guard = Guard(service.settings)
        self.home_cache = HomeCache(service.store)
        self.env = _environment()
        self._indexes: dict[str, ServedIndex] = {}

    def ns(self, given: str | None) -> str:
        return given or self.svc.namespace

    def index(self, ns: str) -> ServedIndex:
        if ns == self.svc.namespace:
            return self.svc.index
        if ns not in self._indexes:
            self._indexes[ns] = ServedIndex.serving(self.store, ns, self.svc.settings)
        return self._indexes[ns]

    def href(self, ns: str) -> Any:
        def make(path: str, **params: Any) -> str:
            if ns != self.svc.namespace:
                params["ns"] = ns
            kept = {k: v for k, v in params.items() if v is not None and v != ""}
            return quote(path, safe="/") + ("?" + urlencode(kept) if kept else "")

        return make

    def render(
        self, request: Request, template: str, ns: str, *, status: int = 200, **ctx: Any
    ) -> HTMLResponse:
        html = self.env.get_template(template).render(
            request=request,
            ns=ns,
            href=self.href(ns),
            signed_in=self.guard.signed_in(request),
            read_token=self.guard.read_token,
            status=status,
            **ctx,
        )
        return HTMLResponse(html, status_code=status)

    def error(
        self, request: Request, status: int, message: str, *, details: list[str] | None = None
    ) -> HTMLResponse:
        """The dashboard's error page: `message`, then `details` as a list; the namespace shown is
        the one asked for when it is valid (a bad `ns` is itself the error)."""
        asked = request.query_params.get("ns")
        ns = asked if asked and re.fullmatch(NAMESPACE_PATTERN, asked) else self.svc.namespace
        return self.render(request, "error.html", ns, status=status, message=message, details=details or [])

    def form(self, request: Request, template: str, ns: str, **ctx: Any) -> HTMLResponse:
        """A page with a form, its CSRF token rendered in and set as a cookie."""
        token = self.guard.csrf_value(request)
        page = self.render(request, template, ns, csrf=token, error=None, **ctx)
        self.guard.set_csrf(page, request, token)
        return page

    def reader(self, request: Request) -> None:
        """Send a browser that must sign in to the login form first."""
        if not self.guard.may_read(request):
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            raise HTTPException(
                303, "sign in first", headers={"Location": "/login?" + urlencode({"next": target})}
            )
