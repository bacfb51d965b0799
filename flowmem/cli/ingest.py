"""The `flowmem ingest` command: validate and store trajectories from JSONL files."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn

from flowmem.cli.common import JsonOpt, fail, print_json, progress_display
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import IngestReport, ingest_files
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
    such lines are reported but do not fail the command), and 1 when a file held no line at
    all: each such file is one line on stderr, and when no file held any, nothing is opened.
    """
    if folders := [str(p) for p in files if p.is_dir()]:
        example = Path(folders[0]) / "*.jsonl"
        raise fail(
            f"{', '.join(folders)}: a directory, not a file: give the JSONL files in it (e.g. {example})"
        )
    if missing := [str(p) for p in files if not p.is_file()]:
        raise fail(f"no such file: {', '.join(missing)}")
    emptiness = {p: why for p in files if (why := _nothing_in(p))}
    empty = list(emptiness)
    settings = Settings()
    if len(empty) == len(files):  # the store is not even opened
        if as_json:
            print_json(_payload(IngestReport(quarantine=settings.quarantine_path), empty))
            raise typer.Exit(1)
        said = ", ".join(f"{p} {why}" for p, why in emptiness.items())
        raise fail(f"{said}: no run to ingest, nothing stored", 1)
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
        print_json(_payload(report, empty))
    else:
        _tell(report, files, emptiness)
    failed = report.rejected or empty or (report.conflicts and not skip_existing)
    raise typer.Exit(1 if failed else 0)


def _named(paths: list[Path]) -> str:
    return ", ".join(map(str, paths))


def _nothing_in(path: Path) -> str | None:
    """How a file (plain or gzipped) holds nothing (`is empty`, `holds only blank lines`), or
    None when it holds something; reading stops at its first byte that is not blank. A file
    that cannot be read as it claims is not said to be empty: reading it tells why."""
    opener = gzip.open if path.name.endswith(".gz") else open
    read = 0
    try:
        with opener(path, "rb") as f:
            while chunk := f.read(65536):
                if chunk.strip():
                    return None
                read += len(chunk)
    except (OSError, EOFError, zlib.error):
        return None
    return "holds only blank lines" if read else "is empty"


def _payload(report: IngestReport, empty: list[Path]) -> dict[str, object]:
    return {
        "stored": report.stored,
        "duplicates": report.duplicates,
        "rejected": len(report.rejected),
        "quarantine": str(report.quarantine),
        "empty": [str(p) for p in empty],
        "conflicts": [
            {"id": c.id, "stored_hash": c.stored_hash, "sent_hash": c.sent_hash}
            for c in report.conflicts[:100]
        ],
        "reasons": [{"file": r.source, "line": r.line, "reason": r.reason} for r in report.rejected[:100]],
    }


def _tell(report: IngestReport, files: list[Path], emptiness: dict[Path, str]) -> None:
    """What the terminal is told: each empty file, the rejected lines (or, when no line could
    be stored, one line saying so) and conflicts on stderr; the summary on stdout."""
    for p, why in emptiness.items():
        typer.echo(f"warning: {p} {why}: no run in it", err=True)
    if report.rejected and report.valid == 0:
        first = report.rejected[0]
        read = [p for p in files if p not in emptiness]
        raise fail(
            f"no line of {_named(read)} could be stored: all {len(report.rejected)} were rejected "
            f"(first, {first.source}:{first.line}: {first.reason}); each line and its reason are "
            f"in {report.quarantine}",
            1,
        )
    for r in report.rejected[:10]:
        typer.echo(f"rejected {r.source}:{r.line}: {r.reason}", err=True)
    if len(report.rejected) > 10:
        typer.echo(f"... and {len(report.rejected) - 10} more", err=True)
    for c in report.conflicts[:10]:
        typer.echo(f"conflict: id {c.id!r} is stored with other content (hash {c.stored_hash})", err=True)
    if len(report.conflicts) > 10:
        typer.echo(f"... and {len(report.conflicts) - 10} more conflicts", err=True)
    typer.echo(report.summary())
