"""Slot samplers of the task families: draw template values a world can satisfy."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta

from flowmem.demo import data
from flowmem.demo.records import CRM_STATUSES, NOW, fmt_date
from flowmem.demo.world import World

__all__ = [
    "Slots",
    "account_handover",
    "assign_rep",
    "cancel_and_notify",
    "cancel_next",
    "complete_task",
    "create_task",
    "delete_from",
    "forward_latest",
    "onboard_customer",
    "plan_meeting",
    "reply_latest",
    "schedule_meeting",
    "send_email",
    "update_status",
]

Slots = dict[str, str]
"""Slot name -> value."""


def _senders(world: World) -> list[str]:
    counts = Counter(e.sender for e in world.mailbox.values())
    return [c.name for c in world.contacts if counts[c.email] > 0]


def _threads(world: World) -> list[str]:
    # Only subjects with two or more emails, so that "the latest" is a real choice.
    counts = Counter(e.subject.removeprefix("Re: ") for e in world.mailbox.values())
    return sorted(s for s, n in counts.items() if n >= 2)


def _with_upcoming(world: World) -> list[str]:
    busy = {p for e in world.calendar.values() if e.start > NOW for p in e.participants}
    return [c.name for c in world.contacts if c.email in busy]


def _colleague(world: World, rng: random.Random, *, besides: str = "") -> str:
    return rng.choice([c.name for c in world.contacts if c.internal and c.email != besides])


def _pick(rng: random.Random, options: Sequence[str], what: str) -> str:
    if not options:
        raise ValueError(f"the world has no {what} to make this task from")
    return rng.choice(list(options))


def _when(rng: random.Random, days: tuple[int, int]) -> str:
    day = NOW.date() + timedelta(days=rng.randint(*days))
    while day.weekday() >= 5:  # meetings and deadlines fall on weekdays
        day += timedelta(days=1)
    return fmt_date(day)


def forward_latest(w: World, rng: random.Random) -> Slots:
    return {"subject": _pick(rng, _threads(w), "email thread"), "name": rng.choice(w.contacts).name}


def reply_latest(w: World, rng: random.Random) -> Slots:
    return {"name": _pick(rng, _senders(w), "sender"), "message": rng.choice(data.REPLY_MESSAGES)}


def send_email(w: World, rng: random.Random) -> Slots:
    return {
        "name": rng.choice(w.contacts).name,
        "subject": rng.choice(data.NEW_SUBJECTS),
        "message": rng.choice(data.REPLY_MESSAGES),
    }


def delete_from(w: World, rng: random.Random) -> Slots:
    return {"name": _pick(rng, _senders(w), "sender")}


def schedule_meeting(w: World, rng: random.Random) -> Slots:
    return {
        "duration": str(rng.choice((15, 30, 45, 60, 90))),
        "title": rng.choice(data.MEETING_TITLES),
        "name": rng.choice(w.contacts).name,
        "date": _when(rng, (1, 14)),
        "time": f"{rng.randint(9, 16):02d}:{rng.choice((0, 30)):02d}",
    }


def cancel_next(w: World, rng: random.Random) -> Slots:
    return {"name": _pick(rng, _with_upcoming(w), "contact with an upcoming meeting")}


def update_status(w: World, rng: random.Random) -> Slots:
    customer = rng.choice(list(w.customers.values()))
    status = rng.choice([s for s in CRM_STATUSES if s != customer.status])
    return {"customer": customer.name, "status": status}


def assign_rep(w: World, rng: random.Random) -> Slots:
    customer = rng.choice(list(w.customers.values()))
    return {"customer": customer.name, "name": _colleague(w, rng, besides=customer.rep)}


def create_task(w: World, rng: random.Random) -> Slots:
    return {
        "title": rng.choice(data.NEW_TASK_TITLES),
        "name": _colleague(w, rng),
        "due": _when(rng, (3, 30)),
        "board": rng.choice(w.boards),
    }


def complete_task(w: World, rng: random.Random) -> Slots:
    open_tasks = [t for t in w.tasks.values() if t.status == "open"]
    titles = Counter(t.title for t in w.tasks.values())
    # Prefer titles that also sit on another board: the board then matters.
    shared = [t for t in open_tasks if titles[t.title] > 1]
    task = rng.choice(shared or open_tasks)
    return {"title": task.title, "board": task.board}


def onboard_customer(w: World, rng: random.Random) -> Slots:
    customer = rng.choice([c for c in w.customers.values() if c.status != "won"])
    return {
        "customer": customer.name,
        "name": _colleague(w, rng, besides=customer.rep),
        "message": rng.choice(data.WELCOME_MESSAGES),
    }


def account_handover(w: World, rng: random.Random) -> Slots:
    slots = assign_rep(w, rng)
    slots["subject"] = _pick(rng, _threads(w), "email thread")
    return slots


def plan_meeting(w: World, rng: random.Random) -> Slots:
    slots = schedule_meeting(w, rng)
    slots["name"] = _colleague(w, rng)
    slots.update(
        task_title=rng.choice(data.NEW_TASK_TITLES), due=_when(rng, (3, 30)), board=rng.choice(w.boards)
    )
    return slots


def cancel_and_notify(w: World, rng: random.Random) -> Slots:
    return {
        "name": _pick(rng, _with_upcoming(w), "contact with an upcoming meeting"),
        "message": rng.choice(data.CANCEL_MESSAGES),
    }
