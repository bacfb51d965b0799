"""The `flowmem generate` and `flowmem demo` commands (registered on the app in `flowmem.cli`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flowmem.cli import render
from flowmem.cli.common import JsonOpt, err, fail, out, prefect_env, print_json, quiet_prefect
from flowmem.settings import Settings

__all__ = ["demo", "generate"]


def _cli_command() -> str:
    """How to call the `flowmem` script from here: `flowmem` when that is on PATH and is this
    installation's, else its path (`.venv/bin/flowmem` after `make demo`)."""
    mine = Path(sys.executable).with_name("flowmem")
    found = shutil.which("flowmem")
    if found and Path(found).resolve() == mine.resolve():
        return "flowmem"
    if not mine.exists():
        return f"{sys.executable} -m flowmem.cli"
    try:
        return str(mine.relative_to(Path.cwd()))
    except ValueError:
        return str(mine)


def generate(
    out_path: Annotated[Path, typer.Argument(metavar="FILE", help="Where to write (.jsonl or .jsonl.gz).")],
    tasks: Annotated[int, typer.Option(min=1, metavar="N", help="Simulated tasks to run.")] = 300,
    seed: Annotated[int, typer.Option(metavar="N", help="Seed of the world, tasks and agent.")] = 0,
    skill: Annotated[
        float, typer.Option(min=0.0, max=1.0, metavar="X", help="The scripted agent's skill.")
    ] = 0.7,
) -> None:
    """Write trajectories of flowmem's scripted agent in its simulated office (demo data)."""
    from flowmem.demo.loop import generate_file

    n = generate_file(out_path, tasks=tasks, seed=seed, skill=skill)
    typer.echo(f"wrote {n} trajectories to {out_path}")


def demo(
    rounds: Annotated[int, typer.Option(min=1, metavar="N", help="Rounds of tasks.")] = 8,
    tasks: Annotated[int, typer.Option(min=1, metavar="N", help="Tasks per round.")] = 40,
    seed: Annotated[int, typer.Option(metavar="N", help="Seed of the world, tasks and agents.")] = 0,
    skill: Annotated[
        float, typer.Option(min=0.0, max=1.0, metavar="X", help="The agents' skill when exploring.")
    ] = 0.5,
    engine: Annotated[
        str, typer.Option(metavar="[prefect|direct]", help="prefect: run the cycle flow; direct: no Prefect.")
    ] = "prefect",
    workdir: Annotated[
        Path, typer.Option(metavar="DIR", help="The demo's own store and plot (emptied first).")
    ] = Path(".flowmem/demo"),
    as_json: JsonOpt = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show Prefect's INFO logs (flow and task run states).")
    ] = False,
) -> None:
    """The main job: a simulated agent learns online, with workflow memory against without.

    Each round the same tasks are solved by the scripted agent without memory and with it;
    the memory arm's runs are recorded through the hooks and the cycle flow (collect, induce,
    learn) runs between rounds. Prints success rate and mean tool calls per round and saves a
    learning-curve PNG. The agent is simulated (flowmem.demo), not an LLM."""
    from flowmem.demo.loop import Cycle, plot, run_loop
    from flowmem.jobs.cycle import cycle as direct_cycle

    if engine not in ("prefect", "direct"):
        raise fail(f"unknown engine {engine!r}: use prefect or direct")
    cycle: Cycle = direct_cycle
    if engine == "prefect":
        prefect_env()
        if not verbose:
            quiet_prefect()
        from flowmem.flows.engine import prefect_cycle

        cycle = prefect_cycle()  # a temporary Prefect server, if one is needed, starts now
    settings = Settings(db=str(workdir / "db"))
    columns = (
        TextColumn("round {task.fields[round]}/{task.fields[rounds]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks, solved with memory so far: {task.fields[solved]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=True, disable=as_json) as bar:
        current = bar.add_task("round", total=tasks, round=1, rounds=rounds, solved=0)

        def on_task(r: int, done: int, solved: int) -> None:
            bar.update(current, completed=done, round=r, solved=solved)

        def progress(r: Any) -> None:
            w, wo = r.with_memory, r.without_memory
            if not as_json:
                err.print(
                    f"round {r.round}: with memory {w.success_rate:.0%} in {w.mean_steps:.1f} calls, "
                    f"without {wo.success_rate:.0%} in {wo.mean_steps:.1f}; {r.workflows} workflows served"
                    + (" (learning from this round's runs ...)" if r.round < rounds else "")
                )
            bar.update(current, completed=0, round=min(r.round + 1, rounds), solved=0)

        report = run_loop(
            settings,
            rounds=rounds,
            tasks=tasks,
            seed=seed,
            skill=skill,
            cycle=cycle,
            progress=progress,
            on_task=on_task,
        )
    png = plot(report, workdir / "learning_curve.png")
    if as_json:
        print_json({**report.to_json(), "plot": str(png) if png else None})
        return
    out.print(render.demo_table(report))
    out.print(
        f"learning curve: {png}" if png else "no plot: install matplotlib (pip install 'flowmem[plot]')"
    )
    cli = _cli_command()
    out.print(f"store: {settings.db}; look at what the agent learned:")
    out.print(f"  FLOWMEM_DB={settings.db} {cli} workflows list", soft_wrap=True)
    out.print(f'  FLOWMEM_DB={settings.db} {cli} search "Cancel my next meeting with Dana"', soft_wrap=True)
    out.print(f"  FLOWMEM_DB={settings.db} {cli} dashboard --port 8765", soft_wrap=True)
