"""The `flowmem search` command: the served workflows that fit a task, as an agent gets them."""

from __future__ import annotations

from typing import Annotated

import typer

from flowmem.cli import render
from flowmem.cli.common import JsonOpt, dumped, fail, open_existing, out, print_json, require_namespace
from flowmem.settings import Settings

__all__ = ["search"]


def search(
    task: Annotated[str, typer.Argument(metavar="TASK", help="The task to find workflows for.")],
    k: Annotated[int, typer.Option("--k", "-k", min=1, metavar="N", help="How many workflows.")] = 3,
    agent: Annotated[str | None, typer.Option(help="Only workflows for this agent.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The served workflows that fit a task best, as an agent would get them."""
    from flowmem.agents import WorkflowMemory
    from flowmem.server.payloads import SearchHit

    settings = Settings()
    with WorkflowMemory(settings, store=open_existing(settings)) as memory:
        require_namespace(memory.store, settings.namespace)
        if not memory.index.count():  # counted, not built
            raise fail(f"no workflows in namespace {settings.namespace!r} yet: run `flowmem induce` first", 1)
        hits = memory.search(task, k, agent=agent)
    if as_json:
        print_json(dumped([SearchHit.of_hit(h) for h in hits]))
        return
    if not hits:
        typer.echo("no workflow fits")
    for h in hits:
        out.print(render.workflow_panel(h.workflow))
        out.print(f"score {h.score:.3f} (similarity {h.similarity:.3f})", style="dim")
