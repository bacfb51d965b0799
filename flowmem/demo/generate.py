"""Deterministic random generation of the simulated office's initial state."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import NamedTuple

from flowmem.demo import data
from flowmem.demo.records import CRM_STATUSES, NOW, USER_ADDRESS, BoardTask, Contact, Customer, Email, Event

__all__ = ["Office", "build_office"]


class Office(NamedTuple):
    """The initial state of a world."""

    contacts: list[Contact]
    mailbox: dict[str, Email]
    calendar: dict[str, Event]
    customers: dict[str, Customer]
    tasks: dict[str, BoardTask]


def build_office(
    seed: int,
    *,
    n_contacts: int = 12,
    n_emails: int = 40,
    n_events: int = 20,
    n_customers: int = 15,
    n_tasks: int = 20,
) -> Office:
    """Draw an office from the invented vocabulary in `flowmem.demo.data`.

    Args:
        seed: Seed of the random generator; the same seed gives an equal office.
        n_contacts: Directory size; even positions are colleagues, odd ones partners.
        n_emails: Mailbox size; emails are spread over 9 threads, some as "Re:" replies.
        n_events: Calendar size; weekday half-hour slots from 10 days ago to 20 days ahead.
        n_customers: CRM size; `n_contacts + n_customers` must not exceed 30 (unique names).
        n_tasks: Board tasks; the same title can sit on several boards.

    Returns:
        The office.

    Raises:
        ValueError: More people or items than the vocabulary can supply uniquely.
    """
    rng = random.Random(f"flowmem-sim-world:{seed}")
    people = n_contacts + n_customers
    if people > min(len(data.FIRST_NAMES), len(data.LAST_NAMES)) or n_customers > len(data.COMPANIES):
        raise ValueError("not enough invented names for that many contacts and customers")
    if n_contacts < 2:
        raise ValueError("need at least one colleague and one partner contact")
    # Sampling first and last names without replacement keeps both unique, so a first name
    # alone never matches two people in a directory search.
    names = [
        f"{f} {la}"
        for f, la in zip(
            rng.sample(data.FIRST_NAMES, people), rng.sample(data.LAST_NAMES, people), strict=True
        )
    ]
    contacts = _contacts(rng, names[:n_contacts])
    colleagues = [c.email for c in contacts if c.internal]
    return Office(
        contacts=contacts,
        mailbox=_mailbox(rng, contacts, colleagues, n_emails),
        calendar=_calendar(rng, contacts, n_events),
        customers=_customers(rng, names[n_contacts:], colleagues),
        tasks=_tasks(rng, colleagues, n_tasks),
    )


def _contacts(rng: random.Random, names: list[str]) -> list[Contact]:
    contacts = []
    for i, name in enumerate(names):
        internal = i % 2 == 0
        company, domain = (data.HOME_COMPANY, data.HOME_DOMAIN) if internal else rng.choice(data.PARTNERS)
        email = f"{name.replace(' ', '.')}@{domain}".lower()
        contacts.append(Contact(name=name, email=email, company=company, internal=internal))
    return contacts


def _mailbox(rng: random.Random, contacts: list[Contact], colleagues: list[str], n: int) -> dict[str, Email]:
    subjects = rng.sample(data.EMAIL_SUBJECTS, 9)
    # Distinct ages (in minutes) so that "the latest email" is never a tie.
    minutes = rng.sample(range(60, 45 * 24 * 60, 13), n)
    mailbox: dict[str, Email] = {}
    for i in range(n):
        sender = rng.choice(contacts)
        topic = rng.choice(subjects)
        # Replies keep the thread subject, so "the latest email about X" is decided by date.
        subject = f"Re: {topic}" if rng.random() < 0.3 else topic
        body = rng.choice(data.EMAIL_BODIES).format(topic=topic.lower(), first=sender.name.split()[0])
        cc = rng.sample(colleagues, 1) if rng.random() < 0.3 else []
        email_id = f"em-{i + 1:03d}"
        mailbox[email_id] = Email(
            id=email_id,
            sender=sender.email,
            recipients=(USER_ADDRESS, *cc),
            subject=subject,
            body=body,
            timestamp=NOW - timedelta(minutes=minutes[i]),
        )
    return mailbox


def _calendar(rng: random.Random, contacts: list[Contact], n: int) -> dict[str, Event]:
    slots: list[datetime] = [
        NOW.replace(hour=h, minute=m) + timedelta(days=d)
        for d in range(-10, 21)
        for h in range(9, 17)
        for m in (0, 30)
        if (NOW + timedelta(days=d)).weekday() < 5 and (d, h, m) != (0, 9, 0)
    ]
    calendar: dict[str, Event] = {}
    # Distinct start slots, so that "the next meeting with X" is never a tie.
    for i, start in enumerate(rng.sample(slots, n)):
        people = rng.sample(contacts, rng.choice((1, 1, 2)))
        event_id = f"ev-{i + 1:03d}"
        calendar[event_id] = Event(
            id=event_id,
            title=rng.choice(data.EVENT_TITLES),
            participants=tuple(p.email for p in people),
            start=start,
            duration_minutes=rng.choice((15, 30, 45, 60)),
        )
    return calendar


def _customers(rng: random.Random, names: list[str], colleagues: list[str]) -> dict[str, Customer]:
    companies = rng.sample(data.COMPANIES, len(names))
    customers: dict[str, Customer] = {}
    for i, name in enumerate(names):
        customer_id = f"cu-{i + 1:03d}"
        customers[customer_id] = Customer(
            id=customer_id,
            name=name,
            company=companies[i],
            status=rng.choice(CRM_STATUSES),
            rep=rng.choice(colleagues),
        )
    return customers


def _tasks(rng: random.Random, colleagues: list[str], n: int) -> dict[str, BoardTask]:
    pairs = rng.sample([(t, b) for t in data.BOARD_TITLES for b in data.BOARDS], n)
    tasks: dict[str, BoardTask] = {}
    for i, (title, board) in enumerate(pairs):
        task_id = f"tk-{i + 1:03d}"
        tasks[task_id] = BoardTask(
            id=task_id,
            title=title,
            assignee=rng.choice(colleagues),
            due=NOW.date() + timedelta(days=rng.randint(-5, 20)),
            board=board,
            status="done" if rng.random() < 0.2 else "open",
        )
    return tasks
