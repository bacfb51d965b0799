"""The `flowmem run` and `flowmem serve` commands: flows through Prefect (registered on the app
in `flowmem.cli`)."""

from __future__ import annotations

from typing import Annotated

import typer

from flowmem.cli.common import JsonOpt, fail, out, prefect_env, print_json
from flowmem.cli.helptext import choices

__all__ = ["DEPLOYED", "FLOWS", "run_flow", "serve"]

FLOWS = ("collect", "induce", "learn", "cycle")
"""The flows `flowmem run` runs."""

DEPLOYED = ("collect", "induce", "learn", "cycle", "maintain")
"""The deployments `flowmem serve` serves (`flowmem.flows.serve.DEPLOYMENTS`, named here so
that help needs no Prefect import; a test checks they agree)."""


def run_flow(
    name: Annotated[str, typer.Argument(metavar="FLOW", help=f"The flow: {', '.join(FLOWS)}.")],
    inducer: Annotated[
        str, typer.Option(metavar="[rule|llm]", help="How workflows are induced (induce and cycle).")
    ] = "rule",
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
        float | None,
        typer.Option(
            metavar="SECONDS", help="Run every SECONDS seconds instead of the cron schedules (a quick check)."
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(metavar=choices(DEPLOYED), help="Serve only this deployment (repeat for more)."),
    ] = None,
) -> None:
    """Serve the scheduled flows (collect, induce, learn; cycle paused) from this process.

    Needs no work pool; its deployments are named <name>-served, so `prefect deploy`'s can share
    the server. Stop with Ctrl-C or SIGTERM: its schedules are paused on stop and re-activated on
    the next start."""
    if unknown := [name for name in only or () if name not in DEPLOYED]:
        raise fail(f"unknown deployment {unknown[0]!r}: use {', '.join(DEPLOYED)}")
    prefect_env()
    from flowmem.flows.serve import serve as serve_flows

    try:
        serve_flows(interval=interval, only=tuple(only or ()))
    except KeyboardInterrupt:
        pass
    typer.echo("flowmem serve stopped")
