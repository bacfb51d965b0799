from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowmem.cli import app
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import InductionRun
from flowmem.settings import Settings
from tests.factories import WORKBENCH, cancel, forward, good, make_workflow

runner = CliRunner()


def invoke(db: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env={"FLOWMEM_DB": str(db), "FLOWMEM_NAMESPACE": "default"})
    return result.exit_code, result.output


BAD = [
    "{broken json",
    "[]",
    '{"steps": []}',
    '{"task": "", "steps": []}',
    '{"task": "t", "steps": [{"args": {}}]}',
    '{"task": "t", "steps": [{"action": null}]}',
    '{"task": "t", "steps": {"action": "a"}}',
    '{"task": 5}',
    '{"task": "t", "success": "yes"}',
    '{"task": "t", "score": NaN}',
    '{"task": "t", "meta": []}',
    '{"task": "t", "agent": 7}',
    '{"task": "t", "steps": [{"action": "a", "args": "x"}]}',
    '{"task": "t", "namespace": "no spaces please"}',
    '{"task": "t", "created_at": "yesterday"}',
    '{"task": "t", "steps": [{"action": "a", "args": {}, "observation": 3}]}',
    '{"task": "t", "parent_id": []}',
    '"just a string"',
    "null",
    '{"task": "t", "steps": [5]}',
]


def test_ingest_100_valid_20_malformed(tmp_path: Path) -> None:
    lines = [good(i) for i in range(100)]
    for k, bad in enumerate(BAD):
        lines.insert(5 * k + 3, bad)
    src = tmp_path / "mixed.jsonl"
    src.write_text("\n".join(lines) + "\n")
    db = tmp_path / "store"
    code, output = invoke(db, "ingest", str(src))
    quarantine = Path(str(db) + ".quarantine.jsonl")
    assert code == 1
    assert f"stored 100, rejected 20 (see {quarantine})" in " ".join(output.split())
    rejected = [json.loads(x) for x in quarantine.read_text().splitlines()]
    assert len(rejected) == 20
    assert [r["line"] for r in rejected] == [5 * k + 4 for k in range(20)]
    assert all(r["reason"] and r["source"] == str(src) for r in rejected)
    assert invoke(db, "trajectories", "count") == (0, "100\n")
    # Unknown keys survived in meta; the same file again stores nothing new.
    store = store_from(Settings(db=str(db)))
    assert {t.meta["custom_field"] for t in store.list_trajectories(limit=None)} == set(range(100))
    code, output = invoke(db, "ingest", "--json", str(src))
    assert code == 1 and json.loads(output)["stored"] == 0 and json.loads(output)["duplicates"] == 100


def test_all_valid_exits_0_and_flowmem_db_selects_the_store(tmp_path: Path) -> None:
    src = tmp_path / "ok.jsonl"
    src.write_text("\n".join(good(i) for i in range(7)))
    code, output = invoke(tmp_path / "one", "ingest", str(src))
    assert code == 0 and "stored 7, rejected 0" in output
    assert invoke(tmp_path / "one", "trajectories", "count")[1] == "7\n"
    code, output = invoke(tmp_path / "two", "trajectories", "count")  # another store: none there
    assert code == 2 and output.startswith(f"error: no store at {tmp_path / 'two'}")


def test_trajectory_list_and_show(tmp_path: Path) -> None:
    src = tmp_path / "ok.jsonl"
    src.write_text("\n".join(good(i) for i in range(3)))
    invoke(tmp_path / "db", "ingest", str(src))
    code, output = invoke(tmp_path / "db", "trajectories", "list", "--json")
    listed = json.loads(output)
    assert code == 0 and len(listed) == 3 and listed[0]["n_steps"] == 2
    code, output = invoke(tmp_path / "db", "trajectories", "show", listed[0]["id"])
    assert code == 0 and "contacts.lookup" in output and "mail.send" in output
    code, output = invoke(tmp_path / "db", "trajectories", "show", "nope")
    assert code == 1 and "no trajectory" in output


def test_workflow_commands(tmp_path: Path) -> None:
    db = tmp_path / "db"
    store = store_from(Settings(db=str(db)))
    store.commit_run(InductionRun(id="r1"), [make_workflow(version=1)])
    store.commit_run(InductionRun(id="r2"), [make_workflow(version=2, steps=3, pitfalls=["check the date"])])
    code, output = invoke(db, "workflows", "list", "--json")
    assert code == 0 and [(w["id"], w["version"]) for w in json.loads(output)] == [("forward_latest", 2)]
    code, output = invoke(db, "workflows", "show", "forward_latest")
    assert code == 0 and "{recipient_email}" in output and "check the date" in output
    code, output = invoke(db, "workflows", "history", "forward_latest", "--json")
    assert [(w["version"], w["parent_version"]) for w in json.loads(output)] == [(1, None), (2, 1)]
    code, output = invoke(db, "workflows", "diff", "forward_latest", "1", "2")
    assert code == 0 and "+ mail.forward" in output and "pitfalls" in output
    code, output = invoke(db, "workflows", "runs", "--json")
    assert [r["id"] for r in json.loads(output)] == ["r1", "r2"]
    code, output = invoke(db, "workflows", "rollback", "r2")
    assert code == 0 and "rolled back r2" in output
    code, output = invoke(db, "workflows", "list", "--json")
    assert [w["version"] for w in json.loads(output)] == [1]
    code, output = invoke(db, "workflows", "list", "--at", "r2", "--json")
    assert [w["version"] for w in json.loads(output)] == [2]
    code, output = invoke(db, "workflows", "rollback", "r2")
    assert code == 1 and "already rolled back" in output
    assert invoke(db, "workflows", "show", "missing")[0] == 1


@pytest.mark.skipif(not WORKBENCH.exists(), reason="shared WorkBench data not present")
@pytest.mark.xdist_group("workbench")  # shares workbench_ingested, made once
def test_ingest_workbench_twice_counts_4197(
    tmp_path: Path, workbench_ingested: tuple[Path, int, str]
) -> None:
    ingested, code, output = workbench_ingested  # the first ingest, into an empty store
    assert code == 0 and "stored 4197, rejected 0" in output
    db = tmp_path / "wb"
    shutil.copytree(ingested, db)
    assert invoke(db, "trajectories", "count") == (0, "4197\n")
    code, output = invoke(db, "ingest", str(WORKBENCH))
    assert code == 0 and "stored 0 (4197 already stored)" in output
    assert invoke(db, "trajectories", "count") == (0, "4197\n")
    t = store_from(Settings(db=str(db))).get_trajectory("workbench/email/gpt-4_domains/050")
    assert t.group == "email/t05" and t.meta["slots"]["recipient_name"] == "olga" and t.success is True


def test_generate_writes_an_ingestible_file(tmp_path: Path) -> None:
    out = tmp_path / "sim.jsonl"
    code, output = invoke(tmp_path / "db", "generate", str(out), "--tasks", "10", "--seed", "3")
    assert code == 0 and output.startswith("wrote ")
    code, output = invoke(tmp_path / "db", "ingest", str(out))
    assert code == 0 and "rejected 0" in output


def test_every_command_stays_in_its_namespace(tmp_path: Path) -> None:
    """Workflows induced in namespace a are never shown, searched or served in namespace b."""
    from flowmem.agents import WorkflowMemory
    from flowmem.induction.inducers.rule import RuleInducer
    from flowmem.jobs.induce import run_induction

    db = tmp_path / "db"
    settings = Settings(db=str(db), namespace="a")
    store = store_from(settings)
    runs = [forward(i) for i in range(8)] + [cancel(i) for i in range(8)]
    store_trajectories(store, [t.model_copy(update={"namespace": "a"}) for t in runs], settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    [wid, *_] = [w.id for w in store.list_workflows(namespace="a")]

    def run_in(namespace: str, *args: str) -> tuple[int, str]:
        result = runner.invoke(app, list(args), env={"FLOWMEM_DB": str(db), "FLOWMEM_NAMESPACE": namespace})
        return result.exit_code, result.output

    task = "Forward the latest email about 'roadmap' to zed"
    assert run_in("a", "trajectories", "count") == (0, "16\n")
    assert run_in("b", "trajectories", "count") == (0, "0\n")
    assert json.loads(run_in("a", "search", task, "--json")[1])
    nothing = (2, f"error: namespace 'b' holds nothing in {db}: set FLOWMEM_NAMESPACE to one of a\n")
    assert run_in("b", "search", task, "--json") == nothing
    assert len(json.loads(run_in("a", "workflows", "list", "--json")[1])) == 2
    assert run_in("b", "workflows", "list", "--json") == nothing
    code, _ = run_in("b", "workflows", "show", wid)
    assert code != 0
    assert json.loads(run_in("b", "workflows", "runs", "--json")[1]) == []
    code, output = run_in("b", "induce", "--json")
    assert code == 0 and json.loads(output)["versions_created"] == 0
    assert json.loads(run_in("b", "workflows", "list", "--json")[1]) == []
    with WorkflowMemory(Settings(db=str(db), namespace="b")) as memory:
        assert memory.context(task) == "" and memory.search(task) == []
        # In-process code with the store in hand may name a namespace explicitly.
        assert memory.search(task, namespace="a")[0].workflow.namespace == "a"


def test_induce_from_demonstrations_is_offline_and_online_runs_add_versions(tmp_path: Path) -> None:

    demos = tmp_path / "demos.jsonl"
    demos.write_text("".join(forward(i).model_dump_json() + "\n" for i in range(8)))
    db = tmp_path / "db"
    code, output = invoke(db, "induce", "--from", str(demos))
    assert code == 0, output
    assert "demonstrations: stored 8, rejected 0" in output
    store = store_from(Settings(db=str(db)))
    [offline] = store.list_workflows()
    assert offline.provenance.mode == "offline" and offline.version == 1
    assert all(t.meta["demonstration"] is True for t in store.iter_trajectories())
    # The agents' own runs later read the message before forwarding it: a new version of the
    # same workflow, online.
    online = []
    for i in range(10):
        run = forward(i).model_copy(update={"id": f"online-{i}"})
        read = run.steps[0].model_copy(update={"action": "mail.read", "args": {"email_id": f"e{i}"}})
        online.append(run.model_copy(update={"steps": [run.steps[0], read, *run.steps[1:]]}))
    store_trajectories(store, online, store.settings.scrub)
    code, output = invoke(db, "induce")
    assert code == 0, output
    [v2] = [w for w in store.history(offline.id) if w.version == 2]
    assert v2.parent_version == 1 and v2.provenance.mode == "online" and "mail.read" in v2.actions
    code, output = invoke(db, "induce", "--from", str(tmp_path / "nope.jsonl"))
    assert (code, "".join(output.split())) == (2, f"error:nosuchfile:{tmp_path / 'nope.jsonl'}")


def test_induce_after_a_rollback_induces_again_and_fails_when_every_cluster_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    db = tmp_path / "db"
    store = store_from(Settings(db=str(db)))
    store_trajectories(
        store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], store.settings.scrub
    )
    code, output = invoke(db, "induce", "--json")
    first = json.loads(output)
    assert code == 0 and first["versions_created"] == 2
    assert first["run"] in invoke(db, "workflows", "runs")[1]  # whole, as rollback takes it
    assert invoke(db, "workflows", "rollback", first["run"])[0] == 0
    assert store.list_workflows() == []
    code, output = invoke(db, "induce", "--json")  # the rolled-back run's work is done again
    again = json.loads(output)
    assert code == 0 and not again["skipped"] and again["versions_created"] == 2

    import flowmem.induction.inducers.rule as rule

    def broken(self: object, cluster: object) -> object:
        raise RuntimeError("model unreachable")

    monkeypatch.setattr(rule.RuleInducer, "induce", broken)
    code, output = invoke(db, "induce", "--all")
    assert code == 1
    assert (
        output.splitlines()[-1]
        == "error: every cluster to induce failed (2), e.g. RuntimeError: model unreachable"
    )


def test_ingest_reports_an_id_stored_with_other_content(tmp_path: Path) -> None:
    db, first, second = tmp_path / "db", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    runs = [json.loads(good(i)) | {"id": f"run-{i}"} for i in range(3)]
    first.write_text("\n".join(json.dumps(r) for r in runs) + "\n")
    assert invoke(db, "ingest", str(first))[0] == 0
    assert invoke(db, "ingest", str(first))[0] == 0  # the same runs again: duplicates, fine
    changed = runs[1] | {"task": "Send the monthly report to somebody else"}
    second.write_text(json.dumps(changed) + "\n" + json.dumps(runs[2]) + "\n")
    stored_hash = store_from(Settings(db=str(db))).get_trajectory("run-1").content_hash()
    code, output = invoke(db, "ingest", str(second))
    assert code == 1 and f"id 'run-1' is stored with other content (hash {stored_hash})" in output
    assert "1 conflicting with a stored id" in output
    code, output = invoke(db, "ingest", "--json", str(second))
    assert code == 1 and [c["id"] for c in json.loads(output)["conflicts"]] == ["run-1"]
    assert invoke(db, "ingest", "--skip-existing", str(second))[0] == 0
    assert store_from(Settings(db=str(db))).get_trajectory("run-1").task == runs[1]["task"]  # kept


def _rendered(renderable: object, width: int) -> list[str]:
    from io import StringIO

    from rich.console import Console

    buffer = StringIO()
    Console(file=buffer, width=width, force_terminal=False, color_system=None).print(renderable)
    return buffer.getvalue().splitlines()


def test_workflows_list_keeps_every_name_whole_at_any_width() -> None:
    from flowmem.cli.render import workflow_table

    found = [
        make_workflow("agent-s-modify_pending_order_address-h709658", name="modify_pending_order_address"),
        make_workflow("agent-c0", name="exchange_order_items_by_name", steps=1),
    ]
    narrow = _rendered(workflow_table(found), 80)
    # The columns do not fit 80: one record each, the id and the name whole on their own lines.
    for w in found:
        assert w.id in narrow and f"  {w.name}" in narrow
    assert "  v1 · task · subtask/agent · candidate · 1 step · served 0" in narrow
    assert all(line == line.rstrip() for line in narrow)  # piped, no line ends in spaces
    wide = _rendered(workflow_table(found), 200)
    assert any("name" in line and "served" in line for line in wide)  # the table's header
    assert all(any(w.id in line and w.name in line for line in wide) for w in found)


RUN_ID = "run-20261129T015041510005-80e838"


def test_runs_and_history_keep_run_ids_whole_at_any_width() -> None:
    from datetime import UTC, datetime

    from flowmem.cli.render import history_table, runs_table

    when = datetime(2026, 11, 29, 1, 50, 43, tzinfo=UTC)
    runs = [
        InductionRun(
            id=RUN_ID,
            finished_at=when,
            table_version=2,
            base_version=1,
            counts={"trajectories": 144, "clusters": 15, "versions_created": 44, "failed_clusters": 0},
        ),
        InductionRun(
            id="undo-1",
            kind="rollback",
            finished_at=when,
            table_version=3,
            base_version=2,
            rolled_back_run=RUN_ID,
        ),
    ]
    narrow = _rendered(runs_table(runs), 80)
    assert narrow[:5] == [
        "runs",
        RUN_ID,
        "  induce · finished 2026-11-29 01:50:43 · table version 2 (before 1)",
        "  trajectories 144, clusters 15, versions 44, failed 0",
        "undo-1",
    ]
    assert narrow[6] == f"  undid {RUN_ID}"
    wide = _rendered(runs_table(runs), 200)
    assert any(
        RUN_ID in line and "trajectories 144, clusters 15, versions 44, failed 0" in line for line in wide
    )

    wid = "agent-s-modify_pending_order_address-h709658"
    versions = [
        make_workflow(wid, 1, provenance={"inducer": "rule", "run_id": RUN_ID}, created_at=when),
        make_workflow(wid, 2, steps=3, provenance={"inducer": "llm", "run_id": "r2"}, created_at=when),
    ]
    narrow = _rendered(history_table(versions), 80)
    assert narrow == [
        wid,
        "v1 · candidate · 2 steps",
        "  rule inducer · created 2026-11-29 01:50:43",
        f"  run {RUN_ID}",
        "v2 (from v1) · candidate · 3 steps",
        "  llm inducer · created 2026-11-29 01:50:43",
        "  run r2",
    ]
    wide = _rendered(history_table(versions), 200)
    assert any(RUN_ID in line and "2026-11-29 01:50:43" in line for line in wide)


def test_eval_table_cells_say_what_is_not_measured_rather_than_none() -> None:
    from flowmem.cli.eval import _cell

    assert [_cell(None), _cell({}), _cell({"leak": 2, "schema": 1}), _cell(0.25), _cell(3)] == [
        "—",
        "none",
        "leak 2, schema 1",
        "0.25",
        "3",
    ]


def test_trajectories_show_keeps_each_action_whole_and_an_error_column_only_for_errors() -> None:
    from flowmem.cli.render import trajectory_panel
    from flowmem.models import Step, Trajectory

    long = "find_user_id_by_name_zip_and_phone"
    steps = [
        Step(
            action=long,
            args={"first_name": "Noah", "last_name": "Patel", "zip": "10108"},
            observation="noah_6952",
        ),
        Step(action="get_user_details", args={"user_id": "noah_6952"}, observation='{"orders": ["#W1"]}'),
    ]
    ok = _rendered(trajectory_panel(Trajectory(id="t1", task="exchange a lamp", steps=steps)), 80)
    assert any(long in line for line in ok) and not any("error" in line for line in ok)
    failing = [*steps, Step(action="exchange_delivered_order_items", args={}, error="order not delivered")]
    shown = _rendered(trajectory_panel(Trajectory(id="t2", task="exchange a lamp", steps=failing)), 80)
    assert any("error" in line for line in shown) and any(
        "exchange_delivered_order_items" in line for line in shown
    )


def test_workflows_diff_lists_pitfalls_and_parameters_item_by_item() -> None:
    from flowmem.cli.render import diff_text
    from flowmem.induction.render.diff import diff_workflows
    from flowmem.models import Condition, Pitfall

    delegated = Pitfall(
        text="called delegate (3/4 failures)", condition=Condition(kind="does", action="delegate")
    )
    old = make_workflow(
        "w", 1, pitfalls=[delegated, "check the date"], parameters={"subject": "task", "to": "task"}
    )
    again = delegated.model_copy(update={"condition": Condition(kind="does", action="delegate", times=2)})
    new = make_workflow(
        "w",
        2,
        pitfalls=[again, "look the address up"],
        parameters={"subject": "task", "to": "result of contacts.lookup", "cc": "task"},
    )
    lines = _rendered(diff_text(diff_workflows(old, new)), 100)
    at = lines.index("pitfalls:")
    assert lines[at + 1 : at + 4] == [
        "  - check the date",
        "  ~ called delegate (3/4 failures) (its condition)",
        "  + look the address up",
    ]
    at = lines.index("parameters:")
    assert lines[at + 1 : at + 3] == [
        "  ~ {to}: from the task → from the result of contacts.lookup",
        "  + {cc}: from the task",
    ]
    assert not any("{" in line and '"text"' in line for line in lines)  # no JSON of a pitfall
