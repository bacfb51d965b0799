"""What the `flowmem` commands share: consoles, the --json option and `show`, `fail`, the store
they read, Prefect defaults."""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console, RenderableType
from rich.progress import Progress, ProgressColumn

if TYPE_CHECKING:
    from flowmem.induction.base import Inducer
    from flowmem.settings import Settings
    from flowmem.storage import Store

__all__ = [
    "InducerOpt",
    "JsonOpt",
    "configured_store",
    "dumped",
    "err",
    "fail",
    "inducer_or_fail",
    "quiet_prefect",
    "open_existing",
    "out",
    "prefect_env",
    "print_json",
    "progress_display",
    "require_namespace",
    "show",
    "show_tracebacks",
]

T = TypeVar("T")

out = Console()
err = Console(stderr=True, soft_wrap=True)  # an error is one line, however long

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]

InducerOpt = Annotated[
    str,
    typer.Option(metavar="[rule|llm]", help="How workflows are induced: rules, or an LLM (FLOWMEM_LLM_*)."),
]
"""`--inducer`: its values are those of `flowmem.jobs.factories.INDUCERS` (a test checks)."""

_debug = False
"""Whether `fail` shows the traceback behind its one line (`--debug`, FLOWMEM_DEBUG=1)."""


def print_json(data: Any) -> None:
    """Print one line of JSON to stdout (no rich markup, no wrapping)."""
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str, indent=None) + "\n")


def dumped(found: Any) -> Any:
    """The JSON form of a model, or of a list of models."""
    if isinstance(found, BaseModel):
        return found.model_dump(mode="json")
    return [m.model_dump(mode="json") for m in found]


def show(
    found: T,
    as_json: bool,
    rendered: Callable[[T], RenderableType],
    payload: Callable[[T], Any] = dumped,
) -> None:
    """What a command that reads prints: `found` as one line of JSON (`--json`; `payload`
    makes it JSON, by default `dumped`), else rendered for the terminal (`flowmem.cli.render`).

    A `StoreError` raised while reading it needs no handling here: the app's group
    (`flowmem.cli.errors.ErrorsGroup`) makes it one line on stderr, exit status 1."""
    if as_json:
        print_json(payload(found))
    else:
        out.print(rendered(found))


def progress_display(*columns: ProgressColumn | str, quiet: bool, transient: bool = True) -> Progress:
    """A progress display on stderr for long work (ingest, induce, eval): shown only on a
    terminal and never with `--json` (`quiet`), so piped and JSON output stay as they were."""
    return Progress(*columns, console=err, transient=transient, disable=quiet or not err.is_terminal)


def show_tracebacks(on: bool) -> None:
    """Whether `fail` shows the traceback behind its line from now on (`--debug`)."""
    global _debug
    _debug = on


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print an error to stderr; the exit to raise (`raise fail(...)`).

    With `--debug`, the traceback of the exception being handled comes first (or, when the
    error was decided without one, the stack that decided it)."""
    if _debug:
        exc = sys.exception()
        if exc is not None:
            shown = traceback.format_exception(exc)
        else:  # nothing was raised: where the error was found is what helps
            shown = ["Stack (most recent call last):\n", *traceback.format_stack()[:-1]]
        sys.stderr.write("".join(shown))
    err.print(f"[red]error:[/red] {message}")
    return typer.Exit(code)


def inducer_or_fail(kind: str, settings: Settings) -> Inducer:
    """The inducer of a kind (`rule` or `llm`), or a one-line error with a hint.

    An LLM is checked first (`flowmem.providers.openai.check_llm`): no API key, an endpoint that
    does not answer, a key or a model it refuses are each one line before any call."""
    from flowmem.jobs.factories import inducer_from

    try:
        if kind == "llm":
            from flowmem.providers.openai import check_llm

            check_llm(settings)
        return inducer_from(kind, settings)
    except ValueError as e:
        raise fail(f"{e} (or --inducer rule, which needs no LLM)" if kind == "llm" else str(e)) from None


def open_existing(settings: Settings) -> Store:
    """The store the settings name, for a command that only reads it: a local path that does
    not exist is a one-line error (with the nearest existing name), never a new empty store."""
    import difflib
    from pathlib import Path

    from flowmem.jobs.factories import store_from

    db = settings.db
    if "://" not in db and not Path(db).exists():
        parent = Path(db).parent
        names = [p.name for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
        near = difflib.get_close_matches(Path(db).name, names, n=1, cutoff=0.5)
        hint = f" (did you mean {parent / near[0]}?)" if near else ""
        raise fail(f"no store at {db}{hint}: create one with `flowmem ingest FILE.jsonl`, or set FLOWMEM_DB")
    return store_from(settings)


def configured_store() -> Store:
    """The store the FLOWMEM_* settings name, for a command that reads it (never created by
    reading: `open_existing`)."""
    from flowmem.settings import Settings

    return open_existing(Settings())


def require_namespace(store: Any, namespace: str) -> None:
    """A one-line error with a hint when the store is empty or the namespace holds nothing."""
    known = store.namespaces()
    if namespace in known:
        return
    if not known:
        raise fail(
            f"the store at {store.settings.db} is empty: `flowmem ingest FILE.jsonl` "
            "(or `flowmem induce --from FILE.jsonl`) first, or `make demo` for a demo store"
        )
    raise fail(
        f"namespace {namespace!r} holds nothing in {store.settings.db}: "
        f"set FLOWMEM_NAMESPACE to one of {', '.join(known)}"
    )


def prefect_env() -> None:
    """Offline-friendly Prefect defaults, unless the environment says otherwise."""
    # The temporary server can take more than Prefect's default 20 s to start on 2 busy cores;
    # the telemetry heartbeat fails offline.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    _prefect_reachable(os.environ.get("PREFECT_API_URL"))


def _prefect_reachable(url: str | None) -> None:
    """A configured Prefect server that does not answer is one line, not a traceback after
    Prefect's own retries (no URL: a temporary local server is started, nothing to check)."""
    if not url:
        return
    import httpx

    try:
        httpx.get(url.rstrip("/") + "/health", timeout=5.0)
    except httpx.HTTPError as e:
        raise fail(
            f"cannot reach the Prefect server at PREFECT_API_URL={url} ({type(e).__name__}): start it "
            "(`prefect server start`) or unset PREFECT_API_URL to run on a temporary local server"
        ) from None


def quiet_prefect() -> None:
    """Prefect's console output at WARNING (no flow or task run states, no temporary-server
    notices), unless PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL says otherwise. Only the terminal
    is quieted: run logs still reach a Prefect server's UI."""
    # Prefect reads its settings and configures logging when it is first imported, and its
    # temporary server's process inherits this environment: set before the cycle flow's lazy
    # import, the variable reaches both. Once Prefect is imported in a process it has no effect.
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_FLOW_RUNS_LEVEL", "WARNING")
