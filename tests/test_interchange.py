from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from flowmem.interchange import RecordError, Rejection, parse_line, read_trajectories, write_jsonl
from flowmem.models import Trajectory
from flowmem.settings import Settings

GOOD = {
    "task": "Forward the latest email about 'Q3 budget' to olga",
    "steps": [
        {"thought": "find it", "action": "mail.search", "args": {"query": "Q3 budget"}, "observation": "[1]"},
        {
            "thought": None,
            "action": "mail.forward",
            "args": {"email_id": "1", "to": "o@x.test"},
            "observation": "ok",
        },
    ],
    "success": True,
}


def line(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_valid_record_parses_and_unknown_keys_are_kept_in_meta(settings: Settings) -> None:
    rec = {**GOOD, "id": "t1", "group": "email/fwd", "meta": {"k": 1}, "model": "gpt-x", "k": 2}
    rec["steps"] = [{**GOOD["steps"][0], "latency": 3}]  # type: ignore[index]
    t = parse_line(line(rec), settings)
    assert t.id == "t1" and t.group == "email/fwd" and t.success is True
    assert t.meta == {"k": 1, "model": "gpt-x", "_extra": {"k": 2}}
    assert t.steps[0].meta == {"latency": 3} and t.steps[0].args == {"query": "Q3 budget"}
    assert t.namespace == "default"


def test_a_step_flagged_as_an_error_keeps_its_message_from_the_observation(settings: Settings) -> None:
    flagged = {
        "action": "orders.get",
        "args": {"id": "#95"},
        "observation": "Error: Order not found\nat x",
        "error": True,
    }
    bare = {"action": "orders.get", "args": {"id": "#96"}, "error": True}
    fine = {"action": "orders.get", "args": {"id": "#W1"}, "observation": "{}", "error": False}
    t = parse_line(line({**GOOD, "steps": [flagged, bare, fine, {**flagged, "error": "timeout"}]}), settings)
    assert [s.error for s in t.steps] == ["Error: Order not found", "failed", None, "timeout"]


def test_missing_id_gets_a_stable_content_id(settings: Settings) -> None:
    a, b = parse_line(line(GOOD), settings), parse_line(line(GOOD), settings)
    other = parse_line(line({**GOOD, "task": "something else"}), settings)
    assert a.id == b.id != other.id


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "malformed JSON"),
        (line([1, 2]), "expected a JSON object"),
        (line({"steps": []}), "task"),
        (line({**GOOD, "steps": [{"args": {}}]}), "steps.0.action: missing"),
        (line({**GOOD, "steps": "nope"}), "steps: expected a list"),
        (line({**GOOD, "success": "maybe"}), "success"),
        (line({**GOOD, "steps": [{"action": 3}]}), "steps.0.action"),
        (b'{"task": "t", "score": NaN}', "invalid JSON number NaN"),
        (b'{"task": "\xff\xfe"}', "invalid UTF-8"),
        (b'{"task": "t", "meta": {"a": ' + b"[" * 40 + b"1" + b"]" * 40 + b"}}", "nested deeper"),
        (line({"task": "x" * 300_000}), "exceeds"),
        (line({**GOOD, "meta": "flat"}), "meta: expected an object"),
        (b"[" * 100_000, "malformed JSON"),
    ],
)
def test_bad_lines_are_rejected_with_a_reason(settings: Settings, raw: bytes, reason: str) -> None:
    with pytest.raises(RecordError, match=reason.replace("(", r"\(")):
        parse_line(raw, settings)


def test_step_limit_is_a_setting(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "db"), max_steps=2)
    rec = {**GOOD, "steps": GOOD["steps"] * 2}  # type: ignore[operator]
    with pytest.raises(RecordError, match="4 steps exceed the limit of 2"):
        parse_line(line(rec), settings)


def test_round_trip_gzip_and_plain(settings: Settings, tmp_path: Path) -> None:
    t = parse_line(
        line({**GOOD, "id": "t1", "agent": "email_agent", "parent_id": "p", "feedback": "fine"}), settings
    )
    for name in ("out.jsonl", "out.jsonl.gz"):
        path = tmp_path / name
        assert write_jsonl(path, [t, t]) == 2
        items = list(read_trajectories(path, settings))
        assert items == [t.model_copy(update={"created_at": i.created_at}) for i in items]  # type: ignore[union-attr]
        assert all(isinstance(i, Trajectory) for i in items)


def test_truncated_gzip_keeps_the_complete_lines_and_reports_the_rest(
    settings: Settings, tmp_path: Path
) -> None:
    body = b"".join(
        line({**GOOD, "id": f"t{i}", "meta": {"pad": "z" * 200 + str(i)}}) + b"\n" for i in range(400)
    )
    blob = gzip.compress(body)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(blob[: len(blob) * 2 // 3])
    items = list(read_trajectories(path, settings))
    good = [i for i in items if isinstance(i, Trajectory)]
    bad = [i for i in items if isinstance(i, Rejection)]
    assert 0 < len(good) < 400 and [t.id for t in good] == [f"t{i}" for i in range(len(good))]
    assert len(bad) == 1 and "file unreadable" in bad[0].reason


def test_missing_file_is_one_rejection(settings: Settings, tmp_path: Path) -> None:
    items = list(read_trajectories(tmp_path / "nope.jsonl", settings))
    assert len(items) == 1 and isinstance(items[0], Rejection) and "No such file" in items[0].reason


def test_deep_nesting_gets_one_reason_whatever_the_thread() -> None:
    import threading

    from flowmem.interchange import RecordError, loads

    def reason(raw: bytes) -> str:
        try:
            loads(raw)
        except RecordError as err:
            return str(err)
        return "ok"

    deep, shallow = b"[" * 201 + b"]" * 201, b"[" * 150 + b"]" * 150
    found: list[str] = []
    worker = threading.Thread(target=lambda: found.extend([reason(deep), reason(shallow)]))
    worker.start()
    worker.join()
    assert found == [reason(deep), reason(shallow)] == ["malformed JSON: nested too deeply", "ok"]
    assert reason(b'{"a": "' + b"[" * 500 + b'"}') == "ok"  # brackets inside a string do not nest
