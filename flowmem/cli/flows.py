"""The `flowmem run` and `flowmem serve` commands: flows through Prefect (registered on the app
in `flowmem.cli`)."""

from __future__ import annotations

from typing import Annotated

import typer

from flowmem.cli.common import JsonOpt, fail, out, prefect_env, print_json

__all__ = ["FLOWS", "run_flow", "serve"]

FLOWS = ("collect", "induce", "learn", "cycle")


def run_flow(
    name: Annotated[str, typer.Argument(help="collect, induce, learn or cycle.")],
    inducer: Annotated[str, typer.Option(help="rule or llm (induce and cycle).")] = "rule",
    as_json: JsonOpt = False,
) -> None:
    """Run one flow once, as Prefect runs it (a temporary local server when none is configured)."""
    if name not in FLOWS:
        raise fail(f"unknown flow {name!r}: use one of {', '.join(FLOWS)}")
    prefect_env()
    from flowmem.flows import pipeline

    flow = getattr(pipeline, f"{name}_flow")
    result = flow(inducer=inducer) if name in ("induce", "cycle") else flow()
    if as_json:
        print_json(result)
    else:
        out.print_json(data=result)


def serve(
    interval: Annotated[
        float | None, typer.Option(help="Run every N seconds instead of the cron schedules (a quick check).")
    ] = None,
    only: Annotated[list[str] | None, typer.Option(help="Serve only these deployments.")] = None,
) -> None:
    """Serve the scheduled flows (collect, induce, learn; cycle paused) from this process.

    Needs no work pool; its deployments are named <name>-served, so `prefect deploy`'s can share
    the server. Stop with Ctrl-C or SIGTERM: its schedules are paused on stop and re-activated on
    the next start."""
    prefect_env()
    from flowmem.flows.serve import serve as serve_flows

    try:
        serve_flows(interval=interval, only=tuple(only or ()))
    except KeyboardInterrupt:
        pass
    typer.echo("flowmem serve stopped")
