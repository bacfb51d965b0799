"""`flowmem export skills` / `flowmem export json`: served workflows for other tools."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from flowmem.cli import app
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.literals import LiteralIndex, find_literals
from flowmem.interchange.skills import MANIFEST
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Workflow
from flowmem.policy.lifecycle import Transition
from flowmem.settings import Settings
from tests.factories import cancel, forward

runner = CliRunner()


def export(db: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(
        app, ["export", *args], env={"FLOWMEM_DB": str(db), "FLOWMEM_NAMESPACE": "default"}
    )
    return result.exit_code, result.output


def front_matter(path: Path) -> dict[str, str]:
    text = path.read_text()
    assert text.startswith("---\n")
    head, _ = text[4:].split("\n---\n", 1)
    data = yaml.safe_load(head)
    assert isinstance(data, dict)
    return data


def snapshot(root: Path) -> dict[str, tuple[str, int]]:
    return {p.parent.name: (p.read_text(), p.stat().st_mtime_ns) for p in root.glob("*/SKILL.md")}


def test_skills_export_every_served_workflow_and_reexport_changes_only_what_changed(tmp_path: Path) -> None:
    db = tmp_path / "db"
    settings = Settings(db=str(db))
    store = store_from(settings)
    runs = [forward(i) for i in range(8)] + [cancel(i) for i in range(8)]
    store_trajectories(store, runs, settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace="default")
    served = store.served_workflows()
    assert len(served) == 2

    out = tmp_path / "skills"
    code, output = export(db, "skills", str(out))
    assert code == 0, output
    assert "2 written, 0 unchanged, 0 removed" in output
    folders = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(folders) == len(served)
    literals = LiteralIndex.build(runs).rare_values()
    seen: dict[str, str] = {}
    for folder in folders:
        meta = front_matter(folder / "SKILL.md")
        assert set(meta) == {"name", "description"} and meta["name"] == folder.name
        assert len(meta["description"].split()) >= 4 and len(meta["name"]) <= 64
        text = (folder / "SKILL.md").read_text()
        assert "## Steps" in text and "## Version" in text and "{" in text
        assert not find_literals(text, sorted(literals)), folder.name
        seen[folder.name] = text
    manifest = json.loads((out / MANIFEST).read_text())["skills"]
    assert sorted(manifest.values()) == sorted(w.id for w in served)

    # Nothing changed: nothing is rewritten.
    before = snapshot(out)
    assert export(db, "skills", str(out))[1].strip().endswith("0 written, 2 unchanged, 0 removed")
    assert snapshot(out) == before

    # A new version of one workflow rewrites that folder only.
    forwarding = next(w for w in served if "mail.forward" in w.actions)
    v2 = forwarding.model_copy(
        update={
            "version": forwarding.version + 1,
            "parent_version": forwarding.version,
            "pitfalls": ["Look the address up first."],
        }
    )
    store.put_workflow(v2)
    assert export(db, "skills", str(out))[1].strip().endswith("1 written, 1 unchanged, 0 removed")
    after = snapshot(out)
    changed = {name for name in after if after[name] != before[name]}
    assert changed == {manifest_name(manifest, forwarding)}
    assert "Look the address up first." in after[manifest_name(manifest, forwarding)][0]

    # A workflow no longer served (deprecated) loses its folder; a folder we did not write stays.
    (out / "mine").mkdir()
    (out / "mine" / "SKILL.md").write_text("---\nname: mine\ndescription: by hand\n---\n")
    cancelling = next(w for w in served if "calendar.cancel_event" in w.actions)
    store.record_transitions(
        [Transition(cancelling.id, cancelling.version, cancelling.status, "deprecated", "test")],
        namespace="default",
    )
    code, output = export(db, "skills", str(out))
    assert output.strip().endswith("0 written, 1 unchanged, 1 removed"), output
    assert not (out / manifest_name(manifest, cancelling)).exists() and (out / "mine" / "SKILL.md").exists()

    code, output = export(db, "json")
    assert code == 0 and [w["id"] for w in json.loads(output)] == [forwarding.id]


def manifest_name(manifest: dict[str, str], w: Workflow) -> str:
    return next(name for name, wid in manifest.items() if wid == w.id)


def test_export_on_an_empty_store_says_what_to_do(tmp_path: Path) -> None:
    code, output = export(tmp_path / "db", "skills", str(tmp_path / "skills"))
    assert code == 2 and "no store at" in output and "flowmem ingest" in output
