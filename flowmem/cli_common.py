"""What the `flowmem` commands share: consoles, the --json option, errors, Prefect defaults."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Any

import typer
from rich.console import Console

__all__ = ["JsonOpt", "fail", "prefect_env", "print_json", "err", "out"]

out = Console()
err = Console(stderr=True)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]


def print_json(data: Any) -> None:
    """Print one line of JSON to stdout (no rich markup, no wrapping)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str, indent=None) + "\n")


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print an error to stderr; the exit to raise (`raise fail(...)`)."""
    err.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


def prefect_env() -> None:
    """Offline-friendly Prefect defaults, unless the environment says otherwise."""
    # The temporary server can take more than Prefect's default 20 s to start on 2 busy cores;
    # the telemetry heartbeat fails offline.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
