"""How `flowmem ... --help` reads: values named as a user types them, summaries never cut.

Typer's plain help names a value by its Python type (`--host <str>`, `FILE <list[Path]>`) and a
required argument in braces (`{files}...`), and cuts a command's summary to fit one line
("..."). `Command` names a value by its metavar, else by the parameter's name in capitals
(`--host HOST`, `FILES...`), and a choice by its values (`--status
[candidate|active|deprecated|retired]`); `Group` lists each command with its whole first
sentence, wrapped. Every command and group of the app uses them (`flowmem.cli`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from typer.core import TyperCommand, TyperGroup

__all__ = ["Command", "Group", "choices"]


def choices(values: Iterable[str]) -> str:
    """The metavar of an option that takes one of `values`: `[a|b|c]` (the command checks the
    value itself, so that a wrong one is the app's one line, `flowmem.cli.errors`)."""
    return "[" + "|".join(values) + "]"


def _argument_name(param: Any) -> str:
    """An argument as help shows it: its metavar or name in capitals, `...` when it repeats."""
    name: str = param.metavar or (param.name or "").upper()
    return name + "..." if param.nargs != 1 else name


def _option_name(param: Any, shown: str) -> str:
    """An option as help shows it: typer's `--opt <type>` with the type replaced by the
    metavar, the choices `[a|b]`, or the option's name in capitals (`...` when repeatable)."""
    if param.metavar is not None or param.is_flag or param.count or " <" not in shown:
        return shown
    opts, _, typed = shown.partition(" <")
    typed = typed.rstrip(".").removesuffix(">")
    many = param.multiple or typed.startswith("list[")
    if "|" in typed:  # choices: `a|b`, or `list[a|b]` for a repeatable option
        value = "[" + typed.removeprefix("list[").removesuffix("]") + "]"
    else:
        value = (param.name or "").upper()
    return f"{opts} {value}" + ("..." if many else "")


class Command(TyperCommand):
    """A command whose help names values as a user types them (module docstring)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = _argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            shown, text = record
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), text))
            else:
                options.append((_option_name(param, shown), text))
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class Group(TyperGroup):
    """A group whose command list shows each command's whole first sentence (module docstring)."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
