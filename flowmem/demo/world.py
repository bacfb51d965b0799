"""The simulated office: contacts, mailbox, calendar, CRM and task boards, and their tools.

Agents act on a `World` only through `World.call(action, args)`, which returns a short text
observation (JSON for listings, a sentence for actions) or raises `ToolError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flowmem.demo import data
from flowmem.demo.generate import build_office
from flowmem.demo.listings import ContactHit, CustomerHit, EventHit, MailHit, TaskHit, render
from flowmem.demo.records import (
    CRM_STATUSES,
    DATE_FORMAT,
    DATETIME_FORMAT,
    NOW,
    BoardTask,
    Contact,
    Customer,
    Email,
    Event,
    SentMail,
    ToolError,
    fmt_date,
    fmt_datetime,
)
from flowmem.demo.tools import TOOLS, coerce, dumps, parse_time, query_text, require_address

__all__ = ["World"]


@dataclass
class World:
    """A small in-memory office, mutated by tool calls.

    The history lists (`outbox`, `trash`, `cancelled`, `created_events`, `created_tasks`,
    `completed`) record what the tools did, so goal checks can judge the end state alone.
    """

    contacts: list[Contact]
    mailbox: dict[str, Email]
    calendar: dict[str, Event]
    customers: dict[str, Customer]
    tasks: dict[str, BoardTask]
    boards: tuple[str, ...] = data.BOARDS
    outbox: list[SentMail] = field(default_factory=list)
    trash: list[Email] = field(default_factory=list)
    cancelled: list[Event] = field(default_factory=list)
    created_events: list[str] = field(default_factory=list)
    created_tasks: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)

    @classmethod
    def generate(
        cls,
        seed: int,
        *,
        n_contacts: int = 12,
        n_emails: int = 40,
        n_events: int = 20,
        n_customers: int = 15,
        n_tasks: int = 20,
    ) -> World:
        """Build a deterministic random office (see `flowmem.demo.generate.build_office`).

        Args:
            seed: Seed of the random generator; the same seed gives an equal world.
            n_contacts: Directory size (half colleagues, half partners).
            n_emails: Mailbox size; several emails share a subject at different dates.
            n_events: Calendar size; events lie between 10 days ago and 20 days ahead.
            n_customers: CRM size.
            n_tasks: Board tasks; the same title can appear on several boards.

        Returns:
            The new world.
        """
        office = build_office(
            seed,
            n_contacts=n_contacts,
            n_emails=n_emails,
            n_events=n_events,
            n_customers=n_customers,
            n_tasks=n_tasks,
        )
        return cls(
            contacts=office.contacts,
            mailbox=office.mailbox,
            calendar=office.calendar,
            customers=office.customers,
            tasks=office.tasks,
        )

    def copy(self) -> World:
        """An independent copy; tool calls on it leave this world untouched.

        Records are frozen, so copying the containers is as good as a deep copy (and faster).
        """
        return World(
            contacts=list(self.contacts),
            mailbox=dict(self.mailbox),
            calendar=dict(self.calendar),
            customers=dict(self.customers),
            tasks=dict(self.tasks),
            boards=self.boards,
            outbox=list(self.outbox),
            trash=list(self.trash),
            cancelled=list(self.cancelled),
            created_events=list(self.created_events),
            created_tasks=list(self.created_tasks),
            completed=list(self.completed),
        )

    # -- lookups used by goal checks and task generation -------------------------------------

    def contact(self, name: str) -> Contact | None:
        """The contact with exactly this name (case-insensitive), if any."""
        wanted = name.casefold()
        return next((c for c in self.contacts if c.name.casefold() == wanted), None)

    def customer_named(self, name: str) -> Customer | None:
        """The customer with exactly this name (case-insensitive), if any."""
        wanted = name.casefold()
        return next((c for c in self.customers.values() if c.name.casefold() == wanted), None)

    # -- the tool dispatcher -----------------------------------------------------------------

    def call(self, action: str, args: Mapping[str, Any]) -> str:
        """Run one tool call.

        Args:
            action: A namespaced tool name from `TOOLS`, e.g. `mail.search`.
            args: The tool's arguments by name.

        Returns:
            The text observation.

        Raises:
            ToolError: Unknown action, missing, unexpected or ill-typed argument, unknown id,
                or a value the tool refuses (a bare name instead of an address, a bad date...).
        """
        if action not in TOOLS:
            raise ToolError(f"Unknown action '{action}'. Available: {', '.join(TOOLS)}.")
        params, _ = TOOLS[action]
        unexpected = sorted(set(args) - set(params))
        if unexpected:
            raise ToolError(f"{action}: unexpected argument '{unexpected[0]}'.")
        clean: dict[str, str | int] = {}
        for name, kind in params.items():
            if name not in args or args[name] is None:
                raise ToolError(f"{action}: missing argument '{name}'.")
            clean[name] = coerce(action, name, args[name], kind)
        handler: Callable[..., str] = getattr(self, "_" + action.replace(".", "_"))
        return handler(**clean)

    # -- tools -------------------------------------------------------------------------------

    def _contacts_lookup(self, name: str) -> str:
        q = name.strip().casefold()
        hits = [c for c in self.contacts if q and (q in c.name.casefold() or q == c.email)]
        if not hits:
            return f"No contacts match '{name}'."
        return render([ContactHit(name=c.name, email=c.email, company=c.company) for c in hits])

    def _mail_search(self, query: str) -> str:
        q = query_text(query)
        hits = [e for e in self.mailbox.values() if q in e.subject.casefold() or q in e.sender.casefold()]
        if not hits:
            return f"No emails match '{query}'."
        hits.sort(key=lambda e: e.timestamp, reverse=True)
        return render(
            [
                MailHit(id=e.id, sender=e.sender, subject=e.subject, date=fmt_datetime(e.timestamp))
                for e in hits
            ]
        )

    def _mail_read(self, email_id: str) -> str:
        e = self._email(email_id)
        return dumps(
            {
                "id": e.id,
                "from": e.sender,
                "to": list(e.recipients),
                "subject": e.subject,
                "date": fmt_datetime(e.timestamp),
                "body": e.body,
            }
        )

    def _mail_forward(self, email_id: str, to: str) -> str:
        e = self._email(email_id)
        to = require_address(to, "recipient")
        sent = self._send("forward", to, f"Fwd: {e.subject}", e.body, ref_id=e.id)
        return f"Forwarded {e.id} ('{e.subject}') to {to} as {sent.id}."

    def _mail_send(self, to: str, subject: str, body: str) -> str:
        to = require_address(to, "recipient")
        if not subject.strip():
            raise ToolError("mail.send: the subject is empty.")
        sent = self._send("send", to, subject, body)
        return f"Sent '{sent.subject}' to {to} as {sent.id}."

    def _mail_reply(self, email_id: str, body: str) -> str:
        e = self._email(email_id)
        if not body.strip():
            raise ToolError("mail.reply: the body is empty.")
        sent = self._send("reply", e.sender, f"Re: {e.subject.removeprefix('Re: ')}", body, ref_id=e.id)
        return f"Replied to {e.sender} about '{e.subject}' as {sent.id}."

    def _mail_delete(self, email_id: str) -> str:
        e = self._email(email_id)
        del self.mailbox[e.id]
        self.trash.append(e)
        return f"Moved {e.id} ('{e.subject}') to the trash."

    def _calendar_find_events(self, query: str) -> str:
        q = query_text(query)
        hits = [
            e
            for e in self.calendar.values()
            if q in e.title.casefold() or any(q in p for p in e.participants)
        ]
        if not hits:
            return f"No events match '{query}'."
        hits.sort(key=lambda e: e.start)
        return render(
            [
                EventHit(
                    id=e.id,
                    title=e.title,
                    start=fmt_datetime(e.start),
                    duration_minutes=e.duration_minutes,
                    participants=e.participants,
                )
                for e in hits
            ]
        )

    def _calendar_create_event(self, title: str, participant: str, start: str, duration_minutes: int) -> str:
        participant = require_address(participant, "participant")
        when = parse_time(start, DATETIME_FORMAT, "start", "YYYY-MM-DD HH:MM")
        minutes: int = duration_minutes
        if not 5 <= minutes <= 480:
            raise ToolError(f"Invalid duration_minutes {minutes}: expected 5 to 480.")
        if when.replace(tzinfo=NOW.tzinfo) < NOW:
            raise ToolError(f"Cannot create an event in the past ({start}).")
        ev = Event(
            id=f"ev-{len(self.calendar) + len(self.cancelled) + 1:03d}",
            title=title.strip(),
            participants=(participant,),
            start=when.replace(tzinfo=NOW.tzinfo),
            duration_minutes=minutes,
        )
        self.calendar[ev.id] = ev
        self.created_events.append(ev.id)
        return f"Created {ev.id} '{ev.title}' on {fmt_datetime(ev.start)} ({minutes} min)."

    def _calendar_cancel_event(self, event_id: str) -> str:
        ev = self.calendar.pop(event_id, None)
        if ev is None:
            raise ToolError(f"No event with id '{event_id}'.")
        self.cancelled.append(ev)
        return f"Cancelled {ev.id} '{ev.title}' on {fmt_datetime(ev.start)}."

    def _crm_find_customer(self, query: str) -> str:
        q = query_text(query)
        hits = [c for c in self.customers.values() if q in c.name.casefold() or q in c.company.casefold()]
        if not hits:
            return f"No customers match '{query}'."
        return render(
            [CustomerHit(id=c.id, name=c.name, company=c.company, status=c.status, rep=c.rep) for c in hits]
        )

    def _crm_update_status(self, customer_id: str, status: str) -> str:
        c = self._customer(customer_id)
        if status not in CRM_STATUSES:
            raise ToolError(f"Invalid status '{status}': expected one of {', '.join(CRM_STATUSES)}.")
        self.customers[c.id] = c.model_copy(update={"status": status})
        return f"{c.id} ({c.name}) status: {c.status} -> {status}."

    def _crm_assign_rep(self, customer_id: str, rep: str) -> str:
        c = self._customer(customer_id)
        rep = require_address(rep, "rep")
        if not any(p.internal and p.email == rep for p in self.contacts):
            raise ToolError(f"'{rep}' is not a colleague and cannot be a sales rep.")
        self.customers[c.id] = c.model_copy(update={"rep": rep})
        return f"{c.id} ({c.name}) rep: {c.rep} -> {rep}."

    def _board_find_tasks(self, query: str) -> str:
        q = query_text(query)
        hits = [t for t in self.tasks.values() if q in t.title.casefold() or q == t.board.casefold()]
        if not hits:
            return f"No tasks match '{query}'."
        return render(
            [
                TaskHit(
                    id=t.id,
                    title=t.title,
                    board=t.board,
                    assignee=t.assignee,
                    due=fmt_date(t.due),
                    status=t.status,
                )
                for t in hits
            ]
        )

    def _board_create_task(self, title: str, assignee: str, due: str, board: str) -> str:
        assignee = require_address(assignee, "assignee")
        due_on = parse_time(due, DATE_FORMAT, "due", "YYYY-MM-DD").date()
        found = next((b for b in self.boards if b.casefold() == board.strip().casefold()), None)
        if found is None:
            raise ToolError(f"Unknown board '{board}'. Boards: {', '.join(self.boards)}.")
        t = BoardTask(
            id=f"tk-{len(self.tasks) + 1:03d}",
            title=title.strip(),
            assignee=assignee,
            due=due_on,
            board=found,
        )
        self.tasks[t.id] = t
        self.created_tasks.append(t.id)
        return f"Created {t.id} '{t.title}' on {found} for {assignee}, due {fmt_date(due_on)}."

    def _board_complete_task(self, task_id: str) -> str:
        t = self.tasks.get(task_id)
        if t is None:
            raise ToolError(f"No task with id '{task_id}'.")
        if t.status == "done":
            raise ToolError(f"Task '{t.id}' is already done.")
        self.tasks[t.id] = t.model_copy(update={"status": "done"})
        self.completed.append(t.id)
        return f"Marked {t.id} '{t.title}' ({t.board}) as done."

    # -- helpers -----------------------------------------------------------------------------

    def _email(self, email_id: str) -> Email:
        e = self.mailbox.get(email_id)
        if e is None:
            raise ToolError(f"No email with id '{email_id}'.")
        return e

    def _customer(self, customer_id: str) -> Customer:
        c = self.customers.get(customer_id)
        if c is None:
            raise ToolError(f"No customer with id '{customer_id}'.")
        return c

    def _send(self, kind: str, to: str, subject: str, body: str, ref_id: str | None = None) -> SentMail:
        sent = SentMail.model_validate(
            {
                "id": f"out-{len(self.outbox) + 1:03d}",
                "kind": kind,
                "to": to,
                "subject": subject,
                "body": body,
                "timestamp": NOW,
                "ref_id": ref_id,
            }
        )
        self.outbox.append(sent)
        return sent
