"""The `flowmem` command line: thin calls into ingest, storage and the demo.

Every command reads its settings from FLOWMEM_* variables (FLOWMEM_DB selects the store,
FLOWMEM_NAMESPACE the tenant).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from flowmem import cli_bench, cli_demo, cli_eval, cli_export, cli_flows, cli_maintain, cli_server, cli_status
from flowmem import cli_render as render
from flowmem.cli_common import (
    JsonOpt,
    check_settings,
    err,
    fail,
    inducer_or_fail,
    open_existing,
    out,
    print_json,
    require_namespace,
)
from flowmem.cli_errors import ErrorsGroup
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import ingest_files
from flowmem.settings import Settings
from flowmem.storage import Store, StoreError

# Locals are never shown in tracebacks: they may hold keys or tokens.
# Plain help (no rich boxes): flags without `<bool>` metavars, as users expect.
app = typer.Typer(
    help="flowmem: online workflow induction for LLM agents.",
    cls=ErrorsGroup,  # an error a user can cause: one line, never a traceback
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)
app.callback()(check_settings)  # a bad FLOWMEM_* value: one line before any command
trajectories_app = typer.Typer(
    help="Inspect stored trajectories.", no_args_is_help=True, rich_markup_mode=None
)
workflows_app = typer.Typer(
    help="Inspect workflows, their versions and runs; roll back.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(trajectories_app, name="trajectories")
app.add_typer(workflows_app, name="workflows")
app.add_typer(cli_export.app, name="export")


def _store() -> Store:
    """The configured store, for a command that reads it (never created by reading)."""
    return open_existing(Settings())


@app.command()
def ingest(
    files: Annotated[list[Path], typer.Argument(help="JSONL files, optionally gzipped.")],
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
    with Progress(
        TextColumn("[bold]ingest[/bold] {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=as_json or not err.is_terminal,
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


@trajectories_app.command("count")
def trajectories_count(as_json: JsonOpt = False) -> None:
    """How many trajectories the namespace holds."""
    settings = Settings()
    n = open_existing(settings).count_trajectories(namespace=settings.namespace)
    print_json({"namespace": settings.namespace, "count": n}) if as_json else print(n)


@trajectories_app.command("list")
def trajectories_list(
    limit: Annotated[int, typer.Option(min=1, help="How many, newest first.")] = 20,
    agent: Annotated[str | None, typer.Option(help="Only this agent's runs.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The newest trajectories."""
    found = _store().list_trajectories(limit=limit, agent=agent)
    if as_json:
        print_json([t.model_dump(mode="json", exclude={"steps"}) | {"n_steps": len(t.steps)} for t in found])
        return
    out.print(render.trajectory_table(found))


@trajectories_app.command("show")
def trajectories_show(trajectory_id: str, as_json: JsonOpt = False) -> None:
    """One trajectory with its steps."""
    try:
        t = _store().get_trajectory(trajectory_id)
    except StoreError as e:
        raise fail(str(e), 1) from None
    if as_json:
        print_json(t.model_dump(mode="json"))
        return
    out.print(render.trajectory_panel(t))


@workflows_app.command("list")
def workflows_list(
    status: Annotated[str | None, typer.Option(help="candidate, active, deprecated or retired.")] = None,
    at: Annotated[str | None, typer.Option(help="As of a run tag or table version.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The latest version of every workflow."""
    at_ref: str | int | None = int(at) if at is not None and at.isdigit() else at
    store = _store()
    require_namespace(store, store.settings.namespace)
    try:
        found = store.list_workflows(status=status, at=at_ref)
    except StoreError as e:
        raise fail(str(e), 1) from None
    if as_json:
        print_json([w.model_dump(mode="json") for w in found])
        return
    out.print(render.workflow_table(found))


@workflows_app.command("show")
def workflows_show(
    workflow_id: str,
    version: Annotated[int | None, typer.Option(help="Default: the latest.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """One workflow version: steps with placeholders, parameters, pitfalls."""
    try:
        w = _store().get_workflow(workflow_id, version)
    except StoreError as e:
        raise fail(str(e), 1) from None
    if as_json:
        print_json(w.model_dump(mode="json"))
        return
    out.print(render.workflow_panel(w))


@workflows_app.command("history")
def workflows_history(workflow_id: str, as_json: JsonOpt = False) -> None:
    """Every version of a workflow with its parent, provenance and status transitions."""
    store = _store()
    try:
        versions = store.history(workflow_id)
    except StoreError as e:
        raise fail(str(e), 1) from None
    if as_json:
        print_json([w.model_dump(mode="json") for w in versions])
        return
    out.print(render.history_table(versions))
    for t in store.transitions(workflow_id=workflow_id):
        typer.echo(f"{t['at']:%Y-%m-%d %H:%M:%S}  v{t['version']}: {t['old']} -> {t['new']} ({t['reason']})")


@workflows_app.command("diff")
def workflows_diff(workflow_id: str, old: int, new: int, as_json: JsonOpt = False) -> None:
    """Step-level diff between two versions of a workflow."""
    try:
        d = _store().diff(workflow_id, old, new)
    except StoreError as e:
        raise fail(str(e), 1) from None
    if as_json:
        print_json(d.model_dump(mode="json"))
        return
    out.print(render.diff_text(d))


@workflows_app.command("runs")
def workflows_runs(as_json: JsonOpt = False) -> None:
    """Induction runs and rollbacks, with their tags."""
    runs = _store().list_runs()
    if as_json:
        print_json([r.model_dump(mode="json") for r in runs])
        return
    out.print(render.runs_table(runs))


@workflows_app.command("rollback")
def workflows_rollback(
    run_id: str,
    note: Annotated[str | None, typer.Option(help="Why (kept with the rollback).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Restore the workflows to the table version before a run (recorded as a new version)."""
    store = _store()
    try:
        target = store.get_run(run_id)
        r = store.rollback(run_id, note=note)
    except StoreError as e:
        raise fail(str(e), 1) from None
    if as_json:
        print_json(r.model_dump(mode="json"))
        return
    out.print(
        f"rolled back {run_id}: workflows table restored to version {target.base_version} "
        f"as new version {r.table_version} (tag {r.tag})",
        highlight=False,
    )


@app.command()
def induce(
    inducer: Annotated[str, typer.Option(help="rule or llm.")] = "rule",
    every: Annotated[
        bool, typer.Option("--all", help="Re-induce every cluster, not only changed ones.")
    ] = False,
    demos: Annotated[
        list[Path] | None,
        typer.Option("--from", help="Demonstrations (JSONL, optionally gzipped) to store first: offline."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Induce workflows from the namespace's trajectories; commit new versions as one tagged run.

    Only clusters whose runs changed since the last run are induced; with nothing new, nothing
    is done. `--from FILE` first stores FILE's runs as demonstrations: workflows induced from
    them alone are `offline`, and later online runs add versions to the same workflows."""
    from flowmem.jobs.induce import induce as induce_job

    settings = Settings()
    store = store_from(settings)
    inducer_ = inducer_or_fail(inducer, settings)  # a bad --inducer fails before anything is stored
    if demos:
        missing = [str(p) for p in demos if not p.is_file()]
        if missing:
            raise fail(f"no such file: {', '.join(missing)}")
        stored = ingest_files(demos, store, settings, demonstrations=True)
        if not as_json:
            typer.echo(f"demonstrations: {stored.summary()}", err=True)
    report = induce_job(store, settings, inducer_, namespace=settings.namespace, force=every)
    s = report.summary()
    if as_json:
        print_json(s)
    elif s["skipped"]:
        typer.echo(f"nothing new since run {s['tag']}: {s['trajectories']} trajectories, no run made")
    else:
        rejected = sum(s["llm_rejected"].values())
        usage = f" ({s['llm_retries']} retries, {rejected} rejected outputs)" if inducer == "llm" else ""
        typer.echo(
            f"run {s['run']}: {s['new_trajectories']} new of {s['trajectories']} trajectories, "
            f"{s['clusters_changed']} of {s['clusters']} clusters induced, "
            f"{s['versions_created']} new versions ({s['new_workflows']} new workflows), "
            f"{s['pitfall_notes']} pitfall notes, "
            f"{len(s['failed_clusters'])} failed clusters, {s['llm_calls']} LLM calls" + usage
        )
        if s["retired"]:
            shown = ", ".join(s["retired"][:10]) + (", ..." if len(s["retired"]) > 10 else "")
            typer.echo(f"retired {len(s['retired'])} workflows no longer induced: {shown}")
    failed = s["failed_clusters"]
    if failed and len(failed) == s["clusters_changed"]:  # nothing could be induced: not a success
        first = next(iter(failed.values()))
        raise fail(f"every cluster to induce failed ({len(failed)}), e.g. {first}", 1)


@app.command()
def search(
    task: Annotated[str, typer.Argument(metavar="TASK", help="The task to find workflows for.")],
    k: Annotated[int, typer.Option("--k", "-k", min=1, metavar="N", help="How many workflows.")] = 3,
    agent: Annotated[str | None, typer.Option(help="Only workflows for this agent.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The served workflows that fit a task best, as an agent would get them."""
    from flowmem.agents import WorkflowMemory
    from flowmem.server.payloads import hit_payload

    settings = Settings()
    with WorkflowMemory(settings, store=open_existing(settings)) as memory:
        require_namespace(memory.store, settings.namespace)
        if not memory.index.served():
            raise fail(f"no workflows in namespace {settings.namespace!r} yet: run `flowmem induce` first", 1)
        hits = memory.search(task, k, agent=agent)
    if as_json:
        print_json([hit_payload(h) for h in hits])
        return
    if not hits:
        typer.echo("no workflow fits")
    for h in hits:
        out.print(render.workflow_panel(h.workflow))
        out.print(f"score {h.score:.3f} (similarity {h.similarity:.3f})", style="dim")


app.command("run")(cli_flows.run_flow)
app.command()(cli_flows.serve)
app.command()(cli_demo.generate)
app.command()(cli_demo.demo)
app.command("eval")(cli_eval.eval_command)
app.command("api")(cli_server.api)
app.command("dashboard")(cli_server.dashboard)
app.command("mcp")(cli_server.mcp)
workflows_app.command("promote")(cli_status.promote)
workflows_app.command("deprecate")(cli_status.deprecate)
workflows_app.command("retire")(cli_status.retire)
app.command()(cli_maintain.maintain)
app.command()(cli_bench.bench)


def main() -> None:
    """Entry point of the `flowmem` script."""
    app()


if __name__ == "__main__":
    main()
