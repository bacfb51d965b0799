"""The `flowmem api`, `flowmem dashboard` and `flowmem mcp` commands (registered on the app in
`flowmem.cli`)."""

from __future__ import annotations

from typing import Annotated

import typer

from flowmem.cli.common import fail
from flowmem.settings import Settings

__all__ = ["api", "dashboard", "mcp"]


_ACCESS_LOG = typer.Option("--access-log", help="Log every request (one INFO line each).")


def api(
    host: Annotated[str | None, typer.Option(help="Interface to listen on (FLOWMEM_API_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on (FLOWMEM_API_PORT).")] = None,
    access_log: Annotated[bool, _ACCESS_LOG] = False,
    workers: Annotated[
        int | None, typer.Option(min=1, max=64, help="Server processes, one per core (FLOWMEM_API_WORKERS).")
    ] = None,
) -> None:
    """Serve the HTTP API (OpenAPI docs at /docs) for the namespace FLOWMEM_NAMESPACE.

    Writes need `Authorization: Bearer <FLOWMEM_API_TOKEN>`; reads too when
    FLOWMEM_API_READ_TOKEN=true."""
    from flowmem.server.api import run

    settings = Settings()
    host, port = host or settings.api_host, port or settings.api_port
    _can_listen(host, port, "--port or FLOWMEM_API_PORT")
    run(settings, host=host, port=port, access_log=access_log, workers=workers or settings.api_workers)


def dashboard(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    host: Annotated[str | None, typer.Option(help="Interface to listen on (FLOWMEM_API_HOST).")] = None,
    access_log: Annotated[bool, _ACCESS_LOG] = False,
) -> None:
    """Serve the dashboard of workflow versions (and the HTTP API, on the same app) for the
    store FLOWMEM_DB and the namespace FLOWMEM_NAMESPACE; open http://HOST:PORT/.

    Rollback needs FLOWMEM_API_TOKEN; with FLOWMEM_API_READ_TOKEN=true, every page needs it."""
    from flowmem.server.api import run

    settings = Settings()
    host = host or settings.api_host
    _can_listen(host, port, "--port")
    typer.echo(f"flowmem dashboard: http://{host}:{port}/ (store {settings.db})")
    run(settings, host=host, port=port, access_log=access_log)


def _can_listen(host: str, port: int, port_option: str) -> None:
    """A one-line error, before uvicorn starts, when the address cannot be listened on."""
    import errno

    from flowmem.server.listen import listen_problem

    problem = listen_problem(host, port)
    if problem is None:
        return
    if problem.errno == errno.EADDRINUSE:
        hint = f"another process listens there: stop it, or choose another port ({port_option})"
    elif problem.errno == errno.EACCES:
        hint = f"a port below 1024 needs privileges: choose another ({port_option})"
    elif problem.errno == errno.EINVAL:
        hint = f"choose another ({port_option})"
    else:
        hint = "use an address of this machine (--host or FLOWMEM_API_HOST), e.g. 127.0.0.1"
    raise fail(f"cannot listen on {host}:{port}: {problem.strerror or problem}: {hint}")


def mcp() -> None:
    """Serve the MCP tools (search_workflows, get_workflow, record_trajectory,
    report_outcome) over stdio, for the namespace FLOWMEM_NAMESPACE."""
    from flowmem.server.mcp import run_stdio

    run_stdio(Settings())
