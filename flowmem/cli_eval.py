"""The `flowmem eval` command (registered on the app in `flowmem.cli`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from flowmem.cli_common import JsonOpt, fail, inducer_or_fail, out, print_json
from flowmem.settings import Settings

__all__ = ["eval_command"]


def eval_command(
    train: Annotated[Path, typer.Option("--train", help="Training trajectories (JSONL[.gz]).")],
    test: Annotated[Path, typer.Option("--test", help="Test trajectories (JSONL[.gz]).")],
    inducer: Annotated[str, typer.Option(help="rule or llm.")] = "rule",
    k: Annotated[
        int, typer.Option("--k", "-k", min=1, metavar="N", help="Memories retrieved per test task.")
    ] = 3,
    as_json: JsonOpt = False,
) -> None:
    """Induce from TRAIN in a temporary store, retrieve for each TEST task, and compare with
    retrieving raw successful trajectories (metrics: docs/metrics.md)."""
    from flowmem.jobs.evaluate import evaluate, load

    if missing := [str(p) for p in (train, test) if not p.is_file()]:
        raise fail(f"no such file: {', '.join(missing)}")
    settings = Settings()
    report = evaluate(
        load(train, settings),
        load(test, settings),
        inducer_or_fail(inducer, settings),
        settings=settings,
        k=k,
    )
    if as_json:
        print_json(report)
        return
    table = Table("metric", "flowmem", "raw", title=f"eval k={k}")
    for key in report["flowmem"]:
        table.add_row(key, str(report["flowmem"][key]), str(report["raw"].get(key, "")))
    out.print(table)
