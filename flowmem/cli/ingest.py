"""The `flowmem ingest` command: validate and store trajectories from JSONL files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn

from flowmem.cli.common import JsonOpt, fail, print_json, progress_display
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import ingest_files
from flowmem.settings import Settings

__all__ = ["ingest"]


def ingest(
    files: Annotated[list[Path], typer.Argument(metavar="FILE", help="JSONL files, optionally gzipped.")],
    skip_existing: Annotated[
        bool,
        typer.Option("--skip-existing", help="Keep the stored run of an id sent again with other content."),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Validate and store trajectories; bad lines go to the quarantine file.

    Exit status 0 when every line was stored (or was already stored, the same), 1 when any was
    rejected or reused a stored id with other content (kept as stored; with --skip-existing
    such lines are reported but do not fail the command).
    """
    if missing := [str(p) for p in files if not p.is_file()]:
        raise fail(f"no such file: {', '.join(missing)}")
    settings = Settings()
    store = store_from(settings)
    sizes = {p: p.stat().st_size for p in files}
    with progress_display(
        TextColumn("[bold]ingest[/bold] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        quiet=as_json,
        transient=False,
    ) as progress:
        bars = {p: progress.add_task(p.name, total=sizes[p] or None) for p in files}
        report = ingest_files(
            files, store, settings, progress=lambda p, n: progress.update(bars[p], completed=n)
        )
    if as_json:
        print_json(
            {
                "stored": report.stored,
                "duplicates": report.duplicates,
                "rejected": len(report.rejected),
                "quarantine": str(report.quarantine),
                "conflicts": [
                    {"id": c.id, "stored_hash": c.stored_hash, "sent_hash": c.sent_hash}
                    for c in report.conflicts[:100]
                ],
                "reasons": [
                    {"file": r.source, "line": r.line, "reason": r.reason} for r in report.rejected[:100]
                ],
            }
        )
    else:
        for r in report.rejected[:10]:
            typer.echo(f"rejected {r.source}:{r.line}: {r.reason}", err=True)
        if len(report.rejected) > 10:
            typer.echo(f"... and {len(report.rejected) - 10} more", err=True)
        for c in report.conflicts[:10]:
            typer.echo(f"conflict: id {c.id!r} is stored with other content (hash {c.stored_hash})", err=True)
        if len(report.conflicts) > 10:
            typer.echo(f"... and {len(report.conflicts) - 10} more conflicts", err=True)
        typer.echo(report.summary())
    raise typer.Exit(1 if report.rejected or (report.conflicts and not skip_existing) else 0)
