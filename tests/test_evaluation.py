from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowmem.cli import app
from flowmem.induction.align import lcs_len
from flowmem.induction.metrics import LeakChecker, Retrieval, memory_metrics
from flowmem.interchange import write_jsonl
from flowmem.sim import simulate
from tests.conftest import WORKBENCH

runner = CliRunner()
KEYS = {
    "coverage",
    "step_precision",
    "utility_rate",
    "leakage",
    "slot_leakage",
    "tokens_per_prompt",
    "memories",
}


def test_metrics_follow_their_definitions() -> None:
    leak = LeakChecker({"olga", "budget"})
    retrievals = [
        Retrieval(
            ["a", "b", "c", "d"], True, [("w1", ["a", "x", "c"], "Workflow w1"), ("w2", ["a"], "to olga")]
        ),
        Retrieval(["a"], True, [("w2", ["a"], "to olga")]),
        Retrieval(["q", "r"], False, [("w1", ["a", "x", "c"], "Workflow w1")]),
        Retrieval(["z", "y"], True, []),
    ]
    m = memory_metrics(retrievals, leak, None, n_memories=2)
    assert lcs_len(["a", "x", "c"], ["a", "b", "c", "d"]) == 2
    assert m["coverage"] == round((2 / 4 + 1 / 1 + 0) / 3, 4)
    assert m["step_precision"] == round((2 / 3 + 1 / 1 + 0) / 3, 4)
    assert m["utility_rate"] == round(2 / 3, 4)
    assert m["leakage"] == round(2 / 4, 4) and m["slot_leakage"] is None
    assert m["tokens_per_prompt"] == round((2 + 2 + 2 + 2 + 0) / 4, 2) and m["memories"] == 2


def test_eval_command_on_simulated_runs(tmp_path: Path) -> None:
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl.gz"
    write_jsonl(train, simulate(160, seed=1))
    write_jsonl(test, simulate(60, seed=2))
    result = runner.invoke(
        app,
        ["eval", "--train", str(train), "--test", str(test), "--json"],
        env={"FLOWMEM_DB": str(tmp_path / "x")},
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    flow, raw = report["flowmem"], report["raw"]
    assert (
        KEYS <= set(flow)
        and KEYS <= set(raw)
        and {"cluster_ari", "cluster_nmi", "noise_fraction"} <= set(flow)
    )
    assert flow["memories"] > 0 and flow["leakage"] == 0.0 and flow["slot_leakage"] == 0.0
    assert raw["leakage"] > 0.5 and raw["slot_leakage"] > 0.5  # raw runs carry their names and ids
    assert flow["coverage"] > 0.5 and flow["utility_rate"] > 0.5


def test_eval_rejects_an_unknown_inducer(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    write_jsonl(path, simulate(5, seed=1))
    result = runner.invoke(app, ["eval", "--train", str(path), "--test", str(path), "--inducer", "magic"])
    assert result.exit_code == 2 and "unknown inducer" in result.output


@pytest.mark.skipif(not WORKBENCH.exists(), reason="shared WorkBench data not present")
def test_workbench_targets(tmp_path: Path) -> None:
    """The issue's targets on WorkBench (train instances 0-6, test 7-9), in one run."""
    import gzip

    parts: dict[str, list[str]] = {"train": [], "test": []}
    with gzip.open(WORKBENCH, "rt", encoding="utf-8") as fh:
        for line in fh:
            parts["train" if json.loads(line)["meta"]["instance"] <= 6 else "test"].append(line)
    for name, lines in parts.items():
        (tmp_path / f"{name}.jsonl").write_text("".join(lines))
    args = [
        "eval",
        "--train",
        str(tmp_path / "train.jsonl"),
        "--test",
        str(tmp_path / "test.jsonl"),
        "--json",
    ]
    result = runner.invoke(app, args, env={"FLOWMEM_DB": str(tmp_path / "x")})
    report = json.loads(result.output)
    flow, raw = report["flowmem"], report["raw"]
    assert flow["coverage"] >= raw["coverage"] - 0.02
    assert flow["step_precision"] >= raw["step_precision"]
    assert flow["utility_rate"] >= 0.9
    assert flow["leakage"] == 0 and flow["slot_leakage"] == 0 and raw["leakage"] > 0.9
    assert flow["tokens_per_prompt"] <= raw["tokens_per_prompt"]
    assert flow["cluster_ari"] >= 0.8
