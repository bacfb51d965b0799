from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.agents import WorkflowMemory
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.interchange import read_trajectories
from flowmem.jobs.collect import collect
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import ingest_files, store_trajectories
from flowmem.jobs.outcome import report_outcome
from flowmem.models import Trajectory
from flowmem.policy.scrub import ScrubKind, scrub_text, scrub_trajectory, scrub_value
from flowmem.server.service import Service
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import WORKBENCH
from tests.processes import READY_LIMIT

ALL: list[ScrubKind] = ["secrets", "cards", "emails", "phones"]


def luhn(base: str) -> str:
    """`base` with the check digit that makes it pass the Luhn check."""
    for d in "0123456789":
        digits = [int(c) for c in reversed(base + d)]
        if (sum(digits[0::2]) + sum(sum(divmod(2 * x, 10)) for x in digits[1::2])) % 10 == 0:
            return base + d
    raise AssertionError("unreachable")


def hexof(seed: str, n: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


# -- each kind: what is masked, and what is not ------------------------------------------------

SECRETS = [
    ("key sk-proj-" + hexof("a", 40) + " here", "key [SECRET] here"),
    ("sk-ant-api03-" + hexof("b", 30), "[SECRET]"),
    ("stripe sk_live_" + hexof("c", 24), "stripe [SECRET]"),
    ("ghp_" + hexof("d", 36) + ", github_pat_11AB" + hexof("e", 30), "[SECRET], [SECRET]"),
    ("slack xoxb-123456789012-" + hexof("f", 24), "slack [SECRET]"),
    ("aws AKIAIOSFODNN7EXAMPLE google AIzaSyA-" + hexof("g", 32), "aws [SECRET] google [SECRET]"),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl ok", "jwt [SECRET] ok"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow+/=\n-----END RSA PRIVATE KEY-----\nnext", "[SECRET]\nnext"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B", "[SECRET]"),
    ("Authorization: Bearer " + hexof("h", 32), "Authorization: Bearer [SECRET]"),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNz'", "curl -H 'Authorization: Basic [SECRET]'"),
    ("use bearer abc.DEF-123_456 now", "use bearer [SECRET] now"),
    ("login?user=bob&password=hunter22&next=/", "login?user=bob&password=[SECRET]&next=/"),
    ('{"password": "correct horse battery", "user": "bob"}', '{"password": "[SECRET]", "user": "bob"}'),
    ("db_password: s3cr3t! api_key='k-123'", "db_password: [SECRET] api_key='[SECRET]'"),
    ('{"session_token": "abc123", "token": "xyz789"}', '{"session_token": "[SECRET]", "token": "[SECRET]"}'),
    ("callback?token=abc123&secret=def456&pass=x", "callback?token=[SECRET]&secret=[SECRET]&pass=[SECRET]"),
    ("postgres://admin:pa55w0rd@db.example.com/x", "postgres://[SECRET]@db.example.com/x"),
]

# One sample of every prefix each key rule admits, so that narrowing any of them fails a case.
SECRETS += [
    (f"key {prefix}{hexof(prefix, 32)} end", "key [SECRET] end")
    for prefix in (
        *("sk-", "sk-live-", "sk-test-", "sk-svcacct-", "sk-admin-"),
        *("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
        *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        *("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"),
        "AIza",
    )
]
SECRETS += [
    (f"aws {prefix}{hexof(prefix, 16).upper()} end", "aws [SECRET] end") for prefix in ("AKIA", "ASIA")
]

NOT_SECRETS = [
    "task-12345678901234567890abcdef and risk-assessment-of-the-quarterly-plan",
    "the bearer instruments were signed",
    "max_tokens=100, token_count: 5, tokens: 12",
    "Secret: the party is on Friday. Token: 3. The key is in the drawer.",
    "password reset requested; passwords must be 12 characters",
    "https://example.com/path?q=1&page_size=10 and ftp://files.example.com/a:b",
    "Skipping sk-short and ghp_short and eyJ only",
    "Authorization: [SECRET] password=[SECRET] Bearer [SECRET]",
]

CARD = luhn("411111111111111")  # a Visa test number
CARDS = [
    (f"card {CARD} ok", "card [CARD] ok"),
    ("4111 1111 1111 1111 and 5555-5555-5555-4444", "[CARD] and [CARD]"),
    ("amex 3782 822463 10005, 378282246310005.", "amex [CARD], [CARD]."),
    ("year 2023 4111 1111 1111 1111", "year 2023 [CARD]"),
]

NOT_CARDS = [
    "4111 1111 1111 1112",  # fails the Luhn check
    "4111111111111112",
    "1700000000000 and 0000000000000",  # a millisecond timestamp; a number no card starts with
    "0.4111111111111111 and 4111111111111111.5 and 14111111111111111111",  # decimals, a longer number
    "2023-11-21T10:00:00Z 123e4567-e89b-12d3-a456-426614174000 00000123 $1,234,567.89",
    "4111-1111 1111-1111",  # mixed separators
]

EMAILS = [
    ("mail olga.petrova@atlas.com now", "mail [EMAIL] now"),
    ("<a+tag@sub.example.co.uk>, B_C@x-y.io.", "<[EMAIL]>, [EMAIL]."),
]

NOT_EMAILS = ["@olga on slack", "user@localhost", "a@b.c", "price 3@5 each"]

PHONES = [
    ("call +1 (415) 555-0123 today", "call [PHONE] today"),
    ("+44 20 7946 0958, +33 6 12 34 56 78", "[PHONE], [PHONE]"),
    ("+4915112345678 or +1-555-234-5678", "[PHONE] or [PHONE]"),
    ("(555) 234-5678 / 555-123-4567 / 555.123.4567", "[PHONE] / [PHONE] / [PHONE]"),
    ("020 7946 0958 or 06 12 34 56 78 or 030-1234-5678", "[PHONE] or [PHONE] or [PHONE]"),
]

NOT_PHONES = [
    "2023-11-21 2023-11-21T10:00:00+01:00 10:30 12:45:00 01.02.2023 01/02/2023 21.11.2023",
    "id 00000123, order 1234567, 12345678901, ticket T-555-1234",
    "$1,234.56 and 1 000 000 EUR and 1.234.567,89",
    "v1.2.3 192.168.100.200 10.0.0.1",
    "123e4567-e89b-12d3-a456-426614174000",
    "+12345678 +0.123456789 +1.5 01.02.2023 +100",
    "scores 100 200 300 400",
    "2023 1130 0001",
]


@pytest.mark.parametrize(("text", "masked"), SECRETS + CARDS + EMAILS + PHONES)
def test_each_kind_is_masked(text: str, masked: str) -> None:
    assert scrub_text(text, ALL) == masked


@pytest.mark.parametrize("text", NOT_SECRETS + NOT_CARDS + NOT_EMAILS + NOT_PHONES)
def test_lookalikes_are_kept(text: str) -> None:
    assert scrub_text(text, ALL) == text


def test_only_the_chosen_kinds_are_masked() -> None:
    text = f"sk-proj-{hexof('k', 30)} {CARD} olga@example.com +44 20 7946 0958"
    assert scrub_text(text, []) == text
    assert scrub_text(text, ["secrets"]).startswith("[SECRET] 4111")
    assert scrub_text(text, ["cards", "emails"]).endswith(" [CARD] [EMAIL] +44 20 7946 0958")
    assert scrub_text(text, ["phones"]).endswith("@example.com [PHONE]")
    with pytest.raises(ValueError, match="unknown scrub kinds"):
        scrub_text(text, ["passwords"])  # type: ignore[list-item]


def test_credential_named_keys_are_masked_whole_at_any_depth() -> None:
    args = {
        "user": "bob",
        "password": 123456,
        "apiKey": "plain",
        "AWS_SECRET_ACCESS_KEY": "x",
        "headers": {"Authorization": "Basic abc", "X-Api-Key": "k"},
        "credentials": {"user": "bob", "pass": "p"},
        "login": {"user": "bob", "pass": "p", "passed": True},
        "items": [{"client_secret": "s"}, {"refresh_token": ["a", "b"]}],
        "max_tokens": 100,
        "token_count": 5,
        "use_token": True,
        "secret": None,
        "tokens": ["a", "b"],
        "card": int(CARD),
        "amount": 4111111111111112,
    }
    assert scrub_value(args, ["secrets", "cards"]) == {
        **args,
        "password": "[SECRET]",
        "apiKey": "[SECRET]",
        "AWS_SECRET_ACCESS_KEY": "[SECRET]",
        "headers": {"Authorization": "[SECRET]", "X-Api-Key": "[SECRET]"},
        "credentials": "[SECRET]",
        "login": {"user": "bob", "pass": "[SECRET]", "passed": True},
        "items": [{"client_secret": "[SECRET]"}, {"refresh_token": "[SECRET]"}],
        "card": "[CARD]",
    }
    assert scrub_value(args, ["cards"])["password"] == 123456
    assert scrub_value(args, []) is args


def run(**kw: Any) -> Trajectory:
    return Trajectory.model_validate(
        {
            "id": "r1",
            "task": "Log in as bob and pay",
            "steps": [
                {"action": "auth.login", "args": {"user": "bob", "pw": "x"}, "observation": "ok"},
                {"action": "billing.pay", "args": {"amount": 5}, "thought": "pay now"},
            ],
            "success": True,
            **kw,
        }
    )


def test_a_clean_trajectory_is_returned_as_is() -> None:
    clean = run(meta={"n": 1, "tags": ["a"]}, final_answer="done", feedback="fine")
    assert scrub_trajectory(clean, ALL) is clean
    assert scrub_trajectory(clean, []) is clean


def test_every_field_is_scrubbed_counted_and_a_credential_value_masked_everywhere() -> None:
    pw = "Hunter2!x7"
    t = run(
        task=f"Log in as bob with {pw} and pay with card {CARD}",
        steps=[
            {
                "action": "auth.login",
                "args": {"user": "bob", "password": pw},
                "thought": f"bob's password is {pw}",
                "observation": "session token=abc123; mail bob@example.com",
                "error": "call +44 20 7946 0958",
                "meta": {"raw": f"login {pw}"},
            },
            {"action": "billing.pay", "args": {"card": int(CARD), "note": "ok"}, "observation": "paid"},
        ],
        final_answer=f"paid with {CARD}",
        feedback="ok, sent to bob@example.com",
        meta={"contact": "bob@example.com", "scrubbed": {"emails": 2}},
    )
    out = scrub_trajectory(t, ALL)
    assert out is not t and out.id == t.id and out.steps[1].args["note"] == "ok"
    assert out.task == "Log in as bob with [SECRET] and pay with card [CARD]"
    first = out.steps[0]
    assert first.args == {"user": "bob", "password": "[SECRET]"}
    assert first.thought == "bob's password is [SECRET]" and first.meta == {"raw": "login [SECRET]"}
    assert first.observation == "session token=[SECRET]; mail [EMAIL]" and first.error == "call [PHONE]"
    assert out.steps[1].args["card"] == "[CARD]" and out.steps[1] is not t.steps[1]
    assert out.final_answer == "paid with [CARD]" and out.feedback == "ok, sent to [EMAIL]"
    assert out.meta == {
        "contact": "[EMAIL]",
        "scrubbed": {"secrets": 5, "cards": 3, "emails": 5, "phones": 1},
    }
    assert scrub_trajectory(out, ALL) is out
    untouched = run(steps=[{"action": "a", "args": {"x": 1}}, t.steps[1]])
    partly = scrub_trajectory(untouched, ["cards"])
    assert partly.steps[0] is untouched.steps[0] and partly.meta == {"scrubbed": {"cards": 1}}


def fragments() -> list[str]:
    good = [text for text, _ in SECRETS + CARDS + EMAILS + PHONES]
    return good + NOT_SECRETS + NOT_CARDS + NOT_EMAILS + NOT_PHONES + ["[SECRET]", "[CARD]", "x", "=", ":"]


def test_scrubbing_is_idempotent_on_random_mixtures() -> None:
    rng = random.Random(7)
    parts, joints = fragments(), [" ", "\n", "", ", ", '"', "=", ": ", "/", "-", "+", "."]
    for _ in range(400):
        text = "".join(rng.choice(parts) + rng.choice(joints) for _ in range(rng.randint(1, 6)))
        kinds = rng.sample(ALL, rng.randint(1, 4))
        once = scrub_text(text, kinds)
        assert scrub_text(once, kinds) == once, text


def test_long_adversarial_texts_take_linear_time() -> None:
    n = 200_000  # the default FLOWMEM_MAX_STRING_CHARS
    texts = [
        "a_" * (n // 2) + "password=1",
        ("-----BEGIN PRIVATE KEY-----" + "A" * 50 + "\n") * (n // 80),
        "1111 " * (n // 5),
        "+1 2 " * (n // 5),
        "a." * (n // 2) + "@x",
        "http://" + "a" * n + ":" + "b" * n,
        "Authorization: " * (n // 15),
    ]
    started = time.thread_time()  # CPU time: a loaded machine makes the wall clock, not this, longer
    for text in texts:
        scrub_text(text, ALL)
    assert time.thread_time() - started < 10  # about 0.5 s; quadratic patterns took minutes


def test_outcome_feedback_is_scrubbed_too(settings: Settings, store: Store) -> None:
    store_trajectories(store, [run()], settings.scrub)
    feedback = f"charged {CARD} twice, Bearer {hexof('z', 20)}"
    report_outcome(store, "r1", success=False, feedback=feedback, namespace="default", scrub=settings.scrub)
    assert store.get_trajectory("r1").feedback == "charged [CARD] twice, Bearer [SECRET]"


@pytest.mark.skipif(not WORKBENCH.exists(), reason="shared WorkBench data not present")
def test_the_default_scrub_changes_nothing_in_workbench() -> None:
    settings = Settings()
    runs = [t for t in read_trajectories(WORKBENCH, settings) if isinstance(t, Trajectory)]
    assert len(runs) == 4197
    assert [t.id for t in runs if scrub_trajectory(t, settings.scrub) is not t] == []


# -- end to end: planted secrets and personal data reach no workflow, context or payload -------

NAMES = ["olga", "kofi", "amir", "lena", "raj", "nadia"]
MONTHS = ["january", "march", "may", "july", "september", "november"]


class Planted:
    """Per run: an sk- key, a bearer token, a password, a card, an e-mail address, a phone."""

    def __init__(self, family: int, i: int) -> None:
        seed = f"{family}-{i}"
        self.name = NAMES[i]
        self.sk = "sk-proj-" + hexof("sk" + seed, 40)
        self.token = hexof("tok" + seed, 32)
        self.password = "Pw-" + hexof("pw" + seed, 8) + "!"
        self.card = luhn(f"4{family}{i:02d}" + "7" * 11)
        self.email = f"{self.name}.{family}{i}@corp-mail.example"
        self.phone = f"+44 20 79{family}{i} 0{family}{i}{i}"

    @property
    def grouped_card(self) -> str:
        return " ".join(self.card[j : j + 4] for j in range(0, 16, 4))

    @property
    def values(self) -> list[str]:
        return [self.sk, self.token, self.password, self.card, self.grouped_card, self.email, self.phone]


def record(family: int, i: int) -> dict[str, Any]:
    """Run i of a task family, in the interchange format, with secrets and personal data planted
    in its task, arguments, observations, errors and meta; runs 2 and 5 fail."""
    p, ok = Planted(family, i), i % 3 != 2
    auth = {"Authorization": f"Bearer {p.token}"}
    if family == 0:
        task = f"Log in with password {p.password} and email the {MONTHS[i]} report to {p.email}"
        steps: list[dict[str, Any]] = [
            {"action": "auth.login", "args": {"user": p.name, "password": p.password}, "observation": "ok"},
            {"action": "reports.fetch", "args": {"month": MONTHS[i]}, "observation": f"report-{i}.pdf"},
            {
                "action": "mail.send",
                "args": {"to": p.email, "attachment": f"report-{i}.pdf", "headers": auth},
                "observation": f"sent to {p.email}" if ok else None,
                "error": None if ok else f"401 for {p.email}: Authorization: Bearer {p.token} expired",
            },
        ]
    elif family == 1:
        task = f"Charge the card {p.grouped_card} of {p.name} for order {100 + i}"
        steps = [
            {
                "action": "crm.find_customer",
                "args": {"name": p.name},
                "observation": json.dumps({"email": p.email, "phone": p.phone, "api_key": p.sk}),
            },
            {
                "action": "billing.charge",
                "args": {"card_number": int(p.card) if i % 2 else p.card, "amount": 25, "headers": auth},
                "observation": "charged" if ok else None,
                "error": None if ok else f"card {p.grouped_card} declined for {p.email} ({p.phone})",
            },
        ]
    else:
        task = f"Call {p.name} at {p.phone} about ticket {200 + i}"
        steps = [
            {"action": "tickets.get", "args": {"id": f"T-{200 + i}"}, "observation": f"opened by {p.email}"},
            {
                "action": "status.check",
                "args": {"url": f"https://admin:{p.password}@status.example.com/api", "key": p.sk},
                "observation": "all green",
            },
            {
                "action": "phone.call",
                "args": {"number": p.phone},
                "observation": f"called {p.phone}" if ok else None,
                "error": None if ok else f"{p.phone} unreachable; key {p.sk} rate-limited",
            },
        ]
    return {
        "id": f"f{family}-{i}",
        "task": task,
        "steps": steps,
        "success": ok,
        "final_answer": f"done for {p.email}",
        "meta": {"customer_phone": p.phone, "api_token": p.token},
    }


def store_through_every_path(settings: Settings, tmp_path: Path) -> list[str]:
    """Store 3 families × 6 runs: a third through the hooks (half of them by way of the spool),
    a third from a JSONL file, a third through the service (the API); returns the family tasks."""
    records = [record(f, i) for f in range(3) for i in range(6)]
    hooked = records[0::3]
    for part, to in ((hooked[:3], "store"), (hooked[3:], "spool")):
        with WorkflowMemory(settings.model_copy(update={"record_to": to})) as memory:
            for r in part:
                with memory.record(r["task"], id=r["id"], meta=r["meta"]) as hook:
                    for s in r["steps"]:
                        hook.step(
                            s["action"], s["args"], observation=s.get("observation"), error=s.get("error")
                        )
                    hook.finish(success=r["success"], final_answer=r["final_answer"])
            assert memory.flush(timeout=READY_LIMIT)
    assert collect(store_from(settings), settings).stored == 3
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records[1::3]), encoding="utf-8")
    report = ingest_files([path], store_from(settings), settings)
    assert report.stored == 6 and not report.rejected
    assert Service(settings).record(records[2::3]).stored == 6
    return [records[f * 6]["task"] for f in range(3)]


def served(settings: Settings, tasks: list[str]) -> Iterator[tuple[str, str]]:
    """(where, text) for everything induction and serving produce."""
    store, service = store_from(settings), Service(settings)
    workflows = store.list_workflows()
    assert len(workflows) >= 3
    for w in workflows:
        for version in store.history(w.id):
            yield f"workflow {w.id} v{version.version}", version.model_dump_json()
        yield f"GET /workflows/{w.id}", json.dumps(service.get_workflow(w.id).model_dump(mode="json"))
    with WorkflowMemory(settings) as memory:
        for task in tasks:
            context = memory.context(task)
            assert context, task
            yield f"context of {task!r}", context
            hits = service.search(task)
            assert hits
            yield f"search {task!r}", json.dumps([h.model_dump(mode="json") for h in hits])


def stored(settings: Settings) -> list[str]:
    runs = store_from(settings).list_trajectories(limit=None)
    assert len(runs) == 18
    return [t.model_dump_json() for t in runs]


def planted() -> list[str]:
    return [v for f in range(3) for i in range(6) for v in Planted(f, i).values]


def test_planted_secrets_and_personal_data_reach_no_store_workflow_context_or_api(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "db"), flush_interval=0.05, scrub=ALL)
    tasks = store_through_every_path(settings, tmp_path)
    texts = stored(settings)
    assert all("[SECRET]" in t and "[EMAIL]" in t and "[PHONE]" in t for t in texts)
    assert sum("[CARD]" in t for t in texts) == 6
    report = run_induction(store_from(settings), settings, RuleInducer(), namespace=settings.namespace)
    assert report.summary().versions_created >= 3
    places = [("stored trajectory", t) for t in texts] + list(served(settings, tasks))
    leaks = [(where, value) for where, text in places for value in planted() if value in text]
    assert leaks == []


def test_default_scrub_masks_secrets_and_cards_and_despecification_keeps_emails_out(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "db"), flush_interval=0.05)
    assert settings.scrub == ["secrets", "cards"]
    tasks = store_through_every_path(settings, tmp_path)
    texts = stored(settings)
    people = {v for f in range(3) for i in range(6) for v in (Planted(f, i).email, Planted(f, i).phone)}
    secret = set(planted()) - people
    assert [v for t in texts for v in secret if v in t] == []
    assert {v for t in texts for v in people if v in t} == people  # kept in storage, as configured
    run_induction(store_from(settings), settings, RuleInducer(), namespace=settings.namespace)
    leaks = [(where, v) for where, text in served(settings, tasks) for v in planted() if v in text]
    assert leaks == []


# -- nothing unscrubbed touches the disk, and a mask is never a workflow constant ---------------


def test_spool_files_and_the_quarantine_hold_no_secret(tmp_path: Path) -> None:
    key = "sk-proj-" + hexof("spool", 40)
    settings = Settings(db=str(tmp_path / "db"), flush_interval=0.05, record_to="spool")
    with WorkflowMemory(settings) as memory:
        with memory.record(f"call the API with {key}") as run:
            run.step("http.get", {"api_key": key, "url": "https://x.example"}, observation=f"ok {key}")
            run.finish(success=True)
    spooled = "".join(p.read_text() for p in settings.spool_path.rglob("*.jsonl*"))
    assert spooled and key not in spooled and "[SECRET]" in spooled

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"task": 5, "steps": [], "note": f"Bearer {key}"}) + "\n{broken " + key + "\n")
    report = ingest_files([bad], store_from(settings), settings)
    assert len(report.rejected) == 2
    text = settings.quarantine_path.read_text()
    assert key not in text and text.count("[SECRET]") == 2
    Service(settings).record([{"task": 7, "password": key}])
    assert key not in settings.quarantine_path.read_text()


def test_a_masked_value_becomes_a_placeholder_not_a_constant(settings: Settings, store: Store) -> None:
    runs = [
        Trajectory.model_validate(
            {
                "id": f"s{i}",
                "task": f"Check the status page of service {i}",
                "success": True,
                "steps": [
                    {"action": "status.check", "args": {"key": "sk-" + hexof(f"k{i}", 30), "verbose": True}},
                    {"action": "status.report", "args": {"channel": "ops"}},
                ],
            }
        )
        for i in range(5)
    ]
    store_trajectories(store, runs, settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    [w] = store.list_workflows()
    assert w.steps[0].args["key"].startswith("{") and w.steps[0].args["verbose"] is True
    assert "[SECRET]" not in w.model_dump_json()
