"""What the scripted task agents do, family by family, including their realistic mistakes.

Each procedure knows the correct way to solve its family but may `slip` at decision points
(see `flowmem.demo.runner`); the comments mark which slips raise tool errors the agent may
recover from, and which silently miss the goal.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from flowmem.demo.listings import CustomerHit, EventHit, MailHit, TaskHit, listing
from flowmem.demo.records import DATETIME_FORMAT, NOW
from flowmem.demo.runner import (
    GiveUp,
    Procedure,
    Run,
    act,
    address,
    find,
    find_address_or_search,
    lookup,
    newest,
)

__all__ = ["PROCEDURES"]


# -- email -----------------------------------------------------------------------------------


def forward_latest(run: Run, s: Mapping[str, str]) -> str:
    """Search the subject, take the newest hit, look the person up, forward."""
    subject, name = s["subject"], s["name"]
    hits = find(
        run,
        MailHit,
        subject,
        f"emails about '{subject}'",
        [f"{subject} final", f"'{subject}'", f"Fwd: {subject}"],
    )
    if len(hits) > 1 and run.slip(0.9):  # harmless detour: reads an email it does not need
        run.call("mail.read", {"email_id": hits[-1].id}, "Read the oldest one for context.")
    pick = newest(run, hits)  # silent: a slip picks an older email
    if run.maybe(0.4):
        run.call("mail.read", {"email_id": pick.id}, "Check it before forwarding.")
    to = address(run, name)  # recoverable: a bare name is rejected by the tool
    act(
        run,
        "mail.forward",
        {"email_id": pick.id, "to": to},
        f"Forward {pick.id} ({pick.date}) to {name}.",
        people={"to": name},
    )
    return f"Forwarded '{pick.subject}' from {pick.date} to {name}."


def reply_latest(run: Run, s: Mapping[str, str]) -> str:
    """Look the sender up, search their emails, reply to the newest."""
    name = s["name"]
    sender = find_address_or_search(run, name, "mail.search", "emails from")
    listed = run.call("mail.search", {"query": sender}, f"List the emails from {sender}.")
    hits = [h for h in listing(listed, MailHit) if h.sender == sender]
    if not hits:
        raise GiveUp(f"I found no emails from {name}")
    pick = newest(run, hits)
    if run.maybe(0.5):
        run.call("mail.read", {"email_id": pick.id}, "Read it before replying.")
    body = s["message"]
    if run.slip(0.5):
        body = "Thanks, noted. I will get back to you."  # paraphrased away the asked-for text
    act(run, "mail.reply", {"email_id": pick.id, "body": body}, f"Reply to {pick.id}.")
    return f"Replied to {name}'s email '{pick.subject}' from {pick.date}."


def send_email(run: Run, s: Mapping[str, str]) -> str:
    """Look the person up and send the email."""
    name, subject, message = s["name"], s["subject"], s["message"]
    args = {"to": address(run, name), "subject": subject, "body": message}
    if run.slip(0.5):
        del args["subject"]  # recoverable: forgot the subject, which the tool insists on
    if run.slip(0.5):
        args["body"] = f"Hi {name.split()[0]}, quick note about {subject.lower()}."  # silent
    act(
        run,
        "mail.send",
        args,
        f"Send the email to {name}.",
        correct={"subject": subject},
        people={"to": name},
    )
    return f"Sent '{subject}' to {name}."


def delete_from(run: Run, s: Mapping[str, str]) -> str:
    """Look the sender up, search their emails, delete every one."""
    name = s["name"]
    if run.slip(0.7):  # searches by name, finds nothing, and may conclude there is nothing to do
        run.call("mail.search", {"query": name}, f"Search for emails from {name}.")
        if not run.recovers():
            return f"There are no emails from {name}, so there is nothing to delete."
        sender = lookup(run, name, f"Nothing under the name; look up {name}'s address.")
    else:
        sender = lookup(run, name)
    listed = run.call("mail.search", {"query": sender}, f"List the emails from {sender}.")
    hits = [h for h in listing(listed, MailHit) if h.sender == sender]
    if len(hits) > 1 and run.slip(0.9):
        hits = hits[:1]  # silent: deletes the first match only, as if asked for "the email"
    for h in hits:
        act(run, "mail.delete", {"email_id": h.id}, f"Delete {h.id} ('{h.subject}').")
    if run.maybe(0.4):
        left = [
            h
            for h in listing(run.call("mail.search", {"query": sender}, "Check that none are left."), MailHit)
            if h.sender == sender
        ]
        if left and run.recovers():
            for h in left:
                act(run, "mail.delete", {"email_id": h.id}, f"One more left: delete {h.id}.")
    return f"Deleted all emails from {name}."


# -- calendar --------------------------------------------------------------------------------


def schedule_meeting(run: Run, s: Mapping[str, str]) -> str:
    """Look the person up and create the event with an exact YYYY-MM-DD HH:MM start."""
    name, title, minutes = s["name"], s["title"], int(s["duration"])
    start = f"{s['date']} {s['time']}"
    who = address(run, name)
    if run.maybe(0.3):
        run.call("calendar.find_events", {"query": who}, "See what is already booked with them.")
    given = start
    if run.slip(1.0):  # recoverable: a date format the tool rejects
        y, m, d = s["date"].split("-")
        given = run.rng.choice(
            [f"{s['date']}T{s['time']}:00", f"{d}/{m}/{y} {s['time']}", f"{s['date']} at {s['time']}"]
        )
    if run.slip(0.6):
        minutes = 30 if minutes != 30 else 60  # silent: fell back to a default length
    act(
        run,
        "calendar.create_event",
        {"title": title, "participant": who, "start": given, "duration_minutes": minutes},
        f"Create '{title}' with {name}.",
        correct={"start": start},
        people={"participant": name},
    )
    return f"Scheduled '{title}' with {name} on {start} for {minutes} minutes."


def cancel_next(run: Run, s: Mapping[str, str]) -> str:
    """Look the person up, list their events, cancel the earliest one still ahead."""
    name = s["name"]
    who = find_address_or_search(run, name, "calendar.find_events", "meetings with")
    listed = run.call("calendar.find_events", {"query": who}, f"List the meetings with {who}.")
    events = listing(listed, EventHit)
    ahead = [
        e for e in events if datetime.strptime(e.start, DATETIME_FORMAT).replace(tzinfo=NOW.tzinfo) > NOW
    ]
    if not ahead:
        raise GiveUp(f"there is no upcoming meeting with {name}")
    pick = ahead[0]
    if events[0] is not pick and run.slip(0.9):
        pick = events[0]  # silent: took the first listed one, which may lie in the past
    act(
        run,
        "calendar.cancel_event",
        {"event_id": pick.id},
        f"The next one is {pick.id} on {pick.start}; cancel it.",
    )
    return f"Cancelled '{pick.title}' with {name} on {pick.start}."


# -- CRM -------------------------------------------------------------------------------------

_STATUS_WORDS = {
    "lead": "new lead",
    "qualified": "sales-qualified",
    "won": "closed-won",
    "lost": "Closed Lost",
}


def _customer(run: Run, name: str) -> CustomerHit:
    first, _, last = name.partition(" ")
    hits = find(
        run,
        CustomerHit,
        name,
        f"the customer {name}",
        [f"{last}, {first}", f"{name} account", f"{name} Inc"],
    )
    return next((h for h in hits if h.name.casefold() == name.casefold()), hits[0])


def update_status(run: Run, s: Mapping[str, str]) -> str:
    """Find the customer and set the status, using the CRM's own status word."""
    customer, status = s["customer"], s["status"]
    row = _customer(run, customer)
    given = _STATUS_WORDS[status] if run.slip(1.0) else status  # recoverable: rejected word
    act(
        run,
        "crm.update_status",
        {"customer_id": row.id, "status": given},
        f"Set {row.id} to {status}.",
        correct={"status": status},
    )
    return f"{customer} is now {status}."


def assign_rep(run: Run, s: Mapping[str, str]) -> str:
    """Find the customer, look the colleague up, assign them."""
    customer, name = s["customer"], s["name"]
    row = _customer(run, customer)
    rep = address(run, name)  # recoverable: a bare name is rejected by the tool
    act(
        run,
        "crm.assign_rep",
        {"customer_id": row.id, "rep": rep},
        f"Assign {row.id} to {name}.",
        people={"rep": name},
    )
    if run.maybe(0.3):
        run.call("crm.find_customer", {"query": customer}, "Verify the new rep.")
    return f"{name} is now the rep for {customer}."


# -- task board ------------------------------------------------------------------------------


def create_task(run: Run, s: Mapping[str, str]) -> str:
    """Look the assignee up and create the task with a YYYY-MM-DD due date."""
    title, name, due, board = s["title"], s["name"], s["due"], s["board"]
    who = address(run, name)
    given_due, given_board = due, board
    if run.slip(0.9):  # recoverable: a date format the tool rejects
        y, m, d = due.split("-")
        given_due = run.rng.choice([f"{m}/{d}/{y}", f"{d}.{m}.{y}"])
    if run.slip(0.7):  # recoverable: an unknown board name
        given_board = f"{board} board"
    act(
        run,
        "board.create_task",
        {"title": title, "assignee": who, "due": given_due, "board": given_board},
        f"Create '{title}' on {board}.",
        correct={"due": due, "board": board},
        people={"assignee": name},
    )
    return f"Created '{title}' for {name} on the {board} board, due {due}."


def complete_task(run: Run, s: Mapping[str, str]) -> str:
    """Find the task by title, take the one on the right board, mark it done."""
    title, board = s["title"], s["board"]
    if run.maybe(0.3):
        run.call("board.find_tasks", {"query": board}, f"Look at the {board} board first.")
    hits = [
        h
        for h in listing(run.call("board.find_tasks", {"query": title}, f"Find the task '{title}'."), TaskHit)
        if h.title.casefold() == title.casefold()
    ]
    right = next((h for h in hits if h.board == board), None)
    if right is None:
        raise GiveUp(f"there is no task '{title}' on the {board} board")
    pick = hits[0] if run.slip(1.0) else right  # silent (or an error if done): ignores the board
    act(
        run,
        "board.complete_task",
        {"task_id": pick.id},
        f"Mark {pick.id} ({pick.board}) as done.",
        correct={"task_id": right.id},
    )
    return f"Marked '{title}' on the {board} board as done."


PROCEDURES: dict[str, Procedure] = {
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
"""The procedure of every single-agent family."""
