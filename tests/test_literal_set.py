"""`LiteralSet`: finding literals through its index gives what the plain scan gives."""

from __future__ import annotations

import random

from flowmem.induction.literals import LiteralIndex, LiteralSet, find_literals, mask
from flowmem.models import Trajectory

PIECES = [
    "olga",
    "Olga's",
    "W1000",
    "#W1000",
    "users_count",
    "analytics.users_count",
    "x-y-z",
    "...",
    "line",
    "online",
]
PIECES += [
    "2024-05-01",
    "olga@x.com",
    "São Paulo",
    "STRASSE",
    "straße",
    "a.b",
    "-5",
    "5",
    "İstanbul",
    "n/a",
    "  ",
    # Several words, sharing all but one with each other, some starting with no word.
    "Book the offsite venue",
    "'Book the offsite venue'",
    "on 2026-03-04 at 09:00",
    "on 2026-03-05 at 09:00",
    "the offsite",
    "offsite venue",
    "Olga Petrova",
    "olga petrova's",
    "(São Paulo)",
]


def test_the_index_finds_exactly_what_the_scan_finds() -> None:
    rng = random.Random(7)
    for _ in range(400):
        literals = {rng.choice(PIECES) for _ in range(rng.randint(0, 8))} | {""}
        base = LiteralSet({lit for lit in literals if rng.random() < 0.5})
        indexed = LiteralSet(literals | set(base), base=base)
        text = " ".join(
            rng.choice([*PIECES, "and", ",", "(", ")", "said:"]) for _ in range(rng.randint(0, 12))
        )
        for joined in (text, text.replace(" ", ""), text.upper()):
            assert find_literals(joined, indexed) == find_literals(joined, set(indexed))
            assert mask(joined, indexed) == mask(joined, set(indexed))


def test_example_literals_share_the_rare_values_index() -> None:
    runs = [
        Trajectory.model_validate(
            {
                "id": f"r{i}",
                "task": f"email {name} about it",
                "steps": [{"action": "send", "args": {"to": name}}],
            }
        )
        for i, name in enumerate(["olga", "bo", "cyrus", "dana"] * 3)
    ]
    index = LiteralIndex.build(runs, max_share=0.5)
    one, two = index.example_literals(runs[:1]), index.example_literals(runs[1:2])
    assert isinstance(one, LiteralSet) and one._base is two._base is not None
    assert find_literals("Write to Olga", one) == ["olga"]
    assert set(one) >= set(index.rare_values())


def test_a_word_the_tasks_are_worded_with_is_no_example_value() -> None:
    """A run that passed a common task word as an argument (a search for "meeting") does not
    make the word an example's value; a name that few tasks hold stays one."""
    names = ["olga", "bo", "cyrus", "dana", "ema", "farid", "gil", "hana", "ines", "jon", "kai", "lev"]
    runs = [
        Trajectory.model_validate(
            {
                "id": f"r{i}",
                "task": f"Schedule a meeting with {name} on day {i}",
                "steps": [
                    {"action": "search_events", "args": {"query": "meeting" if i == 0 else name}},
                    {"action": "create_event", "args": {"participant": name, "day": f"day {i}"}},
                ],
            }
        )
        for i, name in enumerate(names * 2)
    ]
    index = LiteralIndex.build(runs, max_share=0.1)
    assert index.task_word("meeting") and not index.is_rare("meeting")
    assert "meeting" not in index.rare_values()
    assert not index.task_word("olga") and index.is_rare("olga")
    own = index.example_literals(runs[:1])
    assert find_literals("schedule meeting", own) == []
    assert find_literals("meet olga", own) == ["olga"]
