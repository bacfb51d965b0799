"""Bad input never crashes ingestion and never costs a valid record (property-based, deterministic)."""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import random
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from flowmem.interchange import RecordError, Rejection, dump_record, parse_line, read_trajectories
from flowmem.jobs.collect import collect
from flowmem.jobs.ingest import ingest_files
from flowmem.settings import Settings
from flowmem.storage import Store

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
_ids = itertools.count()

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


def _run(strategy: st.SearchStrategy[bytes], examples: int, check: Callable[[bytes], None]) -> int:
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
        made[name] = lines = []
        _run(strategy, examples, lines.append)
    return made


def test_malformed_lines_raise_only_record_error_with_a_reason() -> None:
    made = generated_malformed()
    for name, _, examples, phrase in MALFORMED:
        assert len(made[name]) == examples, name
        for line in made[name]:
            reason = rejection_reason(line)
            assert not phrase or any(p in reason for p in phrase), (name, reason, line[:120])
    assert sum(len(lines) for lines in made.values()) == MALFORMED_TOTAL == 1_050


def test_random_mutations_parse_or_raise_record_error() -> None:
    outcomes = {"accepted": 0, "rejected": 0}

    def check(line: bytes) -> None:
        try:
            parse_line(line, SMALL)
        except RecordError as err:
            assert str(err).strip()
            outcomes["rejected"] += 1
        else:
            outcomes["accepted"] += 1

    assert _run(mutated(), 200, check) == 200
    assert sum(outcomes.values()) == 200 and outcomes["rejected"] > 100


# -- 2. valid records ----------------------------------------------------------------------------


@hsettings(PARSE, max_examples=300)
@given(valid_records())
def test_valid_records_parse_and_round_trip(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    rec, extras = case
    t = parse_line(encode(rec), SMALL)
    assert t.task == rec["task"] and len(t.steps) == len(rec["steps"])
    assert t.meta == {**rec.get("meta", {}), **extras}  # unknown keys land in meta
    for step, raw in zip(t.steps, rec["steps"], strict=True):
        assert step.action == raw["action"] and step.args == raw["args"]
        assert step.meta == {k: v for k, v in raw.items() if k.startswith("s_")}
    back = parse_line(json.dumps(dump_record(t)).encode(), SMALL)
    assert back == t
    assert parse_line(json.dumps(dump_record(t), ensure_ascii=False).encode(), SMALL) == t


# -- 3. mixed files through ingest_files ---------------------------------------------------------


def _limited(settings: Settings) -> Settings:
    return settings.model_copy(update=LIMITS)


def _quarantined(settings: Settings) -> list[dict[str, Any]]:
    path = settings.quarantine_path
    return [json.loads(x) for x in path.read_text("utf-8").split("\n") if x] if path.exists() else []


def _ingestable(line: bytes) -> bool:
    """A malformed line that stays one non-blank line in a file."""
    return b"\n" not in line and bool(line.strip()) and line == line.rstrip(b"\r\n")


@functools.cache
def _ingestable_malformed() -> list[bytes]:
    """The generated malformed lines that stay one line in a file (~1,000 of 1,050).

    Drawn from these rather than generated afresh: generating 20-45 fresh ones per example,
    lines of up to 60 KB included, cost hypothesis ~40 attempts and 10+ s for 15 examples."""
    return [line for made in generated_malformed().values() for line in made if _ingestable(line)]


@st.composite
def mixed_files(draw: st.DrawFn) -> tuple[list[bytes], set[int]]:
    """Lines in random order, and the 1-based numbers of the malformed ones."""
    good = [
        encode({**rec, "id": f"v{next(_ids)}"})
        for rec, _ in draw(st.lists(valid_records(), min_size=1, max_size=15))
    ]
    bad = draw(st.lists(st.sampled_from(_ingestable_malformed()), min_size=20, max_size=45))
    lines = [(line, False) for line in good] + [(line, True) for line in bad]
    order = draw(st.permutations(lines))
    return [line for line, _ in order], {i for i, (_, is_bad) in enumerate(order, start=1) if is_bad}


def test_mixed_files_store_every_valid_line_and_reject_every_bad_one(
    tmp_path: Path, settings: Settings, store: Store
) -> None:
    limited = _limited(settings)
    totals = {"examples": 0, "valid": 0, "malformed": 0}

    @hsettings(PARSE, max_examples=15, phases=[Phase.explicit, Phase.generate])
    @given(mixed_files())
    def run(case: tuple[list[bytes], set[int]]) -> None:
        lines, bad = case
        path = tmp_path / f"mixed-{totals['examples']}.jsonl"
        path.write_bytes(b"\n".join(lines) + b"\n")
        before, quarantined = store.count_trajectories(), len(_quarantined(limited))
        n_valid, n_bad = len(lines) - len(bad), len(bad)

        report = ingest_files([path], store, limited)

        assert report.stored == report.valid == n_valid
        assert len(report.rejected) == n_bad
        assert {r.line for r in report.rejected} == bad
        assert all(r.source == str(path) and r.line > 0 and r.reason.strip() for r in report.rejected)
        assert len(_quarantined(limited)) == quarantined + n_bad
        assert store.count_trajectories() == before + n_valid
        totals["examples"] += 1
        totals["valid"] += n_valid
        totals["malformed"] += n_bad

    run()
    assert totals["examples"] == 15
    assert totals["malformed"] >= 300  # exact per example above; large in total
    assert store.count_trajectories() == totals["valid"]


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


def test_a_thousand_bad_lines_among_two_hundred_good_ones(
    tmp_path: Path, settings: Settings, store: Store
) -> None:
    limited = _limited(settings)
    rng = random.Random(20240611)
    good = [encode({"id": f"good-{i}", "task": f"task {i} \u00e9\u4e2d", "steps": []}) for i in range(200)]
    bad = [BAD_TEMPLATES[i % len(BAD_TEMPLATES)](rng) for i in range(1_000)]
    lines = [(x, False) for x in good] + [(x, True) for x in bad]
    rng.shuffle(lines)
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"\n".join(x for x, _ in lines) + b"\n")
    bad_numbers = {i for i, (_, is_bad) in enumerate(lines, start=1) if is_bad}

    report = ingest_files([path], store, limited)
    assert report.stored == report.valid == 200
    assert len(report.rejected) == 1_000
    assert {r.line for r in report.rejected} == bad_numbers
    assert all(r.source == str(path) and r.reason.strip() for r in report.rejected)
    assert len(_quarantined(limited)) == 1_000
    assert store.count_trajectories() == 200

    again = ingest_files([path], store, limited)  # idempotent: nothing stored twice
    assert (again.stored, again.valid, len(again.rejected)) == (0, 200, 1_000)
    assert len(_quarantined(limited)) == 2_000
    assert store.count_trajectories() == 200


# -- 3b. damaged gzip files: one rejection that says so, never an exception ----------------------


def _gzipped_runs(n: int = 8) -> bytes:
    return gzip.compress(b"\n".join(_good("z", n)) + b"\n", mtime=0)


def _read(path: Path) -> tuple[list[Any], list[Any]]:
    items = list(read_trajectories(path, SMALL))
    return [t for t in items if not isinstance(t, Rejection)], [r for r in items if isinstance(r, Rejection)]


def test_a_file_named_gz_that_is_not_gzipped_is_one_rejection_saying_so(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl.gz"
    path.write_bytes(b"\n".join(_good("p", 3)) + b"\n")  # plain JSONL under a .gz name
    stored, rejected = _read(path)
    assert stored == [] and [(r.line, r.reason) for r in rejected] == [
        (
            1,
            "file unreadable: not a gzip file: the name ends in .gz, but it does not start with gzip's "
            "bytes 1f 8b; a file is JSONL, plain or gzipped",
        )
    ]
    empty = tmp_path / "empty.jsonl.gz"
    empty.write_bytes(b"")
    assert _read(empty) == ([], [])  # nothing in it, nothing wrong with it


def test_every_damaged_byte_of_a_gzip_file_is_read_or_rejected_never_raised(tmp_path: Path) -> None:
    """Flip each byte of a gzipped file in turn: the good lines before the damage may come
    through, and a damaged stream ends in one rejection naming gzip, never an exception (zlib's
    own error escaped before)."""
    blob = _gzipped_runs()
    path = tmp_path / "runs.jsonl.gz"
    gzip_reasons = 0
    for offset in range(len(blob)):
        damaged = bytearray(blob)
        damaged[offset] ^= 0x55
        path.write_bytes(bytes(damaged))
        _, rejected = _read(path)  # raises nothing
        unreadable = [r for r in rejected if r.reason.startswith("file unreadable")]
        assert len(unreadable) <= 1 and all(r is rejected[-1] for r in unreadable), offset
        if unreadable and "gzip" in unreadable[0].reason:
            gzip_reasons += 1
    assert gzip_reasons > len(blob) // 2  # most damage is told as a bad gzip file


# -- 4. the spool collector ----------------------------------------------------------------------


def _good(prefix: str, n: int) -> list[bytes]:
    return [encode({"id": f"{prefix}-{i}", "task": f"{prefix} task {i}", "steps": []}) for i in range(n)]


def test_collect_stores_good_lines_quarantines_bad_ones_and_moves_files(
    settings: Settings, store: Store
) -> None:
    spool = settings.spool_path
    spool.mkdir(parents=True)
    bad = [b"{not json", b'{"task": 5}', b'{"task":"t","score":NaN}']
    (spool / "a.jsonl").write_bytes(b"\n".join(_good("a", 5) + bad) + b"\n")
    (spool / "b.jsonl").write_bytes(b"\n".join([bad[0], *_good("b", 4), b"\xff\xfe"]) + b"\n")
    (spool / "c.jsonl.gz").write_bytes(gzip.compress(b"\n".join([*_good("c", 3), bad[1]]) + b"\n"))
    (spool / "d.jsonl.tmp").write_bytes(b"\n".join(_good("d", 4)) + b"\n")
    full = gzip.compress(b"\n".join(_good("e", 40)) + b"\n")
    truncated_gz = full[: len(full) // 2]
    (spool / "e.jsonl.gz").write_bytes(truncated_gz)
    # complete lines in what survives of the truncated stream (computed without flowmem)
    partial = zlib.decompressobj(wbits=31).decompress(truncated_gz)
    e_lines = partial.count(b"\n")
    assert 0 < e_lines < 40

    report = collect(store, settings)

    assert report.stored == 5 + 4 + 3 + e_lines
    assert report.duplicates == 0
    assert report.rejected == 3 + 2 + 1 + 1  # the truncated file adds one "file unreadable" rejection
    assert report.files == 3
    assert report.failed_files == ["e.jsonl.gz"]
    assert store.count_trajectories() == 12 + e_lines
    assert sorted(p.name for p in (spool / "done").iterdir()) == ["a.jsonl", "b.jsonl", "c.jsonl.gz"]
    assert [p.name for p in (spool / "failed").iterdir()] == ["e.jsonl.gz"]
    assert sorted(p.name for p in spool.iterdir() if p.is_file()) == ["d.jsonl.tmp"]
    quarantined = _quarantined(settings)
    assert len(quarantined) == 7
    unreadable = [q for q in quarantined if q["reason"].startswith("file unreadable")]
    assert len(unreadable) == 1 and unreadable[0]["line"] == e_lines + 1
    assert {(Path(q["source"]).name, q["line"]) for q in quarantined if q not in unreadable} == {
        ("a.jsonl", 6),
        ("a.jsonl", 7),
        ("a.jsonl", 8),
        ("b.jsonl", 1),
        ("b.jsonl", 6),
        ("c.jsonl.gz", 4),
    }

    second = collect(store, settings)
    assert (second.stored, second.files, second.rejected, second.failed_files) == (0, 0, 0, [])
    assert store.count_trajectories() == 12 + e_lines
    assert (spool / "d.jsonl.tmp").exists()

    (spool / "d.jsonl.tmp").rename(spool / "d.jsonl")  # the writer finishes: now it is collected
    third = collect(store, settings)
    assert (third.stored, third.files, third.rejected) == (4, 1, 0)
    assert store.count_trajectories() == 16 + e_lines


def test_the_generated_malformed_lines_through_the_spool_collector(settings: Settings, store: Store) -> None:
    """The generated malformed lines (and 200 templated ones) in spool files among valid
    ones: the collect flow's function stores every valid line, quarantines every malformed
    one with exactly the reason `parse_line` gives, at its file and line, and moves every file
    to done/."""
    limited = _limited(settings)
    rng = random.Random(5)
    generated = [x for made in generated_malformed().values() for x in made]
    generated += [BAD_TEMPLATES[i % len(BAD_TEMPLATES)](rng) for i in range(200)]
    lines = [x for x in generated if _ingestable(x) and b"\r" not in x]
    assert len(lines) >= 1_100
    good = _good("spool", 100)
    mixed = [(x, True) for x in lines] + [(x, False) for x in good]
    rng.shuffle(mixed)
    spool = limited.spool_path
    spool.mkdir(parents=True)
    expected: dict[tuple[str, int], str] = {}
    for k in range(5):
        chunk = mixed[k::5]
        name = f"part{k}.jsonl" + (".gz" if k % 2 else "")
        body = b"\n".join(x for x, _ in chunk) + b"\n"
        (spool / name).write_bytes(gzip.compress(body) if k % 2 else body)
        for n, (x, bad) in enumerate(chunk, start=1):
            if bad:
                expected[(name, n)] = rejection_reason(x)

    report = collect(store, limited)
    assert (report.stored, report.rejected, report.files, report.failed_files) == (100, len(lines), 5, [])
    got = {(Path(q["source"]).name, q["line"]): q["reason"] for q in _quarantined(limited)}
    assert got == expected
    assert store.count_trajectories() == 100
    assert sorted(p.name for p in (spool / "done").iterdir()) == sorted(
        f"part{k}.jsonl" + (".gz" if k % 2 else "") for k in range(5)
    )
