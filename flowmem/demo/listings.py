"""What the office's search tools list: one frozen record type per listing, written and read.

The world renders each listing observation from these types (`render`) and the agents parse
it back into them (`listing`), so what a tool prints and what an agent reads are one shape.
The JSON text stays the observation (it is what an LLM agent would read); these are its fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from flowmem.demo.records import CustomerStatus
from flowmem.demo.tools import dumps

__all__ = [
    "LISTINGS",
    "ContactHit",
    "CustomerHit",
    "EventHit",
    "Hit",
    "MailHit",
    "TaskHit",
    "listing",
    "listing_of",
    "render",
]


class _Hit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    action: ClassVar[str]
    """The tool that lists records of this type."""


class ContactHit(_Hit):
    """A contact `contacts.lookup` lists."""

    action: ClassVar[str] = "contacts.lookup"

    name: str
    email: str
    company: str


class MailHit(_Hit):
    """An email `mail.search` lists (newest first)."""

    action: ClassVar[str] = "mail.search"

    id: str
    sender: str = Field(alias="from")
    """The sender's address (`from` in the listing)."""
    subject: str
    date: str
    """When it arrived, as the tools print it (YYYY-MM-DD HH:MM)."""


class EventHit(_Hit):
    """An event `calendar.find_events` lists (earliest first)."""

    action: ClassVar[str] = "calendar.find_events"

    id: str
    title: str
    start: str
    """When it starts, as the tools print it (YYYY-MM-DD HH:MM)."""
    duration_minutes: int
    participants: tuple[str, ...]


class CustomerHit(_Hit):
    """A customer `crm.find_customer` lists."""

    action: ClassVar[str] = "crm.find_customer"

    id: str
    name: str
    company: str
    status: CustomerStatus
    rep: str
    """The email address of the assigned sales rep."""


class TaskHit(_Hit):
    """A board task `board.find_tasks` lists."""

    action: ClassVar[str] = "board.find_tasks"

    id: str
    title: str
    board: str
    assignee: str
    due: str
    """The due date, as the tools print it (YYYY-MM-DD)."""
    status: Literal["open", "done"]


Hit = ContactHit | MailHit | EventHit | CustomerHit | TaskHit
"""A record of any listing."""

LISTINGS: dict[str, type[Hit]] = {
    kind.action: kind for kind in (ContactHit, MailHit, EventHit, CustomerHit, TaskHit)
}
"""Every listing tool -> the type of the records it lists."""

H = TypeVar("H", bound=_Hit)


def render(hits: Sequence[_Hit]) -> str:
    """A listing observation: the records as compact JSON, under the keys the tools print."""
    return dumps([h.model_dump(by_alias=True) for h in hits])


@cache
def _adapter(kind: type[H]) -> TypeAdapter[list[H]]:
    return TypeAdapter(list[kind])  # type: ignore[valid-type]


def listing(observation: str | None, kind: type[H]) -> list[H]:
    """The records of a listing observation ([] for an error or a "No ... match" sentence)."""
    if observation is None or not observation.startswith("["):
        return []
    return _adapter(kind).validate_json(observation)


def listing_of(action: str, observation: str | None) -> Sequence[Hit]:
    """The records of `action`'s observation, whichever tool listed them ([] for a tool that
    lists nothing)."""
    kind = LISTINGS.get(action)
    return [] if kind is None else listing(observation, kind)
