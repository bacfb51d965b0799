"""The API's docs pages, /docs (Swagger UI) and /redoc, served with local assets.

FastAPI's own pages load their JavaScript and CSS from a CDN, so they are blank offline or
behind a firewall. These pages load the same Swagger UI and ReDoc from the files the
`fastapi-offline` package ships, mounted under `ASSETS`; nothing on them points off the server.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS", "add_docs"]

ASSETS = "/docs-assets"
"""Where the Swagger UI and ReDoc files are served."""


def _static_dir() -> Path:
    return Path(str(files("fastapi_offline") / "static"))


def add_docs(app: FastAPI) -> None:
    """Serve /docs and /redoc on `app` (made with `docs_url=None, redoc_url=None`)."""
    app.mount(ASSETS, StaticFiles(directory=_static_dir()), name="docs-assets")
    openapi = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False)
    def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi,
            title=f"{app.title} API — Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            # No validator badge: Swagger UI would send the spec to an outside validator.
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi,
            title=f"{app.title} API — ReDoc",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        )
