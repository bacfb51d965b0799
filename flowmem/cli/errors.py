"""How `flowmem` tells a user's mistake: one line on stderr that names the setting, path or
value and what is accepted, a non-zero exit, and no traceback (unless `--debug`).

Two places decide it: `check_settings` before any command (every FLOWMEM_* variable and the
paths they name), and `ErrorsGroup`, the app's group, for what a command raises that a user can
cause (a store that cannot be written, a store error; an object store that refuses or does not
answer exits 2, as a bad setting does); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import json
import os
import re
import typing
from pathlib import Path
from typing import Annotated, Any

import typer

from flowmem.cli.common import fail, show_tracebacks
from flowmem.cli.helptext import Group

__all__ = [
    "SERVERS",
    "DebugOpt",
    "ErrorsGroup",
    "check_settings",
    "explain",
    "path_problems",
    "settings_error_line",
]

_USER_ERRNOS = frozenset(
    {
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EEXIST,
        errno.ENOTDIR,
        errno.EISDIR,
    }
)
"""Operating-system errors that come from where a setting points, not from a bug."""

SERVERS = frozenset({"api", "dashboard", "mcp", "serve"})
"""The commands that run until stopped: they limit glibc's malloc arenas first
(`flowmem.cli.malloc_arenas`)."""

DebugOpt = Annotated[
    bool,
    typer.Option(
        "--debug",
        envvar="FLOWMEM_DEBUG",
        help="Show the traceback behind an error, not only its one line (or FLOWMEM_DEBUG=1).",
    ),
]


def check_settings(ctx: typer.Context, debug: DebugOpt = False) -> None:
    """Before any command runs: validate the settings (FLOWMEM_* variables, `.env`) and the
    paths they name — a bad value is one line naming the variable, never a traceback (unless
    `--debug`) — and, for a command that runs until stopped, limit glibc's malloc arenas."""
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    show_tracebacks(debug)
    if ctx.invoked_subcommand in SERVERS:
        from flowmem.cli.malloc_arenas import limit_malloc_arenas

        limit_malloc_arenas()

    from flowmem.settings import Settings

    try:
        settings = Settings()
    except (ValidationError, SettingsError) as e:
        raise fail(settings_error_line(e)) from None
    if problem := path_problems(settings):
        raise fail(problem)


class ErrorsGroup(Group):
    """The `flowmem` group: a command's error that a user can cause becomes one line."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            line = explain(exc)
            if line is None:
                raise
            raise fail(line, 2 if _configuration(exc) else 1) from None


def _configuration(exc: BaseException) -> bool:
    """Whether a command's error comes from the configuration (exit status 2, as a bad setting):
    an object store that refused or did not answer (`flowmem.storage.object_store`)."""
    from flowmem.settings import Settings
    from flowmem.storage.errors import ObjectStoreError
    from flowmem.storage.object_store import access_problem

    return isinstance(exc, ObjectStoreError) or access_problem(exc, Settings()) is not None


def explain(exc: BaseException) -> str | None:
    """The one line for an error a user can cause, or None for one they cannot (a bug)."""
    from flowmem.providers.static import ModelFileError
    from flowmem.settings import Settings
    from flowmem.storage import StoreError, StoreLocationError
    from flowmem.storage.location import os_error, os_error_line
    from flowmem.storage.object_store import access_problem

    if isinstance(exc, typer.Exit | typer.Abort):
        return None
    if isinstance(exc, StoreLocationError):
        return f"FLOWMEM_DB: {exc}"
    if isinstance(exc, StoreError):
        return str(exc)
    if isinstance(exc, ModelFileError):  # its message starts with the path
        return f"FLOWMEM_EMBEDDER_PATH={exc}"
    if line := access_problem(exc, Settings()):  # an object store refused a call past opening
        return line
    found = os_error(exc)
    if found is None or found[0] not in _USER_ERRNOS:
        return None
    return os_error_line(exc, Settings().db)


def settings_error_line(exc: ValueError) -> str:
    """One line for a pydantic `ValidationError` or pydantic-settings `SettingsError` raised
    while reading the settings: the FLOWMEM_* variable (never an item of it), its value, why."""
    from pydantic import ValidationError

    from flowmem.settings import Settings

    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        field, *inner = (str(part) for part in first["loc"])
        name = f"FLOWMEM_{field.upper()}"
        raw = _environ(name)
        value = raw if raw is not None else first.get("input")
        item = f"item {inner[0]} ({first.get('input')!r}): " if inner else ""
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        why = first["msg"].removeprefix("Value error, ")
        return f"{name}={value!r} is not valid: {item}{why}{more}"
    # SettingsError: a variable of a list (or other complex) field that is not JSON.
    found = re.search(r'field "([^"]+)" from source', str(exc))
    if found is None or found.group(1) not in Settings.model_fields:
        return f"a FLOWMEM_* setting is not valid: {exc}"
    field = found.group(1)
    name = f"FLOWMEM_{field.upper()}"
    raw = _environ(name)
    return f"{name}={raw!r} is not valid: {_json_expected(field, name, raw)}"


def _json_expected(field: str, name: str, raw: str | None) -> str:
    from flowmem.settings import Settings

    annotation = Settings.model_fields[field].annotation
    if typing.get_origin(annotation) is not list:
        return "a JSON value is expected"
    items = [part.strip() for part in (raw or "").split(",") if part.strip()] or ["..."]
    return f"a JSON list is expected, e.g. {name}='{json.dumps(items)}'"


def _environ(name: str) -> str | None:
    """A variable's value, looked up as pydantic-settings does (case-insensitively), in the
    environment, then in `.env`."""
    from dotenv import dotenv_values

    for source in (os.environ, dotenv_values(".env")):
        for key, value in source.items():
            if key.upper() == name:
                return value
    return None


def path_problems(settings: Any) -> str | None:
    """The first setting that names a path that cannot serve, as one line, or None.

    FLOWMEM_DB must be a store location (`flowmem.storage.location`), FLOWMEM_QUARANTINE a
    file (not a directory), FLOWMEM_SPOOL and FLOWMEM_ANN_CACHE a directory (not a file),
    FLOWMEM_EMBEDDER_PATH a static model's directory. Only `stat`s are done."""
    from flowmem.storage.location import ACCEPTED, location_problem

    if why := location_problem(settings.db):
        return f"FLOWMEM_DB={settings.db!r} cannot be a store location: {why}; use {ACCEPTED}"
    if settings.quarantine and Path(settings.quarantine).is_dir():
        return (
            f"FLOWMEM_QUARANTINE={settings.quarantine!r} is a directory: "
            "name the JSONL file that receives rejected lines"
        )
    if settings.spool and Path(settings.spool).exists() and not Path(settings.spool).is_dir():
        return f"FLOWMEM_SPOOL={settings.spool!r} is a file: name the directory recording hooks leave runs in"
    if settings.ann_cache and Path(settings.ann_cache).exists() and not Path(settings.ann_cache).is_dir():
        return (
            f"FLOWMEM_ANN_CACHE={settings.ann_cache!r} is a file: "
            "name the directory search keeps its HNSW indexes in"
        )
    if settings.embedder_path:
        from flowmem.providers.static_files import model_problem

        if why := model_problem(settings.embedder_path):
            return f"FLOWMEM_EMBEDDER_PATH={settings.embedder_path!r} {why}"
    return None
