"""The tool catalogue of the simulated world, and the argument checks its tools share."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from flowmem.demo.records import ToolError, is_address

__all__ = ["TOOLS", "coerce", "dumps", "parse_time", "query_text", "require_address"]

TOOLS: dict[str, tuple[dict[str, type], str]] = {
    "contacts.lookup": ({"name": str}, "Find contacts whose name contains `name`."),
    "mail.search": ({"query": str}, "Emails whose subject or sender contains `query`, newest first."),
    "mail.read": ({"email_id": str}, "Read one email."),
    "mail.forward": ({"email_id": str, "to": str}, "Forward an email to an address."),
    "mail.send": ({"to": str, "subject": str, "body": str}, "Send a new email to an address."),
    "mail.reply": ({"email_id": str, "body": str}, "Reply to the sender of an email."),
    "mail.delete": ({"email_id": str}, "Move an email to the trash."),
    "calendar.find_events": ({"query": str}, "Events whose title or participants contain `query`."),
    "calendar.create_event": (
        {"title": str, "participant": str, "start": str, "duration_minutes": int},
        "Create an event; `start` is YYYY-MM-DD HH:MM.",
    ),
    "calendar.cancel_event": ({"event_id": str}, "Cancel an event."),
    "crm.find_customer": ({"query": str}, "Customers whose name or company contains `query`."),
    "crm.update_status": ({"customer_id": str, "status": str}, "Set a customer's status."),
    "crm.assign_rep": ({"customer_id": str, "rep": str}, "Assign a colleague as sales rep."),
    "board.find_tasks": ({"query": str}, "Board tasks whose title or board contains `query`."),
    "board.create_task": (
        {"title": str, "assignee": str, "due": str, "board": str},
        "Create a board task; `due` is YYYY-MM-DD.",
    ),
    "board.complete_task": ({"task_id": str}, "Mark a board task as done."),
}
"""Every tool: action name -> (parameter types, one-line description)."""


def dumps(value: Any) -> str:
    """Render a tool result as compact, readable JSON."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def require_address(value: str, role: str) -> str:
    """The lower-cased address, or a `ToolError` when `value` is not an address."""
    # Agents often pass a person's name where an address is needed; real tools refuse that.
    if not is_address(value):
        raise ToolError(f"Invalid {role} '{value}': expected an email address.")
    return value.lower()


def coerce(action: str, name: str, value: Any, kind: type) -> str | int:
    """The argument as `kind`, or a `ToolError` naming the argument."""
    # LLM tool calls often pass numbers as strings; accept digit strings for int parameters.
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
    elif isinstance(value, str):
        return value
    raise ToolError(f"{action}: argument '{name}' must be {kind.__name__}, got {value!r}.")


def query_text(value: str) -> str:
    """The normalised search query, or a `ToolError` when it is empty."""
    q: str = value.strip().casefold()
    if not q:
        raise ToolError("The query is empty.")
    return q


def parse_time(value: str, fmt: str, name: str, shape: str) -> datetime:
    """Parse a date(time) argument strictly, or raise a `ToolError` showing the shape."""
    try:
        return datetime.strptime(value.strip(), fmt)
    except ValueError:
        raise ToolError(f"Invalid {name} '{value}': expected {shape}.") from None
