"""The `flowmem run` and `flowmem serve` commands: flows through Prefect (registered on the app
in `flowmem.cli`)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from flowmem.cli.common import (
    JsonOpt,
    dumped,
    fail,
    inducer_or_fail,
    out,
    prefect_env,
    print_json,
    quiet_prefect,
)
from flowmem.cli.helptext import choices

__all__ = ["DEPLOYED", "FLOWS", "quiet_logs", "run_flow", "serve"]

FLOWS = ("collect", "induce", "learn", "cycle")
"""The flows `flowmem run` runs."""

DEPLOYED = ("collect", "induce", "learn", "cycle", "maintain")
"""The deployments `flowmem serve` serves (`flowmem.flows.serve.DEPLOYMENTS`, named here so
that help needs no Prefect import; a test checks they agree)."""


def quiet_logs(as_json: bool) -> None:
    """What `flowmem run` shows on stderr without `-v`: Dask's logs at WARNING (its INFO lines
    tell of every connection, worker and nanny), and with `--json` Prefect's console at WARNING
    too (no flow and task run states, no temporary-server notice), so that a run that goes well
    prints its JSON and nothing else. Only the terminal is quieted: run logs still reach the
    Prefect server. A variable already set (DASK_LOGGING__DISTRIBUTED,
    PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL) wins."""
    # Read when Prefect and Dask are first imported, here and in the processes this one starts
    # (the temporary server, the workers of FLOWMEM_DASK_ADDRESS=local:N), which inherit them.
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    if as_json:
        quiet_prefect()


def run_flow(
    name: Annotated[str, typer.Argument(metavar="FLOW", help=f"The flow: {', '.join(FLOWS)}.")],
    inducer: Annotated[
        str, typer.Option(metavar="[rule|llm]", help="How workflows are induced (induce and cycle).")
    ] = "rule",
    as_json: JsonOpt = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Show Prefect's and Dask's INFO logs on stderr (--json too)."),
    ] = False,
) -> None:
    """Run one flow once, as Prefect runs it (a temporary local server when none is configured).

    With --json, stdout holds the flow's result as JSON and stderr only warnings and errors
    (-v for Prefect's and Dask's logs)."""
    if name not in FLOWS:
        raise fail(f"unknown flow {name!r}: use one of {', '.join(FLOWS)}")
    if name in ("induce", "cycle"):  # a bad --inducer, or an LLM that cannot serve, before any run
        from flowmem.settings import Settings

        inducer_or_fail(inducer, Settings())
    if not verbose:
        quiet_logs(as_json)
    prefect_env()
    from flowmem.flows import pipeline

    flow = getattr(pipeline, f"{name}_flow")
    result = flow(inducer=inducer) if name in ("induce", "cycle") else flow()  # the flow's model
    if as_json:
        print_json(dumped(result))
    else:
        out.print_json(data=dumped(result))


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
