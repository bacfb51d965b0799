"""A served version's `Workflow` read as one JSON document is the one `rows.workflow_from_row`
reads from the same row: for awkward texts, nulls, a table from before `kind`, and rows whose
JSON columns pydantic's parser refuses (read the old way)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from flowmem.models import Pitfall, Provenance, UsageStats, Workflow, WorkflowStep
from flowmem.storage import rows
from flowmem.storage.workflow_json import WorkflowReader

AWKWARD = ['say "hi"\\now', "tab\there\nnewline", "ünïcödé ✓ 🚀", "\x00\x1f control", "</script>", ""]


def _workflows() -> list[Workflow]:
    out = []
    for i, text in enumerate(AWKWARD):
        steps = [
            WorkflowStep(
                action="mail.search", args={"query": text or "{q}", "n": i, "x": [1.5, None, {"a": text}]}
            ),
            WorkflowStep(
                action="mail.read", args={"id": "{id}"}, note=text or None, choices={"to": [text, "b"]}
            ),
        ]
        out.append(
            Workflow(
                id=f"w{i}.x:y-z_",
                version=i + 2,
                parent_version=i + 1 if i % 2 else None,
                name=f"name {text}" if text else "plain",
                description=text,
                steps=steps,
                parameters={"q": text, "id": "the id"},
                pitfalls=[Pitfall(text=f"do not {text}!")] if i % 3 else [],
                scope="task" if i % 2 else "subtask",
                kind="subroutine" if i == 3 else "task",
                agent=["agent", "planner"][i % 2],
                cluster_id=None if i % 2 else -1 if i == 4 else i,
                source_trajectory_ids=[f"t{i}", text] if i % 2 else [],
                provenance=Provenance(inducer="rule", model=text or None),
            )
        )
    return out


def _table(workflows: list[Workflow]) -> pa.Table:
    keys = np.eye(4, dtype=np.float32)[:1]
    return pa.Table.from_pylist(
        [rows.workflow_to_row(w, keys) for w in workflows], schema=rows.workflow_schema(4, "x")
    )


def _old(table: pa.Table, i: int, **live: Any) -> Workflow:
    row = {name: table.column(name)[i].as_py() for name in rows.WORKFLOW_FIELDS if name in table.column_names}
    row["created_at"] = live.pop("created_at")
    return rows.workflow_from_row(row, **live)


def _columns(table: pa.Table) -> dict[str, pa.Array]:
    return {name: table.column(name).combine_chunks() for name in table.column_names}


def _live(i: int) -> dict[str, Any]:
    return {
        "status": ["active", "candidate", "deprecated"][i % 3],
        "stats": UsageStats(served=i, successes=i // 2),
        "created_at": datetime(2026, 11, 28, 12, 0, i, 123_456 * i % 1_000_000, tzinfo=UTC),
    }


def _same(got: Workflow, want: Workflow, *, as_json: bool = True) -> None:
    assert got == want
    assert not as_json or got.model_dump_json() == want.model_dump_json()
    assert got.model_dump() == want.model_dump()
    assert got.model_fields_set == want.model_fields_set


def test_each_row_reads_as_the_old_reading_of_it() -> None:
    workflows = _workflows()
    table = _table(workflows)
    reader = WorkflowReader(_columns(table))
    for i in range(len(workflows)):
        want = _old(table, i, **_live(i))
        _same(reader.workflow(i, **_live(i)), want)
        # by the JSON route itself, not the old way it falls back on
        _same(Workflow.model_validate_json(reader.document(i, **_live(i))), want)
        assert want.steps == workflows[i].steps and want.name == workflows[i].name


def test_a_row_before_kind_and_a_null_kind_read_as_tasks() -> None:
    table = _table(_workflows())
    without = table.drop_columns(["kind"])
    nulled = table.set_column(
        table.column_names.index("kind"), "kind", pa.array([None] * len(table), pa.string())
    )
    for t in (without, nulled):
        reader = WorkflowReader(_columns(t))
        for i in range(len(t)):
            got = Workflow.model_validate_json(reader.document(i, **_live(i)))
            assert got.kind == "task"
            _same(got, _old(t, i, **_live(i)))


def test_a_row_the_json_route_refuses_is_read_the_old_way() -> None:
    table = _table(_workflows()[:3])
    steps = table.column("steps").to_pylist()
    # Python's JSON writes NaN and Infinity; both routes read them. A lone surrogate's escape
    # (Python reads it) is refused by pydantic's parser: that row is read the old way.
    steps[1] = json.dumps([{"action": "a.b", "args": {"x": float("nan"), "y": float("inf")}}])
    steps[2] = '[{"action": "a.b", "args": {"x": "\\ud800"}}]'
    table = table.set_column(table.column_names.index("steps"), "steps", pa.array(steps, pa.string()))
    reader = WorkflowReader(_columns(table))
    got = reader.workflow(1, **_live(1))
    assert np.isnan(got.steps[0].args["x"]) and got.steps[0].args["y"] == float("inf")
    assert got.model_dump_json() == _old(table, 1, **_live(1)).model_dump_json()
    with pytest.raises(ValueError):
        Workflow.model_validate_json(reader.document(2, **_live(2)))
    got = reader.workflow(2, **_live(2))
    assert got.steps[0].args["x"] == "\ud800"
    _same(got, _old(table, 2, **_live(2)), as_json=False)  # a lone surrogate: no JSON either way
    _same(reader.workflow(0, **_live(0)), _old(table, 0, **_live(0)))


def test_a_broken_row_fails_as_the_old_reading_fails() -> None:
    table = _table(_workflows()[:1])
    table = table.set_column(table.column_names.index("steps"), "steps", pa.array(["[{"], pa.string()))
    with pytest.raises(json.JSONDecodeError):
        _old(table, 0, **_live(0))
    with pytest.raises(json.JSONDecodeError):
        WorkflowReader(_columns(table)).workflow(0, **_live(0))


def test_sliced_and_large_text_columns_read_their_own_rows() -> None:
    table = _table(_workflows())
    sliced = table.slice(2, 3)  # Arrow arrays with an offset into their buffers
    reader = WorkflowReader({name: sliced.column(name).chunk(0) for name in sliced.column_names})
    for i in range(len(sliced)):
        _same(Workflow.model_validate_json(reader.document(i, **_live(i))), _old(sliced, i, **_live(i)))
    large = table.cast(
        pa.schema([f.with_type(pa.large_string()) if f.type == pa.string() else f for f in table.schema])
    )
    reader = WorkflowReader(_columns(large))
    for i in range(len(large)):
        _same(Workflow.model_validate_json(reader.document(i, **_live(i))), _old(table, i, **_live(i)))


def test_several_rows_read_together_as_each_alone_and_a_refused_one_falls_back() -> None:
    table = _table(_workflows())
    steps = table.column("steps").to_pylist()
    steps[4] = '[{"action": "a.b", "args": {"x": "\\ud800"}}]'  # refused by pydantic's parser
    table = table.set_column(table.column_names.index("steps"), "steps", pa.array(steps, pa.string()))
    reader = WorkflowReader(_columns(table))

    def together(positions: list[int]) -> list[Workflow]:
        live = [_live(i) for i in positions]
        return reader.workflows(
            positions,
            [x["status"] for x in live],
            [x["stats"] for x in live],
            [x["created_at"] for x in live],
        )

    for positions in ([0, 1, 2], [5, 0, 5], [3], []):
        got = together(positions)
        assert len(got) == len(positions)
        for w, i in zip(got, positions, strict=True):
            _same(w, _old(table, i, **_live(i)))
    got = together([2, 4, 1])
    assert got[1].steps[0].args["x"] == "\ud800"
    for w, i in zip(got, [2, 4, 1], strict=True):
        _same(w, _old(table, i, **_live(i)), as_json=i != 4)
