"""The `flowmem workflows` commands: list, show, history, diff, runs, rollback (and the status
changes of `flowmem.cli.lifecycle`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from flowmem.cli import lifecycle, render
from flowmem.cli.common import JsonOpt, configured_store, require_namespace, show
from flowmem.cli.helptext import Command, Group, choices
from flowmem.cli.lifecycle import STATUSES, WorkflowArg
from flowmem.models import InductionRun

__all__ = ["app"]

app = typer.Typer(
    cls=Group,
    help="Inspect workflows, their versions and runs; roll back.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("list", cls=Command)
def workflows_list(
    status: Annotated[
        str | None, typer.Option(metavar=choices(STATUSES), help="Only the workflows in this status.")
    ] = None,
    at: Annotated[str | None, typer.Option(metavar="TAG", help="As of a run tag or table version.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The latest version of every workflow."""
    at_ref: str | int | None = int(at) if at is not None and at.isdigit() else at
    store = configured_store()
    require_namespace(store, store.settings.namespace)
    show(store.list_workflows(status=status, at=at_ref), as_json, render.workflow_table)


@app.command("show", cls=Command)
def workflows_show(
    workflow_id: WorkflowArg,
    version: Annotated[
        int | None, typer.Option(metavar="N", help="The version (default: the latest).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """One workflow version: steps with placeholders, parameters, pitfalls."""
    show(configured_store().get_workflow(workflow_id, version), as_json, render.workflow_panel)


@app.command("history", cls=Command)
def workflows_history(workflow_id: WorkflowArg, as_json: JsonOpt = False) -> None:
    """Every version of a workflow with its parent, provenance and status transitions."""
    store = configured_store()
    show(store.history(workflow_id), as_json, render.history_table)
    if as_json:
        return
    for t in store.transitions(workflow_id=workflow_id):
        typer.echo(f"{t.at:%Y-%m-%d %H:%M:%S}  v{t.version}: {t.old} -> {t.new} ({t.reason})")


@app.command("diff", cls=Command)
def workflows_diff(
    workflow_id: WorkflowArg,
    old: Annotated[int, typer.Argument(help="The version to compare from.")],
    new: Annotated[int, typer.Argument(help="The version to compare to.")],
    as_json: JsonOpt = False,
) -> None:
    """Step-level diff between two versions of a workflow."""
    show(configured_store().diff(workflow_id, old, new), as_json, render.diff_text)


@app.command("runs", cls=Command)
def workflows_runs(as_json: JsonOpt = False) -> None:
    """Induction runs and rollbacks, with their tags."""
    show(configured_store().list_runs(), as_json, render.runs_table)


@app.command("rollback", cls=Command)
def workflows_rollback(
    run_id: Annotated[str, typer.Argument(help="The run to undo (`flowmem workflows runs` lists them).")],
    why: Annotated[str | None, typer.Option(metavar="TEXT", help="Why: recorded with the rollback.")] = None,
    note: Annotated[str | None, typer.Option(hidden=True, help="Deprecated: --why.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Restore the workflows to the table version before a run (recorded as a new version)."""
    why = lifecycle.reason(why, note)
    store = configured_store()
    target = store.get_run(run_id)

    def done(r: InductionRun) -> Text:
        return Text(
            f"rolled back {run_id}: workflows table restored to version {target.base_version} "
            f"as new version {r.table_version} (tag {r.tag})"
        )

    show(store.rollback(run_id, note=why), as_json, done)


app.command("promote", cls=Command)(lifecycle.promote)
app.command("deprecate", cls=Command)(lifecycle.deprecate)
app.command("retire", cls=Command)(lifecycle.retire)
