"""The `flowmem eval` command (registered on the app in `flowmem.cli`): offline (`--train`,
`--test`) or online (`--online FILE...`, a replay in batches, `flowmem.jobs.online`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from flowmem.cli.common import InducerOpt, JsonOpt, fail, inducer_or_fail, out, progress_display, show
from flowmem.settings import Settings

if TYPE_CHECKING:
    from flowmem.induction.base import Inducer
    from flowmem.jobs.evaluate import EvalReport
    from flowmem.jobs.online import Batch, OnlineReport
    from flowmem.models import Trajectory

__all__ = ["eval_command", "offline_table", "online_table"]

ONLINE_COLUMNS = (
    ("joint_coverage", "joint cov.", 2),
    ("joint_precision", "joint prec.", 2),
    ("utility_rate", "utility", 2),
    ("tokens_per_prompt", "tokens", 0),
    ("memories", "memories", 0),
)
"""The figures the online table shows per batch: key, header, decimals."""

DEFAULT_PLOT = Path("flowmem-online.png")

PHASES = ("storing", "inducing", "retrieving", "scoring")
"""The phases of the offline evaluation, as `flowmem.jobs.evaluate.evaluate` reports them."""


def eval_command(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="FILE", help="With --online: the runs to replay (JSONL[.gz]).", show_default=False
        ),
    ] = None,
    train: Annotated[
        Path | None, typer.Option("--train", metavar="FILE", help="Training trajectories (JSONL[.gz]).")
    ] = None,
    test: Annotated[
        Path | None, typer.Option("--test", metavar="FILE", help="Test trajectories (JSONL[.gz]).")
    ] = None,
    demonstrations: Annotated[
        Path | None,
        typer.Option(
            "--demonstrations",
            metavar="FILE",
            help="More training runs, marked as curated demonstrations (as `induce --from` marks them).",
        ),
    ] = None,
    online: Annotated[
        bool,
        typer.Option(
            "--online", help="Replay FILE... in batches, each served by the memory of those before."
        ),
    ] = False,
    batches: Annotated[
        int | None,
        typer.Option("--batches", metavar="N", help="With --online: how many batches [default: 6]."),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option("--seed", metavar="S", help="With --online: the shuffle's seed [default: 0]."),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot", metavar="PNG", help=f"With --online: where to save the curve [default: {DEFAULT_PLOT}]."
        ),
    ] = None,
    inducer: InducerOpt = "rule",
    k: Annotated[
        int, typer.Option("--k", "-k", min=1, metavar="N", help="Memories retrieved per test task.")
    ] = 3,
    as_json: JsonOpt = False,
) -> None:
    """Induce from TRAIN in a temporary store, retrieve for each TEST task, and compare with
    retrieving raw successful trajectories (metrics: docs/metrics.md).

    `--online FILE...` instead replays the runs of FILE... in a fixed shuffled order (sorted by
    id, shuffled with --seed) cut into --batches batches: each batch is served by the memory
    induced incrementally, as `flowmem induce` would, from the batches before it, then joins
    the store. Prints both systems' figures per batch and saves their curve (--plot)."""
    if online:
        if train is not None or test is not None or demonstrations is not None:
            raise fail(
                "--online replays FILE...; --train, --test and --demonstrations are for the offline"
                " evaluation"
            )
        if not files:
            raise fail("--online needs the runs to replay: flowmem eval --online FILE...")
        _online(files, batches, seed, plot or DEFAULT_PLOT, inducer, k, as_json)
        return
    if given := [
        name for name, v in (("--batches", batches), ("--seed", seed), ("--plot", plot)) if v is not None
    ]:
        raise fail(f"{', '.join(given)} {'need' if len(given) > 1 else 'needs'} --online")
    if files:
        raise fail(f"unexpected FILE argument {files[0]}: use --train F --test F, or --online FILE...")
    if train is None or test is None:
        raise fail("both --train and --test are needed (or --online FILE...)")
    _offline(train, test, demonstrations, inducer, k, as_json)


def _offline(train: Path, test: Path, demos: Path | None, inducer: str, k: int, as_json: bool) -> None:
    from flowmem.jobs.evaluate import evaluate, load
    from flowmem.models import as_demonstration

    if missing := [str(p) for p in (train, test, *([demos] if demos else [])) if not p.is_file()]:
        raise fail(f"no such file: {', '.join(missing)}")
    settings = Settings()
    marked = [as_demonstration(t) for t in (load(demos, settings) if demos else [])]
    columns = (TextColumn("[bold]eval[/bold] {task.description}"), BarColumn(), TimeElapsedColumn())
    with progress_display(*columns, quiet=as_json) as bar:
        task = bar.add_task("reading the runs", total=len(PHASES))

        begun: list[str] = []

        def phase(doing: str) -> None:
            bar.update(task, description=doing, completed=len(begun), refresh=True)
            begun.append(doing)

        report = evaluate(
            marked + load(train, settings),
            load(test, settings),
            inducer_or_fail(inducer, settings),
            settings=settings,
            k=k,
            progress=phase,
        )
    show(report, as_json, lambda r: offline_table(r, k))


def offline_table(report: EvalReport, k: int) -> Table:
    """Each of flowmem's figures, raw memory's beside it where it has one (`--json` has them too)."""
    table = Table("metric", "flowmem", "raw", title=f"eval k={k}", caption="—: not measured on these runs")
    raw = report.raw.model_dump()
    for key, value in report.flowmem.model_dump().items():
        table.add_row(key, _cell(value), _cell(raw[key]) if key in raw else "")
    return table


def _cell(value: object) -> str:
    """A figure as the table shows it: "—" where there is none (JSON's null), a count of
    reasons as `reason n, ...` ("none" when empty)."""
    if value is None:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
    return str(value)


def _online(
    files: list[Path], batches: int | None, seed: int | None, plot: Path, inducer: str, k: int, as_json: bool
) -> None:
    from flowmem.jobs.evaluate import load
    from flowmem.jobs.online import plot_curve, report_of, split_batches

    n, seed = (6 if batches is None else batches), (0 if seed is None else seed)
    if missing := [str(p) for p in files if not p.is_file()]:
        raise fail(f"no such file: {', '.join(missing)}")
    settings = Settings()
    inducer_ = inducer_or_fail(inducer, settings)
    runs = [t for path in files for t in load(path, settings)]
    try:
        split_batches(runs, n, seed=seed)  # a bad --batches fails before any work
    except ValueError as e:
        raise fail(str(e)) from None
    report = report_of(
        _replayed(runs, inducer_, settings, n, seed, k, as_json),
        inducer_kind=inducer_.kind,
        batches=n,
        seed=seed,
        k=k,
    )
    png = plot_curve(report, plot)
    show(
        report,
        as_json,
        online_table,
        payload=lambda r: {**r.model_dump(mode="json"), "plot": str(png) if png else None},
    )
    if not as_json:
        out.print(f"curve: {png}" if png else "no curve: install matplotlib (pip install 'flowmem[plot]')")


def _replayed(
    runs: list[Trajectory], inducer: Inducer, settings: Settings, n: int, seed: int, k: int, quiet: bool
) -> list[Batch]:
    """Every batch of the replay, with a progress bar on stderr."""
    from flowmem.jobs.online import replay

    columns = (
        TextColumn("replaying"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("batches {task.fields[last]}"),
        TimeElapsedColumn(),
    )
    done = []
    with progress_display(*columns, quiet=quiet) as bar:
        current = bar.add_task("batches", total=n, last="")
        for batch in replay(runs, inducer, settings=settings, batches=n, seed=seed, k=k):
            done.append(batch)
            flow, raw = batch.figures.flowmem.joint_coverage, batch.figures.raw.joint_coverage
            last = f"(batch {batch.index}: joint coverage {flow:.2f}, raw {raw:.2f})"
            bar.update(current, completed=batch.index, last=last if batch.index > 1 else "")
    return done


def online_table(report: OnlineReport) -> Table:
    """The per-batch figures, flowmem / raw, to two decimals (`--json` has them all)."""
    inputs = report.inputs
    table = Table(
        "batch",
        "stored",
        *(header for _, header, _ in ONLINE_COLUMNS),
        title=f"eval --online: {inputs.runs} runs in {inputs.batches} batches, seed {inputs.seed}, "
        f"k={inputs.k}; flowmem/raw",
        caption="stored: the runs in the store when the batch was served (batch 1: none, not judged)",
    )
    for b in report.batches:
        cells = [
            f"{getattr(b.flowmem, key):.{digits}f}/{getattr(b.raw, key):.{digits}f}"
            for key, _, digits in ONLINE_COLUMNS
        ]
        table.add_row(str(b.batch), str(b.memory_runs), *cells)
    return table
