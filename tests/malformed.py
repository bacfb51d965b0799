"""Malformed input: hypothesis generators of bad interchange lines and records, and templates of
bad lines, for the ingestion tests and the API's (tests/test_bad_input.py, tests/test_api.py)."""

from __future__ import annotations

import functools
import itertools
import json
import random
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from flowmem.interchange import RecordError, parse_line
from flowmem.settings import Settings

LIMITS: dict[str, Any] = {
    "max_record_bytes": 20_000,
    "max_string_chars": 200,
    "max_depth": 6,
    "max_steps": 20,
}
SMALL = Settings(db="unused-db", **LIMITS)
PARSE = hsettings(
    max_examples=100, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
RECORD_IDS = itertools.count()

# -- generators ----------------------------------------------------------------------------------

KEYS = st.text(min_size=1, max_size=8)
LEAF = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)


@functools.cache
def json_values(depth: int) -> st.SearchStrategy[Any]:
    """JSON values nested at most `depth` levels (records stay within SMALL.max_depth)."""
    if depth == 0:
        return LEAF
    inner = json_values(depth - 1)
    return LEAF | st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3)


# The strategies the composites below draw from, built once: hypothesis validates and caches
# every strategy object it is given, and building these afresh in each draw cost about half of
# the generation time of every test here.
ACTION = st.text(min_size=1, max_size=30)
ARGS = st.dictionaries(KEYS, json_values(2), max_size=3)
NOTE = st.none() | st.text(max_size=40)
STEP_EXTRAS = st.dictionaries(KEYS.map(lambda k: "s_" + k), json_values(1), max_size=2)
TASK = st.text(min_size=1, max_size=60)
RECORD_ID = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=20)
OPTIONAL_FIELDS = (
    ("success", st.none() | st.booleans()),
    ("agent", st.text(max_size=15)),
    ("group", st.text(max_size=15)),
    ("score", st.floats(-1e6, 1e6)),
    ("meta", st.dictionaries(KEYS.map(lambda k: "m_" + k), json_values(2), max_size=3)),
)
RECORD_EXTRAS = st.dictionaries(KEYS.map(lambda k: "x_" + k), json_values(2), max_size=3)


@st.composite
def steps(draw: st.DrawFn) -> dict[str, Any]:
    step: dict[str, Any] = {"action": draw(ACTION), "args": draw(ARGS)}
    for key in ("thought", "observation"):
        step[key] = draw(NOTE)
    extras = draw(STEP_EXTRAS)
    return {**step, **extras}


STEPS = st.lists(steps(), max_size=5)


@st.composite
def valid_records(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A valid record, and the unknown top-level keys it carries."""
    rec: dict[str, Any] = {"task": draw(TASK)}
    rec["steps"] = draw(STEPS)
    if draw(st.booleans()):
        rec["id"] = draw(RECORD_ID)
    for key, strategy in OPTIONAL_FIELDS:
        if draw(st.booleans()):
            rec[key] = draw(strategy)
    extras = draw(RECORD_EXTRAS)
    return {**rec, **extras}, extras


def encode(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode()


BASE = {
    "id": "base",
    "task": "Forward the latest email",
    "steps": [{"action": "mail.search", "args": {"q": "budget"}, "thought": "t", "observation": "o"}],
    "success": True,
    "meta": {"k": 1},
}
NOT_NUMBER = st.text(st.characters(categories=["Lu", "Ll"]), min_size=1, max_size=8).filter(
    lambda s: s.lower() not in {"nan", "inf", "infinity"}
)
# (field path, bad value): wrong types for every field the format defines
WRONG = st.one_of(
    st.tuples(
        st.just(("task",)), st.integers() | st.lists(st.integers(), max_size=2) | st.none() | st.just("")
    ),
    st.tuples(st.just(("steps",)), st.text(max_size=5) | st.dictionaries(KEYS, st.integers(), max_size=2)),
    st.tuples(
        st.just(("steps", 0)), st.integers() | st.text(max_size=5) | st.lists(st.integers(), max_size=2)
    ),
    st.tuples(st.just(("steps", 0, "action")), st.integers() | st.just("") | st.none() | st.just(["a"])),
    st.tuples(st.just(("steps", 0, "args")), st.lists(st.integers(), max_size=2) | st.text(max_size=5)),
    st.tuples(st.just(("success",)), st.text(max_size=5) | st.integers() | st.floats(allow_nan=False)),
    st.tuples(st.just(("score",)), NOT_NUMBER | st.just("NaN") | st.just("-inf")),
    st.tuples(st.just(("meta",)), st.lists(st.integers(), max_size=2) | st.text(max_size=5) | st.integers()),
    st.tuples(st.just(("id",)), st.integers() | st.lists(st.integers(), max_size=2) | st.booleans()),
    st.tuples(st.just(("namespace",)), st.just("bad ns!") | st.integers()),
    st.tuples(st.just(("created_at",)), NOT_NUMBER | st.just("9999-12-31T23:59:59-23:59")),
    st.tuples(st.just(("steps",)), st.lists(st.just({"action": "a"}), min_size=21, max_size=30)),
)
MISSING_ACTION = st.just(("steps", 0, "action", None))


@st.composite
def wrong_types(draw: st.DrawFn) -> bytes:
    rec = json.loads(json.dumps(BASE))
    path, value = draw(WRONG | MISSING_ACTION.map(lambda p: (p[:3], p)))
    target = rec
    for part in path[:-1]:
        target = target[part]
    if value == ("steps", 0, "action", None):
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return encode(rec)


@st.composite
def truncated(draw: st.DrawFn) -> bytes:
    raw = encode(draw(valid_records())[0])
    return raw[: draw(st.integers(0, len(raw) - 1))]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    raw = bytearray(encode(draw(valid_records())[0]))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(raw) - 1))
        op = draw(st.sampled_from(["replace", "insert", "delete"]))
        byte = draw(st.integers(0, 255))
        if op == "replace":
            raw[at] = byte
        elif op == "insert":
            raw.insert(at, byte)
        elif len(raw) > 1:
            del raw[at]
    return bytes(raw)


def _place(draw: st.DrawFn, value: Any) -> dict[str, Any]:
    """BASE with `value` put at one of several places."""
    rec = json.loads(json.dumps(BASE))
    where = draw(
        st.sampled_from(["task", "thought", "arg", "arg_key", "meta", "meta_key", "nested", "extra"])
    )
    if where == "task":
        rec["task"] = value
    elif where == "thought":
        rec["steps"][0]["thought"] = value
    elif where == "arg":
        rec["steps"][0]["args"]["q"] = value
    elif where == "arg_key":
        rec["steps"][0]["args"][value if isinstance(value, str) else "k"] = value
    elif where == "meta":
        rec["meta"]["v"] = value
    elif where == "meta_key":
        rec["meta"][value if isinstance(value, str) else "k"] = 1 if isinstance(value, str) else value
    elif where == "nested":
        rec["meta"]["v"] = [{"w": value}]
    else:
        rec["unknown"] = value
    return rec


@st.composite
def huge_strings(draw: st.DrawFn) -> bytes:
    return encode(_place(draw, draw(st.text(min_size=201, max_size=400))))


@st.composite
def deep_nesting(draw: st.DrawFn) -> bytes:
    depth = draw(st.integers(7, 5_000))
    # one seeded draw for the brackets: a list of up to 5,000 drawn elements cost hypothesis
    # ~25 ms an example, two thirds of the generation time of all the malformed lines
    rnd = draw(st.randoms(use_true_random=True))
    # objects ('{"a":' and "}", 6 bytes) only while the line stays within max_record_bytes
    # with "[" and "]" for every level left: nesting is the only fault
    budget, tokens = SMALL.max_record_bytes - 200, []
    for level in range(depth):
        token = rnd.choice(["[", '{"a":'])
        if budget - 6 < 2 * (depth - level - 1):
            token = "["
        budget -= 2 if token == "[" else 6
        tokens.append(token)
    opens = "".join(tokens)
    closes = "".join("]" if c == "[" else "}" for c in reversed(opens.replace('{"a":', "{")))
    where = draw(
        st.sampled_from(['{"task":"t","meta":{"m":%s}}', '{"task":"t","steps":[{"action":"a","args":%s}]}'])
    )
    return (where % (opens + "1" + closes)).encode()


@st.composite
def non_finite(draw: st.DrawFn) -> bytes:
    literal = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"]))
    template = draw(
        st.sampled_from(
            [
                '{"task":"t","score":%s}',
                '{"task":"t","meta":{"x":[1,%s]}}',
                '{"task":"t","steps":[{"action":"a","duration_ms":%s}]}',
                '{"task":"t","steps":[{"action":"a","args":{"v":%s}}]}',
                '{"task":"t","extra":%s}',
            ]
        )
    )
    number = draw(st.integers(0, 10**6))
    return ('{"n":' + str(number) + "," + (template % literal)[1:]).encode()


@st.composite
def control_chars(draw: st.DrawFn) -> bytes:
    char = chr(draw(st.integers(0, 31)))
    rec = _place(draw, "a" + char + draw(st.text(max_size=10)))
    # json.dumps escapes control characters; undo the escape so the raw character is in the line
    escaped = json.dumps(char)[1:-1]
    return encode(rec).replace(escaped.encode(), char.encode(), 1)


INVALID_UTF8 = [
    b"\xff",
    b"\xfe",
    b"\x80",
    b"\xc0\x80",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xc3",
]


@st.composite
def bad_utf8(draw: st.DrawFn) -> bytes:
    marker = "\u2603MARK"
    raw = encode(_place(draw, draw(st.text(max_size=10)) + marker))
    return raw.replace(marker.encode(), draw(st.sampled_from(INVALID_UTF8)) + b"x", 1)


@st.composite
def oversized(draw: st.DrawFn) -> bytes:
    size = draw(st.integers(SMALL.max_record_bytes + 1, 3 * SMALL.max_record_bytes))
    head = b'{"task":"t","meta":{"pad":"'
    return head + b"p" * (size - len(head) - 3) + b'"}}'


@st.composite
def regressions(draw: st.DrawFn) -> bytes:
    """Shapes that once crashed parse_line with something other than RecordError."""
    digits = draw(st.integers(4_301, 6_000))
    return draw(
        st.sampled_from(
            [
                b'{"task":"t","n":' + b"7" * digits + b"}",
                b'{"task":"\\ud800"}',
                b'{"id":"x","task":"t","meta":{"\\udc00":1}}',
                b'{"task":"t","meta":{"_extra":1,"k":1},"k":2}',
                b'{"task":"t","meta":{"k":1},"_extra":5,"k":2}',
                b'{"task":"t","steps":[{"action":"a","meta":{"_extra":[],"x":1},"x":2}]}',
                b'{"id":"c","task":"t","created_at":"0001-01-01T00:00:00+23:00"}',
                b'{"task":"t","steps":[{"action":"a","duration_ms":"inf"}]}',
            ]
        )
    )


NOT_OBJECT = st.one_of(
    st.lists(st.integers(), max_size=3), st.integers(), st.text(max_size=10), st.none(), st.booleans()
).map(lambda v: json.dumps(v).encode())

# (name, strategy, examples, phrases one of which every reason must hold; () for any reason)
MALFORMED: list[tuple[str, st.SearchStrategy[bytes], int, tuple[str, ...]]] = [
    ("truncated", truncated(), 150, ()),
    ("wrong_types", wrong_types(), 200, ()),
    ("huge_strings", huge_strings(), 100, ("exceeds 200",)),
    ("deep_nesting", deep_nesting(), 100, ("nested",)),
    ("non_finite", non_finite(), 100, ("non-finite number", "invalid JSON number")),
    ("control_chars", control_chars(), 100, ("Invalid control character",)),
    ("bad_utf8", bad_utf8(), 100, ("invalid UTF-8",)),
    ("oversized", oversized(), 60, ("bytes exceeds 20000",)),
    ("regressions", regressions(), 80, ()),
    ("not_object", NOT_OBJECT, 60, ("expected a JSON object",)),
]
MALFORMED_TOTAL = sum(n for _, _, n, _ in MALFORMED)  # 1,050 examples, each a RecordError


def rejection_reason(line: bytes) -> str:
    """The RecordError reason for a line; fails the test if the line parses or raises anything else."""
    try:
        parse_line(line, SMALL)
    except RecordError as err:
        assert str(err).strip(), f"empty reason for {line[:80]!r}"
        return str(err)
    raise AssertionError(f"accepted a malformed line: {line[:200]!r}")


def run_examples(strategy: st.SearchStrategy[bytes], examples: int, check: Callable[[bytes], None]) -> int:
    seen: list[int] = []

    @hsettings(PARSE, max_examples=examples)
    @given(strategy)
    def run(line: bytes) -> None:
        seen.append(1)
        check(line)

    run()
    return len(seen)


# -- 1. parse_line on malformed input ------------------------------------------------------------


@functools.cache
def generated_malformed() -> dict[str, list[bytes]]:
    """The malformed lines each generator makes (generated once per session: the API tests
    send the same lines through HTTP)."""
    made: dict[str, list[bytes]] = {}
    for name, strategy, examples, _ in MALFORMED:
        lines: list[bytes] = []
        made[name] = lines
        run_examples(strategy, examples, lines.append)
    return made


BAD_TEMPLATES: list[Callable[[random.Random], bytes]] = [
    lambda r: b'{"task": "t", "steps": [' * r.randint(1, 3),
    lambda r: json.dumps({"task": r.randint(0, 9)}).encode(),
    lambda r: json.dumps({"task": "t", "steps": "x" * r.randint(1, 9)}).encode(),
    lambda r: json.dumps({"task": "t", "steps": [{"args": {}}]}).encode(),
    lambda r: json.dumps({"task": "t", "steps": [{"action": "a", "args": [1]}]}).encode(),
    lambda r: json.dumps({"task": "t", "success": r.choice(["yes", 1, 0, "true"])}).encode(),
    lambda r: json.dumps({"task": "t", "score": "high"}).encode(),
    lambda r: json.dumps({"task": "t", "meta": [1, 2]}).encode(),
    lambda r: json.dumps({"task": "x" * r.randint(201, 300)}).encode(),
    lambda r: b'{"task":"t","meta":' + b"[" * r.randint(7, 50) + b"}",
    lambda r: b'{"task":"t","meta":{"m":' + b"[" * 10 + b"1" + b"]" * 10 + b"}}",
    lambda r: b'{"task":"t","score":' + r.choice([b"NaN", b"Infinity", b"-Infinity"]) + b"}",
    lambda r: b'{"task":"a\x01b"}',
    lambda r: b'{"task":"' + r.choice(INVALID_UTF8) + b'"}',
    lambda r: b'{"task":"t","meta":{"p":"' + b"p" * 20_001 + b'"}}',
    lambda r: b"[1, 2, 3]",
    lambda r: b'{"task":"\\ud800"}',
]
