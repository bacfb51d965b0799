"""The `flowmem workflows promote / deprecate / retire` commands: a workflow's lifecycle status,
changed by hand (registered in `flowmem.cli.workflows`)."""

from __future__ import annotations

import getpass
from typing import Annotated, Literal

import typer

from flowmem.cli.common import JsonOpt, open_existing, print_json
from flowmem.settings import Settings

__all__ = ["deprecate", "promote", "retire"]

VersionOpt = Annotated[int | None, typer.Option(help="The version (default: the latest).")]
WhyOpt = Annotated[str, typer.Option(help="Why: recorded with the change (required).")]
ByOpt = Annotated[str | None, typer.Option(help="Who: recorded with the change (default: your user name).")]


def _apply(
    verb: Literal["promote", "deprecate", "retire"],
    workflow_id: str,
    version: int | None,
    why: str,
    by: str | None,
    as_json: bool,
) -> None:
    from flowmem.jobs.status import set_status

    settings = Settings()
    store = open_existing(settings)
    # A StoreError (no such workflow or version, a change the lifecycle forbids) is one line,
    # exit status 1: `flowmem.cli.errors.ErrorsGroup`.
    done = set_status(
        store,
        workflow_id,
        verb,
        namespace=settings.namespace,
        version=version,
        why=why,
        by=by or getpass.getuser(),
    )
    if as_json:
        print_json([t.__dict__ for t in done])
        return
    if not done:
        typer.echo(f"{workflow_id}: nothing to change")
    for t in done:
        typer.echo(f"{t.workflow_id} v{t.version}: {t.old} -> {t.new} ({t.reason})")


def promote(
    workflow_id: str, why: WhyOpt, version: VersionOpt = None, by: ByOpt = None, as_json: JsonOpt = False
) -> None:
    """Serve a version as the workflow's active one (an active one it replaces is deprecated)."""
    _apply("promote", workflow_id, version, why, by, as_json)


def deprecate(
    workflow_id: str, why: WhyOpt, version: VersionOpt = None, by: ByOpt = None, as_json: JsonOpt = False
) -> None:
    """Stop serving a version (it stays readable)."""
    _apply("deprecate", workflow_id, version, why, by, as_json)


def retire(
    workflow_id: str, why: WhyOpt, version: VersionOpt = None, by: ByOpt = None, as_json: JsonOpt = False
) -> None:
    """Stop serving a workflow: every served version, or one (they stay readable)."""
    _apply("retire", workflow_id, version, why, by, as_json)
