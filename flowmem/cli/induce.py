"""The `flowmem induce` command: induce workflows from the namespace's trajectories, as one
tagged run (demonstrations first with `--from`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from flowmem.cli.common import InducerOpt, JsonOpt, fail, inducer_or_fail, print_json, progress_display
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import ingest_files
from flowmem.settings import Settings

__all__ = ["induce"]

_COLUMNS = (
    TextColumn("[bold]induce[/bold] {task.description}"),
    BarColumn(),
    MofNCompleteColumn(),
    TimeElapsedColumn(),
)
"""The progress display of `flowmem induce` (a terminal only): planning, then clusters done."""


def induce(
    inducer: InducerOpt = "rule",
    every: Annotated[
        bool, typer.Option("--all", help="Re-induce every cluster, not only changed ones.")
    ] = False,
    demos: Annotated[
        list[Path] | None,
        typer.Option(
            "--from",
            metavar="FILE",
            help="Demonstrations (JSONL, optionally gzipped) to store first: offline.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Induce workflows from the namespace's trajectories; commit new versions as one tagged run.

    Only clusters whose runs changed since the last run are induced; with nothing new, nothing
    is done. `--from FILE` first stores FILE's runs as demonstrations: workflows induced from
    them alone are `offline`, and later online runs add versions to the same workflows."""
    from flowmem.jobs.induce import run_induction

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
    with progress_display(*_COLUMNS, quiet=as_json) as bar:
        task = bar.add_task("planning: which clusters changed", total=None)

        def step(done: int, total: int) -> None:
            bar.update(task, description="inducing clusters", completed=done, total=total, refresh=True)

        report = run_induction(
            store, settings, inducer_, namespace=settings.namespace, force=every, progress=step
        )
    s = report.summary()
    if as_json:
        print_json(s.model_dump(mode="json"))
    elif s.skipped:
        typer.echo(f"nothing new since run {s.tag}: {s.trajectories} trajectories, no run made")
    else:
        usage = f" ({s.llm_retries} retries, {s.rejected_outputs} rejected outputs)"
        typer.echo(
            f"run {s.run}: {s.new_trajectories} new of {s.trajectories} trajectories, "
            f"{s.clusters_changed} of {s.clusters} clusters induced, "
            f"{s.versions_created} new versions ({s.new_workflows} new workflows), "
            f"{s.pitfalls} pitfalls in them ({s.checkable_pitfalls} checkable), "
            f"{s.pitfall_notes} clusters of failed runs only given pitfall notes, "
            f"{len(s.failed_clusters)} failed clusters, {s.llm_calls} LLM calls"
            + (usage if inducer == "llm" else "")
        )
        if s.retired:
            shown = ", ".join(s.retired[:10]) + (", ..." if len(s.retired) > 10 else "")
            typer.echo(f"retired {len(s.retired)} workflows no longer induced: {shown}")
    if s.every_cluster_failed:  # nothing could be induced: not a success
        first = next(iter(s.failed_clusters.values()))
        raise fail(f"every cluster to induce failed ({len(s.failed_clusters)}), e.g. {first}", 1)
