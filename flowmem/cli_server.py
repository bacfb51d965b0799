"""The `flowmem api` and `flowmem mcp` commands (registered on the app in `flowmem.cli`)."""

from __future__ import annotations

from typing import Annotated

import typer

from flowmem.settings import Settings

__all__ = ["api", "mcp"]


def api(
    host: Annotated[str | None, typer.Option(help="Interface to listen on (FLOWMEM_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (FLOWMEM_API_PORT).")] = None,
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs) for the namespace FLOWMEM_NAMESPACE.

    Writes need `Authorization: Bearer <FLOWMEM_API_TOKEN>`; reads too when
    FLOWMEM_API_READ_TOKEN=true."""
    from flowmem.server.api import run

    settings = Settings()
    run(settings, host=host or settings.api_host, port=port or settings.api_port)


def mcp() -> None:
    """Serve the MCP tools (search_workflows, get_workflow, record_trajectory,
    report_outcome) over stdio, for the namespace FLOWMEM_NAMESPACE."""
    from flowmem.server.mcp import run_stdio

    run_stdio(Settings())
