"""The `flowmem workflows promote / deprecate / retire` commands: a workflow's lifecycle status,
changed by hand (registered in `flowmem.cli.workflows`)."""

from __future__ import annotations

import getpass
from typing import Annotated, Literal, get_args

import typer

from flowmem.cli.common import JsonOpt, err, fail, open_existing, print_json
from flowmem.policy.lifecycle import Status
from flowmem.settings import Settings

__all__ = ["STATUSES", "WorkflowArg", "deprecate", "promote", "reason", "retire"]

STATUSES: tuple[str, ...] = get_args(Status)
"""A workflow version's statuses, as `--status` takes them."""

WorkflowArg = Annotated[str, typer.Argument(help="The workflow's id (`flowmem workflows list` shows them).")]
VersionOpt = Annotated[int | None, typer.Option(metavar="N", help="The version (default: the latest).")]
WhyOpt = Annotated[str, typer.Option(metavar="TEXT", help="Why: recorded with the change (required).")]
ByOpt = Annotated[
    str | None, typer.Option(metavar="NAME", help="Who: recorded with the change (default: your user name).")
]


def reason(why: str | None, note: str | None) -> str | None:
    """The reason of a status change given as `--why`, or as the deprecated `--note` (which
    `workflows rollback` took before every status change took `--why`), with a warning."""
    if note is None:
        return why
    if why is not None:
        raise fail("--note is the old name of --why: give --why only")
    err.print("[yellow]warning:[/yellow] --note is deprecated: use --why")
    return note


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
    workflow_id: WorkflowArg,
    why: WhyOpt,
    version: VersionOpt = None,
    by: ByOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Serve a version as the workflow's active one (an active one it replaces is deprecated)."""
    _apply("promote", workflow_id, version, why, by, as_json)


def deprecate(
    workflow_id: WorkflowArg,
    why: WhyOpt,
    version: VersionOpt = None,
    by: ByOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Stop serving a version (it stays readable)."""
    _apply("deprecate", workflow_id, version, why, by, as_json)


def retire(
    workflow_id: WorkflowArg,
    why: WhyOpt,
    version: VersionOpt = None,
    by: ByOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Stop serving a workflow: every served version, or one (they stay readable)."""
    _apply("retire", workflow_id, version, why, by, as_json)
