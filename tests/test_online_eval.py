"""`flowmem eval --online`: a replay in batches, each served by the memory of those before it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowmem.cli import app
from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.interchange import write_jsonl
from flowmem.jobs.evaluate import Figures, evaluate
from flowmem.jobs.online import Batch, evaluate_online, replay, split_batches
from flowmem.models import Trajectory
from flowmem.settings import Settings

runner = CliRunner()


def ids(batches: list[list[Trajectory]]) -> list[list[str]]:
    return [[t.id for t in batch] for batch in batches]


@pytest.fixture(scope="module")
def runs() -> list[Trajectory]:
    return simulate(60, seed=3)  # ~100 runs of the simulated office, some failed


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(db=str(tmp_path_factory.mktemp("online") / "unused"))


@pytest.fixture(scope="module")
def replayed(runs: list[Trajectory], settings: Settings) -> list[Batch]:
    return list(replay(runs, RuleInducer(), settings=settings, batches=3, seed=0))


def test_batches_are_a_seeded_shuffle_of_the_runs_sorted_by_id(runs: list[Trajectory]) -> None:
    batches = split_batches(runs, 4, seed=0)
    assert sorted(len(b) for b in batches)[-1] - sorted(len(b) for b in batches)[0] <= 1
    assert sorted(i for b in ids(batches) for i in b) == sorted(t.id for t in runs)
    # The input's order does not matter: the runs are sorted by id before the shuffle.
    assert ids(split_batches(list(reversed(runs)), 4, seed=0)) == ids(batches)
    assert ids(split_batches(runs, 4, seed=0)) == ids(batches)
    other = ids(split_batches(runs, 4, seed=1))
    assert other != ids(batches) and sorted(sum(other, [])) == sorted(sum(ids(batches), []))
    # Not the sorted order either: the shuffle moves runs.
    assert sum(ids(batches), []) != sorted(t.id for t in runs)


def test_a_repeated_id_counts_once(runs: list[Trajectory]) -> None:
    again = runs[0].model_copy(update={"task": "another task under a known id"})
    batches = split_batches([*runs, again], 3, seed=0)
    assert sum(len(b) for b in batches) == len(runs)
    assert all(t.task != again.task for b in batches for t in b)


@pytest.mark.parametrize(("n", "message"), [(1, "at least 2"), (10_000, "cannot make 10000 batches")])
def test_impossible_batch_counts_are_refused(runs: list[Trajectory], n: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split_batches(runs, n, seed=0)


def test_each_batch_is_served_by_exactly_the_runs_of_the_batches_before_it(
    runs: list[Trajectory], replayed: list[Batch]
) -> None:
    order = split_batches(runs, 3, seed=0)
    assert [b.index for b in replayed] == [1, 2, 3]
    assert ids([b.runs for b in replayed]) == ids(order)
    for b in replayed:
        before = {t.id for batch in order[: b.index - 1] for t in batch}
        assert set(b.memory) == before and len(b.memory) == len(before)
        # Raw memory: the successful runs stored, and nothing else.
        assert {m.id for m in b.served.examples} == {t.id for t in runs if t.id in before and t.success}
        # flowmem's workflows were induced from those runs only (a sub-routine's sources
        # are `<run id>#<position>`).
        sources = {s.split("#")[0] for w in b.served.workflows for s in w.source_trajectory_ids}
        assert sources <= before
        assert (len(b.served.workflows) > 0) == (b.index > 1)
        assert len(b.served.flowmem) == len(b.served.raw) == len(b.runs)
    first = replayed[0]
    assert first.induction is None and first.figures.flowmem.memories == 0
    assert all(not r.memories for r in first.served.flowmem + first.served.raw)
    # Later batches are served after the production induction run over the store: the first
    # fits the clusters, the next runs on a store that already has a fit.
    assert replayed[1].induction is not None and replayed[1].induction.refit == "the first run"
    assert replayed[2].induction is not None and replayed[2].induction.refit != "the first run"


def test_the_figures_are_those_of_the_offline_evaluation(
    runs: list[Trajectory], settings: Settings, replayed: list[Batch]
) -> None:
    """Batch 2's memory is one induction run over batch 1: the offline `flowmem eval` trained
    on batch 1 and tested on batch 2 gives the same figures; raw memory's agree at every batch."""
    order = split_batches(runs, 3, seed=0)
    scored = set(Figures.model_fields)  # the offline report's figures that `score` gives
    offline = evaluate(order[0], order[1], RuleInducer(), settings=settings)
    assert replayed[1].figures.flowmem.model_dump() == offline.flowmem.model_dump(include=scored)
    assert replayed[1].figures.raw.model_dump() == offline.raw.model_dump(include=scored)
    later = evaluate(order[0] + order[1], order[2], RuleInducer(), settings=settings)
    assert replayed[2].figures.raw.model_dump() == later.raw.model_dump(include=scored)


def test_the_same_seed_gives_the_same_report(
    runs: list[Trajectory], settings: Settings, replayed: list[Batch]
) -> None:
    again = evaluate_online(list(reversed(runs)), RuleInducer(), settings=settings, batches=3, seed=0)
    assert again.batches == [b.report() for b in replayed]
    assert again.inputs.runs == len(runs) and again.inputs.seed == 0


def test_the_cli_prints_every_batch_as_json_and_saves_the_curve(
    runs: list[Trajectory], tmp_path: Path
) -> None:
    data, png = tmp_path / "runs.jsonl", tmp_path / "curve.png"
    write_jsonl(data, runs)
    result = runner.invoke(
        app,
        ["eval", "--online", str(data), "--batches", "3", "--seed", "0", "--json", "--plot", str(png)],
        env={"FLOWMEM_DB": str(tmp_path / "db")},
    )
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    assert set(report) == {"batches", "inputs", "timing", "plot"}
    assert report["inputs"] | {"order": None} == {
        "runs": len(runs),
        "batches": 3,
        "seed": 0,
        "k": 3,
        "inducer": "rule",
        "order": None,
    }
    batches = report["batches"]
    assert [b["batch"] for b in batches] == [1, 2, 3] and [b["judged"] for b in batches] == [
        False,
        True,
        True,
    ]
    assert [b["memory_runs"] for b in batches] == [
        0,
        batches[0]["runs"],
        batches[0]["runs"] + batches[1]["runs"],
    ]
    for b in batches:
        for system in ("flowmem", "raw"):
            assert {"joint_coverage", "joint_precision", "coverage", "memories", "leakage"} <= set(b[system])
    assert batches[1]["raw"]["memories"] > 0 and batches[1]["flowmem"]["memories"] > 0
    assert report["plot"] == str(png) and png.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--online"], "error: --online needs the runs to replay: flowmem eval --online FILE..."),
        (
            ["--online", "{data}", "--train", "{data}"],
            "error: --online replays FILE...; --train, --test and --demonstrations",
        ),
        (["--train", "{data}", "--test", "{data}", "--seed", "1"], "error: --seed needs --online"),
        (["--train", "{data}", "--batches", "3", "--seed", "1"], "error: --batches, --seed need --online"),
        (["{data}"], "error: unexpected FILE argument"),
        (["--train", "{data}"], "error: both --train and --test are needed (or --online FILE...)"),
        (["--online", "{data}", "--batches", "1"], "error: --batches must be at least 2"),
        (["--online", "{data}", "--batches", "9"], "error: 8 distinct runs cannot make 9 batches"),
        (["--online", "missing.jsonl"], "error: no such file: missing.jsonl"),
        (["--online", "{data}", "--inducer", "magic"], "error: unknown inducer 'magic'"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, args: list[str], expected: str) -> None:
    data = tmp_path / "runs.jsonl"
    write_jsonl(data, simulate(5, seed=1)[:8])
    result = runner.invoke(
        app, ["eval", *(a.format(data=data) for a in args)], env={"FLOWMEM_DB": str(tmp_path / "db")}
    )
    lines = result.output.splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith(expected), result.output
