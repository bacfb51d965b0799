"""Goal checks of the single-agent task families.

A check compares a world's end state with what the task asked and returns None when the goal
is reached, else a short reason. Checks see only the end state; the world's history lists
(outbox, trash, cancelled, ...) tell what the agent did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from flowmem.demo.records import DATE_FORMAT, DATETIME_FORMAT, NOW, Email
from flowmem.demo.world import World

__all__ = ["CHECKS", "Check"]

Check = Callable[[Mapping[str, str], World], str | None]
"""A goal check: (task slots, end state) -> None if reached, else why not."""


def _address(world: World, name: str) -> str:
    contact = world.contact(name)
    if contact is None:
        raise ValueError(f"the task names an unknown contact {name!r}")
    return contact.email


def _newest(emails: list[Email]) -> Email | None:
    return max(emails, key=lambda e: e.timestamp, default=None)


def _all_emails(world: World) -> list[Email]:
    # Deleted emails still count when deciding which one a task was about.
    return [*world.mailbox.values(), *world.trash]


def forward_latest(slots: Mapping[str, str], world: World) -> str | None:
    """The newest email about the subject was forwarded to the person, and nothing else was."""
    to = _address(world, slots["name"])
    about = slots["subject"].casefold()
    target = _newest([e for e in _all_emails(world) if about in e.subject.casefold()])
    if target is None:
        raise ValueError(f"no email about {slots['subject']!r}")
    forwards = [m for m in world.outbox if m.kind == "forward"]
    if not forwards:
        return "nothing was forwarded"
    for m in forwards:
        if m.ref_id != target.id:
            return f"forwarded {m.ref_id}, but the latest email about it is {target.id}"
        if m.to != to:
            return f"forwarded to {m.to} instead of {to}"
    return None


def reply_latest(slots: Mapping[str, str], world: World) -> str | None:
    """The newest email from the person got a reply containing the message."""
    sender = _address(world, slots["name"])
    target = _newest([e for e in _all_emails(world) if e.sender == sender])
    if target is None:
        raise ValueError(f"no email from {slots['name']!r}")
    replies = [m for m in world.outbox if m.kind == "reply"]
    if not replies:
        return "no reply was sent"
    for m in replies:
        if m.ref_id != target.id:
            return f"replied to {m.ref_id}, but the latest email from them is {target.id}"
        if slots["message"].casefold() not in m.body.casefold():
            return "the reply does not contain the requested message"
    return None


def send_email(slots: Mapping[str, str], world: World) -> str | None:
    """One or more new emails went to the person, with the subject and the message."""
    to = _address(world, slots["name"])
    sent = [m for m in world.outbox if m.kind == "send"]
    if not sent:
        return "no email was sent"
    for m in sent:
        if m.to != to:
            return f"sent to {m.to} instead of {to}"
        if m.subject.strip().casefold() != slots["subject"].casefold():
            return f"subject '{m.subject}' instead of '{slots['subject']}'"
        if slots["message"].casefold() not in m.body.casefold():
            return "the body does not contain the requested message"
    return None


def delete_from(slots: Mapping[str, str], world: World) -> str | None:
    """No email from the person is left, and only their emails were deleted."""
    sender = _address(world, slots["name"])
    left = [e.id for e in world.mailbox.values() if e.sender == sender]
    if left:
        return f"{len(left)} email(s) from {sender} remain, e.g. {left[0]}"
    wrong = [e.id for e in world.trash if e.sender != sender]
    if wrong:
        return f"deleted {wrong[0]}, which is not from {sender}"
    return None


def schedule_meeting(slots: Mapping[str, str], world: World) -> str | None:
    """An event with the title, person, start and duration was created, and no other."""
    who = _address(world, slots["name"])
    start = datetime.strptime(f"{slots['date']} {slots['time']}", DATETIME_FORMAT)
    created = [world.calendar[i] for i in world.created_events if i in world.calendar]
    if not created:
        return "no event was created"
    for ev in created:
        if ev.title.casefold() != slots["title"].casefold():
            return f"created '{ev.title}' instead of '{slots['title']}'"
        if who not in ev.participants:
            return f"{who} is not invited to {ev.id}"
        if ev.start != start.replace(tzinfo=NOW.tzinfo):
            return f"{ev.id} starts at the wrong time"
        if ev.duration_minutes != int(slots["duration"]):
            return f"{ev.id} lasts {ev.duration_minutes} minutes, not {slots['duration']}"
    return None


def cancel_next(slots: Mapping[str, str], world: World) -> str | None:
    """Exactly the person's next upcoming event was cancelled."""
    who = _address(world, slots["name"])
    events = [*world.calendar.values(), *world.cancelled]
    upcoming = [e for e in events if who in e.participants and e.start > NOW]
    if not upcoming:
        raise ValueError(f"no upcoming event with {slots['name']!r}")
    target = min(upcoming, key=lambda e: e.start)
    cancelled = [e.id for e in world.cancelled]
    if not cancelled:
        return "nothing was cancelled"
    if cancelled != [target.id]:
        wrong = next((i for i in cancelled if i != target.id), target.id)
        return f"cancelled {wrong}, but the next meeting with them is {target.id}"
    return None


def update_status(slots: Mapping[str, str], world: World) -> str | None:
    """The customer has the requested status."""
    customer = world.customer_named(slots["customer"])
    if customer is None:
        raise ValueError(f"unknown customer {slots['customer']!r}")
    if customer.status != slots["status"]:
        return f"{customer.id} is {customer.status}, not {slots['status']}"
    return None


def assign_rep(slots: Mapping[str, str], world: World) -> str | None:
    """The customer's rep is the person."""
    customer = world.customer_named(slots["customer"])
    if customer is None:
        raise ValueError(f"unknown customer {slots['customer']!r}")
    rep = _address(world, slots["name"])
    if customer.rep != rep:
        return f"{customer.id}'s rep is {customer.rep}, not {rep}"
    return None


def create_task(slots: Mapping[str, str], world: World) -> str | None:
    """A board task with the title, assignee, due date and board was created, and no other."""
    who = _address(world, slots["name"])
    created = [world.tasks[i] for i in world.created_tasks]
    if not created:
        return "no task was created"
    for t in created:
        if t.title.casefold() != slots["title"].casefold():
            return f"created '{t.title}' instead of '{slots['title']}'"
        if t.assignee != who:
            return f"{t.id} is assigned to {t.assignee}, not {who}"
        if t.due.strftime(DATE_FORMAT) != slots["due"]:
            return f"{t.id} is due {t.due}, not {slots['due']}"
        if t.board != slots["board"]:
            return f"{t.id} is on {t.board}, not {slots['board']}"
    return None


def complete_task(slots: Mapping[str, str], world: World) -> str | None:
    """Exactly the task with that title on that board was marked done."""
    title, board = slots["title"].casefold(), slots["board"]
    target = next((t for t in world.tasks.values() if t.title.casefold() == title and t.board == board), None)
    if target is None:
        raise ValueError(f"no task {slots['title']!r} on {board!r}")
    if not world.completed:
        return "no task was completed"
    wrong = [i for i in world.completed if i != target.id]
    if wrong:
        return f"completed {wrong[0]} ({world.tasks[wrong[0]].board}) instead of {target.id}"
    return None


CHECKS: dict[str, Check] = {
    "forward_latest": forward_latest,
    "reply_latest": reply_latest,
    "send_email": send_email,
    "delete_from": delete_from,
    "schedule_meeting": schedule_meeting,
    "cancel_next": cancel_next,
    "update_status": update_status,
    "assign_rep": assign_rep,
    "create_task": create_task,
    "complete_task": complete_task,
}
"""Goal check of every single-agent family, by family name."""
