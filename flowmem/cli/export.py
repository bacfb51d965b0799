"""The `flowmem export` commands: served workflows as agent skill folders, or as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from flowmem.cli.common import fail, open_existing, require_namespace
from flowmem.cli.helptext import Command, Group
from flowmem.settings import Settings

__all__ = ["app"]

app = typer.Typer(
    cls=Group,
    help="Export the served workflows for other tools.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command(cls=Command)
def skills(
    directory: Annotated[
        Path, typer.Argument(metavar="DIRECTORY", help="Folder to write one skill folder per workflow into.")
    ],
) -> None:
    """Write each served workflow as DIRECTORY/<name>/SKILL.md (front matter name and
    description; when to use, steps, parameters, pitfalls, version). Again later: only what
    changed is rewritten, and the skills of workflows no longer served are removed."""
    from flowmem.interchange.skills import export_skills

    if directory.exists() and not directory.is_dir():
        raise fail(f"{directory} exists and is not a folder")
    settings = Settings()
    store = open_existing(settings)
    require_namespace(store, settings.namespace)
    workflows = store.served_workflows(namespace=settings.namespace)
    if not workflows:
        raise fail(f"no served workflow in namespace {settings.namespace!r}: run `flowmem induce` first")
    report = export_skills(workflows, directory)
    typer.echo(f"{directory}: {report.summary()}")


@app.command("json", cls=Command)
def as_json(
    out: Annotated[
        Path | None, typer.Argument(metavar="FILE", help="File to write (default: standard output).")
    ] = None,
) -> None:
    """Write the served workflows (one version each) as one JSON array."""
    settings = Settings()
    workflows = open_existing(settings).served_workflows(namespace=settings.namespace)
    text = json.dumps([w.model_dump(mode="json") for w in workflows], indent=2, ensure_ascii=False)
    if out is None:
        typer.echo(text)
    else:
        out.write_text(text + "\n")
        typer.echo(f"{out}: {len(workflows)} workflows", err=True)
