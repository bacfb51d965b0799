"""The `flowmem maintain` command (registered on the app in `flowmem.cli`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer

from flowmem.cli.common import JsonOpt, open_existing, print_json
from flowmem.jobs.maintain import DEFAULT_KEEP
from flowmem.jobs.maintain import maintain as maintain_job
from flowmem.settings import Settings

__all__ = ["maintain"]


def maintain(
    keep: Annotated[
        float,
        typer.Option(
            min=0,
            metavar="SECONDS",
            help="Keep table versions younger than this many seconds (0 only when nothing else "
            "has the store open: a reader of an older version would lose its files).",
        ),
    ] = DEFAULT_KEEP.total_seconds(),
    as_json: JsonOpt = False,
) -> None:
    """Compact every table, prune old versions (keeping every one a run tag or a rollback
    needs), then check out every run tag. The `maintain` flow runs this hourly."""
    report = maintain_job(open_existing(Settings()), keep=timedelta(seconds=keep))
    if as_json:
        print_json(report.summary().model_dump(mode="json"))
        return
    for line in report.lines():
        typer.echo(line)
