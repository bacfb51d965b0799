"""Bad input never crashes ingestion and never costs a valid record (property-based, deterministic)."""

from __future__ import annotations

import functools
import gzip
import json
import random
import zlib
from pathlib import Path
from typing import Any

from hypothesis import Phase, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from flowmem.interchange import RecordError, Rejection, dump_record, parse_line, read_trajectories
from flowmem.jobs.collect import collect
from flowmem.jobs.ingest import ingest_files
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.malformed import (
    BAD_TEMPLATES,
    LIMITS,
    MALFORMED,
    MALFORMED_TOTAL,
    PARSE,
    RECORD_IDS,
    SMALL,
    encode,
    generated_malformed,
    mutated,
    rejection_reason,
    run_examples,
    valid_records,
)


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

    assert run_examples(mutated(), 200, check) == 200
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
        encode({**rec, "id": f"v{next(RECORD_IDS)}"})
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
