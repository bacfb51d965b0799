"""The `flowmem workflows` commands: list, show, history, diff, runs, rollback (and the status
changes of `flowmem.cli.lifecycle`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from flowmem.cli import lifecycle, render
from flowmem.cli.common import JsonOpt, configured_store, require_namespace, show
from flowmem.models import InductionRun

__all__ = ["app"]

app = typer.Typer(
    help="Inspect workflows, their versions and runs; roll back.", no_args_is_help=True, rich_markup_mode=None
)


@app.command("list")
def workflows_list(
    status: Annotated[str | None, typer.Option(help="candidate, active, deprecated or retired.")] = None,
    at: Annotated[str | None, typer.Option(help="As of a run tag or table version.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The latest version of every workflow."""
    at_ref: str | int | None = int(at) if at is not None and at.isdigit() else at
    store = configured_store()
    require_namespace(store, store.settings.namespace)
    show(store.list_workflows(status=status, at=at_ref), as_json, render.workflow_table)


@app.command("show")
def workflows_show(
    workflow_id: str,
    version: Annotated[int | None, typer.Option(help="Default: the latest.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """One workflow version: steps with placeholders, parameters, pitfalls."""
    show(configured_store().get_workflow(workflow_id, version), as_json, render.workflow_panel)


@app.command("history")
def workflows_history(workflow_id: str, as_json: JsonOpt = False) -> None:
    """Every version of a workflow with its parent, provenance and status transitions."""
    store = configured_store()
    show(store.history(workflow_id), as_json, render.history_table)
    if as_json:
        return
    for t in store.transitions(workflow_id=workflow_id):
        typer.echo(f"{t['at']:%Y-%m-%d %H:%M:%S}  v{t['version']}: {t['old']} -> {t['new']} ({t['reason']})")


@app.command("diff")
def workflows_diff(workflow_id: str, old: int, new: int, as_json: JsonOpt = False) -> None:
    """Step-level diff between two versions of a workflow."""
    show(configured_store().diff(workflow_id, old, new), as_json, render.diff_text)


@app.command("runs")
def workflows_runs(as_json: JsonOpt = False) -> None:
    """Induction runs and rollbacks, with their tags."""
    show(configured_store().list_runs(), as_json, render.runs_table)


@app.command("rollback")
def workflows_rollback(
    run_id: str,
    note: Annotated[str | None, typer.Option(help="Why (kept with the rollback).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Restore the workflows to the table version before a run (recorded as a new version)."""
    store = configured_store()
    target = store.get_run(run_id)

    def done(r: InductionRun) -> Text:
        return Text(
            f"rolled back {run_id}: workflows table restored to version {target.base_version} "
            f"as new version {r.table_version} (tag {r.tag})"
        )

    show(store.rollback(run_id, note=note), as_json, done)


app.command("promote")(lifecycle.promote)
app.command("deprecate")(lifecycle.deprecate)
app.command("retire")(lifecycle.retire)
