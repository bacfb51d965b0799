"""The `flowmem` command line: thin calls into ingest, storage and the demo.

Every command reads its settings from FLOWMEM_* variables (FLOWMEM_DB selects the store,
FLOWMEM_NAMESPACE the tenant). One module per command or group of commands (`flowmem X` is
`flowmem/cli/X.py`; `run` and `serve` are in `flows`, `api`, `dashboard` and `mcp` in
`server`, `generate` in `demo`); they share `common` (consoles, `--json`, `show`, `fail`),
`errors` (one line for a user's mistake), `render` (tables and panels) and `helptext` (help
that names values as people type them, with whole command summaries). A command imports
what it runs when it runs: importing this package loads no scheduler, server or inducer.
"""

from __future__ import annotations

import typer

from flowmem.cli import (
    demo,
    eval,
    export,
    flows,
    induce,
    ingest,
    maintain,
    search,
    server,
    trajectories,
    workflows,
)
from flowmem.cli.errors import ErrorsGroup, check_settings
from flowmem.cli.helptext import Command

__all__ = ["app", "main"]

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
app.add_typer(trajectories.app, name="trajectories")
app.add_typer(workflows.app, name="workflows")
app.add_typer(export.app, name="export")
app.command(cls=Command)(ingest.ingest)
app.command(cls=Command)(induce.induce)
app.command(cls=Command)(search.search)
app.command("run", cls=Command)(flows.run_flow)
app.command(cls=Command)(flows.serve)
app.command(cls=Command)(demo.generate)
app.command(cls=Command)(demo.demo)
app.command("eval", cls=Command)(eval.eval_command)
app.command("api", cls=Command)(server.api)
app.command("dashboard", cls=Command)(server.dashboard)
app.command("mcp", cls=Command)(server.mcp)
app.command(cls=Command)(maintain.maintain)


def main() -> None:
    """Entry point of the `flowmem` script."""
    app()
