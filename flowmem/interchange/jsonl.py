"""The JSONL interchange format: one trajectory a line, optionally gzipped.

The format is the one of the WorkBench export in `shared/data`: `task`,
`steps[].{thought,action,args,observation}`, `success`, and optional `id`, `agent`,
`parent_id`, `namespace`, `group`, `source`, `meta` (plus the other `Trajectory` fields).
Unknown keys are kept in `meta`, never dropped. Every line is validated; a bad line becomes a
`Rejection` with a reason, and never stops the good lines around it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any, cast

from pydantic import ValidationError

from flowmem.models import Step, Trajectory, now
from flowmem.settings import Settings

__all__ = [
    "RecordError",
    "Rejection",
    "dump_record",
    "iter_lines",
    "loads",
    "parse_line",
    "parse_record",
    "read_trajectories",
    "write_jsonl",
    "write_lines",
]

_STEP_KEYS = set(Step.model_fields)
_TRAJECTORY_KEYS = set(Trajectory.model_fields)


class RecordError(ValueError):
    """A record that cannot become a trajectory; the message is the reason."""


@dataclass(frozen=True, slots=True)
class Rejection:
    """An input line that was not stored, and why."""

    source: str
    """The file (or stream) it came from."""
    line: int
    """1-based line number."""
    reason: str
    """Why it was rejected."""
    raw: str
    """The line itself (cut to 10,000 characters)."""

    def to_json(self) -> str:
        """The quarantine-file form: one JSON object."""
        return json.dumps(
            {
                "source": self.source,
                "line": self.line,
                "reason": self.reason,
                "raw": self.raw[:10_000],
                "at": now().isoformat(),
            },
            ensure_ascii=False,
        )


def _reject_constant(name: str) -> Any:
    raise RecordError(f"invalid JSON number {name}")


def _check_value(value: Any, settings: Settings, path: str, depth: int) -> None:
    """Enforce the string-length and nesting limits, and refuse non-finite numbers."""
    if depth > settings.max_depth:
        raise RecordError(f"{path}: nested deeper than {settings.max_depth} levels")
    if isinstance(value, str):
        if len(value) > settings.max_string_chars:
            raise RecordError(
                f"{path}: string of {len(value)} characters exceeds {settings.max_string_chars}"
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise RecordError(f"{path}: lone surrogate \\u{ord(value[err.start]):04x} in a string") from None
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise RecordError(f"{path}: non-finite number")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_value(key, settings, path, depth + 1)
            _check_value(item, settings, f"{path}.{key}", depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_value(item, settings, f"{path}[{i}]", depth + 1)


def _content_id(record: dict[str, Any]) -> str:
    """A stable id for a record that has none, so ingesting a file twice stores it once."""
    key = {k: record.get(k) for k in ("task", "steps", "agent", "parent_id", "success")}
    blob = json.dumps(key, sort_keys=True, ensure_ascii=False, default=str)
    return "sha-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


def _split_unknown(data: dict[str, Any], known: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Move keys the model does not know into its meta dict (kept, not dropped)."""
    fields = {k: v for k, v in data.items() if k in known}
    unknown = {k: v for k, v in data.items() if k not in known}
    meta = fields.get("meta")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise RecordError("meta: expected an object")
    if unknown:
        meta = dict(meta)
        for key, value in unknown.items():
            if key in meta:
                extra = meta.get("_extra")
                if extra is None:
                    extra = {}
                elif not isinstance(extra, dict):
                    raise RecordError(f"meta._extra: expected an object to keep the duplicate key {key!r}")
                meta["_extra"] = {**extra, key: value}
            else:
                meta[key] = value
    fields["meta"] = meta
    return fields, unknown


def _format_validation(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:3]:
        loc = ".".join(str(p) for p in e["loc"]) or "record"
        parts.append(f"{loc}: {e['msg']}")
    more = err.error_count() - 3
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def _check_built(trajectory: Trajectory) -> None:
    """Refuse what validation lets through but the store cannot keep."""
    for where, ident in (("id", trajectory.id), ("parent_id", trajectory.parent_id or "")):
        if any(ord(c) < 32 for c in ident):  # ids go into filters, which refuse them
            raise RecordError(f"{where}: control characters are not allowed in ids")
    numbers = [("score", trajectory.score)]
    numbers += [(f"steps.{i}.duration_ms", step.duration_ms) for i, step in enumerate(trajectory.steps)]
    for where, number in numbers:  # a string such as "NaN" validates as a float
        if number is not None and not math.isfinite(number):
            raise RecordError(f"{where}: non-finite number")
    try:  # the store keeps created_at in UTC: it must have a UTC equivalent
        created = trajectory.created_at
        created.replace(tzinfo=None) - (created.utcoffset() or timedelta(0))
    except OverflowError:
        raise RecordError("created_at: out of range once converted to UTC") from None


def _error_text(error: Any, observation: Any) -> Any:
    """A step's error as text: logs that flag a failed call with `"error": true` keep the
    message in the observation (its first line becomes the error; "failed" without one), and
    `"error": false` means none. Anything else is validated as given."""
    if error is True:
        first = (
            observation.strip().splitlines()[0]
            if isinstance(observation, str) and observation.strip()
            else ""
        )
        return first[:500] or "failed"
    if error is False:
        return None
    return error


def parse_record(data: Any, settings: Settings) -> Trajectory:
    """Validate one decoded record and build its trajectory.

    Raises:
        RecordError: with the reason, if the record is not a valid trajectory.
    """
    if not isinstance(data, dict):
        raise RecordError(f"expected a JSON object, got {type(data).__name__}")
    _check_value(data, settings, "record", 0)
    steps = data.get("steps", [])
    if not isinstance(steps, list):
        raise RecordError("steps: expected a list")
    if len(steps) > settings.max_steps:
        raise RecordError(f"steps: {len(steps)} steps exceed the limit of {settings.max_steps}")
    fields, _ = _split_unknown(data, _TRAJECTORY_KEYS)
    clean_steps = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise RecordError(f"steps.{i}: expected an object")
        if "action" not in step:
            raise RecordError(f"steps.{i}.action: missing")
        step_fields, _ = _split_unknown(step, _STEP_KEYS)
        if step_fields.get("args") is None:
            step_fields["args"] = {}
        step_fields["error"] = _error_text(step_fields.get("error"), step_fields.get("observation"))
        clean_steps.append(step_fields)
    fields["steps"] = clean_steps
    fields.setdefault("namespace", settings.namespace)
    if fields.get("id") in (None, ""):
        fields["id"] = _content_id(data)
    try:
        trajectory = Trajectory.model_validate(fields)
    except ValidationError as err:
        raise RecordError(_format_validation(err)) from None
    _check_built(trajectory)
    return trajectory


def parse_line(line: bytes, settings: Settings) -> Trajectory:
    """Decode and validate one interchange line.

    Raises:
        RecordError: with the reason, if the line is not a valid trajectory.
    """
    if len(line) > settings.max_record_bytes:
        raise RecordError(f"line of {len(line)} bytes exceeds {settings.max_record_bytes}")
    return parse_record(loads(line), settings)


_MAX_JSON_DEPTH = 200
"""Deeper JSON is refused before decoding: whether Python's decoder would run out of stack
on it depends on how deep the calling thread's stack already is, so the reason a record gets
would depend on the thread (an API worker or the CLI) instead of on the record."""
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def _too_deep(text: str) -> bool:
    """Whether the JSON text nests arrays and objects deeper than `_MAX_JSON_DEPTH`."""
    if text.count("[") + text.count("{") <= _MAX_JSON_DEPTH:
        return False
    depth = 0
    for bracket in _BRACKETS.findall(_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > _MAX_JSON_DEPTH:
            return True
    return False


def loads(raw: bytes) -> Any:
    """Decode JSON bytes strictly: UTF-8 only, no NaN or Infinity, bounded nesting.

    Raises:
        RecordError: with the reason, if the bytes are not such JSON.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordError(f"invalid UTF-8 at byte {err.start}") from None
    if _too_deep(text):
        raise RecordError("malformed JSON: nested too deeply")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecordError:
        raise
    except RecursionError:
        raise RecordError("malformed JSON: nested too deeply") from None
    except json.JSONDecodeError as err:
        raise RecordError(f"malformed JSON: {err.msg} at column {err.colno}") from None
    except ValueError as err:  # e.g. an integer literal beyond Python's digit limit
        raise RecordError(f"malformed JSON: {err}") from None
    return data


def iter_lines(path: Path, *, progress: Callable[[int], None] | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield (line number, line) of a JSONL file, gunzipping when it is gzipped.

    Blank lines are skipped. `progress` is called with the bytes of the file read so far. A
    truncated gzip stream raises `EOFError` (a corrupt one `OSError` or `zlib.error`) after
    the complete lines; a file named `.gz` that is not gzipped raises `gzip.BadGzipFile`.
    """
    with path.open("rb") as raw:
        magic = raw.read(2)
        raw.seek(0)
        if magic and magic != _GZIP_MAGIC and path.suffix == ".gz":  # empty: no lines
            raise gzip.BadGzipFile(
                "not a gzip file: the name ends in .gz, but it does not start with gzip's bytes 1f 8b"
            )
        fh: IO[bytes] = (
            cast(IO[bytes], gzip.GzipFile(fileobj=raw, mode="rb")) if magic == _GZIP_MAGIC else raw
        )
        for number, chunk in enumerate(fh, start=1):
            line = chunk.rstrip(b"\r\n")
            if progress is not None and number % 256 == 0:
                progress(raw.tell())
            if line.strip():
                yield number, line
        if progress is not None:
            progress(raw.tell())


def read_trajectories(
    path: Path, settings: Settings, *, progress: Callable[[int], None] | None = None
) -> Iterator[Trajectory | Rejection]:
    """Parse a JSONL file into trajectories and rejections, line by line, in order.

    A file that cannot be read to its end (missing, truncated or corrupt gzip) yields one last
    rejection that says so; everything before it still comes through.
    """
    source = str(path)
    number = 0
    try:
        for number, line in iter_lines(path, progress=progress):
            try:
                yield parse_line(line, settings)
            except RecordError as err:
                yield Rejection(source, number, str(err), line.decode("utf-8", "replace"))
    except (OSError, EOFError, zlib.error) as err:
        yield Rejection(source, number + 1, _unreadable(err, number), "")


_GZIP_MAGIC = b"\x1f\x8b"
_ACCEPTED_FILES = "a file is JSONL, plain or gzipped"


def _unreadable(err: BaseException, lines: int) -> str:
    """Why a file could not be read to its end, after `lines` lines, as a rejection says it."""
    where = f"file unreadable after line {lines}" if lines else "file unreadable"
    if isinstance(err, gzip.BadGzipFile) and str(err).startswith("not a gzip file"):
        return f"{where}: {err}; {_ACCEPTED_FILES}"
    if isinstance(err, EOFError):
        return f"{where}: a truncated gzip file ({err or 'no end-of-stream marker'})"
    if isinstance(err, (gzip.BadGzipFile, zlib.error)):
        return f"{where}: not a valid gzip file ({err}); {_ACCEPTED_FILES}"
    return f"{where}: {err or type(err).__name__}"


def dump_record(trajectory: Trajectory) -> dict[str, Any]:
    """The interchange form of a trajectory (round-trips through `parse_record`)."""
    data = trajectory.model_dump(mode="json", exclude_none=True)
    for step in data["steps"]:
        step.setdefault("thought", None)
        step.setdefault("observation", None)
        if not step.get("meta"):
            step.pop("meta", None)
    return data


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries (a file created or renamed in it) durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_lines(path: Path, lines: Iterable[str], *, append: bool = False, durable: bool = False) -> int:
    """Write JSON lines to a file: the one JSONL writer (input files, spool files, the
    quarantine and the unsaved-runs file all go through it).

    Gzipped when the name ends in .gz; appended to when `append`, else replaced; flushed to
    the disk (fsync) before returning when `durable`. Returns how many lines were written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "at" if append else "wt"
    opened = (
        gzip.open(path, mode, encoding="utf-8") if path.suffix == ".gz" else path.open(mode, encoding="utf-8")
    )
    count = 0
    with cast(IO[str], opened) as fh:
        for line in lines:
            fh.write(line + "\n")
            count += 1
        if durable:
            fh.flush()
            os.fsync(fh.fileno())
    return count


def write_jsonl(
    path: Path, trajectories: Iterable[Trajectory], *, append: bool = False, durable: bool = False
) -> int:
    """Write trajectories in the interchange format (see `write_lines`); returns the count."""
    lines = (json.dumps(dump_record(t), ensure_ascii=False) for t in trajectories)
    return write_lines(path, lines, append=append, durable=durable)
