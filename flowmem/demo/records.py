"""Records of the simulated office (emails, events, customers, ...), the tool error and constants.

Every record is a frozen pydantic model, so a `World` can be copied by copying its containers.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "CRM_STATUSES",
    "DATETIME_FORMAT",
    "DATE_FORMAT",
    "NOW",
    "USER_ADDRESS",
    "BoardTask",
    "Contact",
    "Customer",
    "CustomerStatus",
    "Email",
    "Event",
    "SentMail",
    "ToolError",
    "fmt_date",
    "fmt_datetime",
    "is_address",
]

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
"""The simulated "now" (a Monday morning); fixed so that every run is reproducible."""

USER_ADDRESS = "me@hollowbrook.test"
"""The address of the user the agents work for."""

DATETIME_FORMAT = "%Y-%m-%d %H:%M"
"""The only datetime format the tools accept and print, e.g. `2026-03-05 14:30`."""

DATE_FORMAT = "%Y-%m-%d"
"""The only date format the tools accept and print, e.g. `2026-03-12`."""

CustomerStatus = Literal["lead", "qualified", "won", "lost"]
CRM_STATUSES: tuple[CustomerStatus, ...] = ("lead", "qualified", "won", "lost")
"""The pipeline stages a CRM customer can be in."""

_ADDRESS = re.compile(r"^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}$", re.IGNORECASE)


def is_address(value: str) -> bool:
    """Whether `value` is an email address (rather than, say, a bare name)."""
    return bool(_ADDRESS.match(value))


def fmt_datetime(value: datetime) -> str:
    """Format a datetime the way the tools print it."""
    return value.strftime(DATETIME_FORMAT)


def fmt_date(value: date) -> str:
    """Format a date the way the tools print it."""
    return value.strftime(DATE_FORMAT)


class ToolError(Exception):
    """A tool call the world rejected (unknown action, bad argument, unknown id, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Contact(_Record):
    """An entry of the contacts directory."""

    name: str
    email: str
    company: str
    internal: bool
    """Whether the contact is a colleague (only colleagues can be CRM reps)."""


class Email(_Record):
    """A message in the user's mailbox."""

    id: str
    sender: str
    recipients: tuple[str, ...]
    subject: str
    body: str
    timestamp: datetime


class SentMail(_Record):
    """A message the user's agents sent (the outbox)."""

    id: str
    kind: Literal["send", "forward", "reply"]
    to: str
    subject: str
    body: str
    timestamp: datetime
    ref_id: str | None = None
    """The mailbox email that was forwarded or replied to."""


class Event(_Record):
    """A calendar event."""

    id: str
    title: str
    participants: tuple[str, ...]
    start: datetime
    duration_minutes: int


class Customer(_Record):
    """A CRM customer."""

    id: str
    name: str
    company: str
    status: CustomerStatus
    rep: str
    """The email address of the assigned sales rep."""


class BoardTask(_Record):
    """A card on a task board."""

    id: str
    title: str
    assignee: str
    due: date
    board: str
    status: Literal["open", "done"] = "open"
