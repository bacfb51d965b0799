"""The `flowmem trajectories` commands: count, list and show the stored runs."""

from __future__ import annotations

from typing import Annotated

import typer

from flowmem.cli import render
from flowmem.cli.common import JsonOpt, configured_store, open_existing, print_json, show
from flowmem.cli.helptext import Command, Group
from flowmem.models import Trajectory
from flowmem.settings import Settings

__all__ = ["app"]

app = typer.Typer(cls=Group, help="Inspect stored trajectories.", no_args_is_help=True, rich_markup_mode=None)


@app.command("count", cls=Command)
def trajectories_count(as_json: JsonOpt = False) -> None:
    """How many trajectories the namespace holds."""
    settings = Settings()
    n = open_existing(settings).count_trajectories(namespace=settings.namespace)
    print_json({"namespace": settings.namespace, "count": n}) if as_json else print(n)


@app.command("list", cls=Command)
def trajectories_list(
    limit: Annotated[int, typer.Option(min=1, metavar="N", help="How many, newest first.")] = 20,
    agent: Annotated[str | None, typer.Option(metavar="NAME", help="Only this agent's runs.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The newest trajectories."""
    found = configured_store().list_trajectories(limit=limit, agent=agent)
    show(found, as_json, render.trajectory_table, payload=_summaries)


def _summaries(found: list[Trajectory]) -> list[dict[str, object]]:
    """The trajectories without their steps, with how many they have."""
    return [t.model_dump(mode="json", exclude={"steps"}) | {"n_steps": len(t.steps)} for t in found]


@app.command("show", cls=Command)
def trajectories_show(
    trajectory_id: Annotated[
        str, typer.Argument(help="The run's id (`flowmem trajectories list` shows them).")
    ],
    as_json: JsonOpt = False,
) -> None:
    """One trajectory with its steps."""
    show(configured_store().get_trajectory(trajectory_id), as_json, render.trajectory_panel)
