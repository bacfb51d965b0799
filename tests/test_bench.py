"""`python -m bench --quick --json` (what `make bench` runs) goes end to end on tiny sizes and
prints every key (no timing is asserted: figures belong to benchmarks, not tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.processes import Command, CommandRun

KEYS = [
    "agent_start_s",
    "agent_start_ratio",
    "hook_step_us_median",
    "hook_step_us_p99",
    "search_ms_p50_100k",
    "search_recall_at_3_100k",
    "search_vs_bruteforce_ratio",
    "search_rss_mb_100k",
    "induce_10k_s",
    "induce_flow_10k_s",
    "incremental_ratio",
    "incremental_inprocess_ratio",
    "api_search_rps_8",
    "api_search_ms_p99_8",
    "api_search_errors_8",
    "api_search_rps_32",
]


ROOT = Path(__file__).resolve().parents[1]


def bench_command(tmp: Path) -> Command:
    """The command the test runs, in its environment (tiny sizes, its own Prefect home), from
    the checkout's root, where the suite lives."""
    env = {**os.environ, "FLOWMEM_BENCH_SCALE": "0.001", "PREFECT_HOME": str(tmp / "prefect")}
    env.pop("FLOWMEM_BENCH_PY313", None)
    argv = [sys.executable, "-m", "bench", "--quick", "--json"]
    return Command([*argv, "--out", str(tmp / "latest.json")], env, cwd=ROOT)


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CommandRun]:
    """`bench_command` started in a process of its own."""
    run = CommandRun(bench_command(work := tmp_path_factory.mktemp("bench")), work)
    yield run
    run.stop()


@pytest.mark.slow
def test_bench_quick_json_prints_every_key(bench_run: CommandRun) -> None:
    done = bench_run.result()
    tmp = bench_run.work
    assert done.returncode == 0, done.stderr[-2000:]
    printed = json.loads(done.stdout)
    assert [k for k in KEYS if k not in printed] == []
    assert all(isinstance(printed[k], float | int) for k in KEYS)
    assert "FLOWMEM_BENCH_PY313" in printed["memharness_skipped"]
    assert json.loads((tmp / "latest.json").read_text()) == printed
    assert printed["machine"]["cpus"] == os.cpu_count()


def test_one_benchmark_runs_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m bench NAME [ARGS]` runs bench/NAME.py's `main`; `--list` names them; an
    unknown name is one line."""
    from bench.__main__ import main

    assert main(["--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert {"docs_check", "eval_sets", "scaling", "write_path"} <= set(listed)
    assert not {"paths", "data", "pipeline", "report", "__main__"} & set(listed)
    assert main(["no_such_bench"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["docs_check", "--only", "perf"]) == 0
    assert capsys.readouterr().out.startswith("docs-check: ")


def test_the_hook_is_timed_beside_the_revision_before_it() -> None:
    from bench.pipeline import HOOK_BEFORE, hook_step

    known = ["git", "-C", str(ROOT), "cat-file", "-e", f"{HOOK_BEFORE}^{{commit}}"]
    if subprocess.run(known, capture_output=True, check=False).returncode != 0:
        pytest.skip(f"{HOOK_BEFORE} is not in this checkout's history")
    found = hook_step(500, rounds=2)
    assert found["hook_before"] == HOOK_BEFORE and found["hook_rounds"] == 2
    assert found["hook_p50_ratio"] == found["hook_step_us_median"] / found["hook_step_us_median_before"]
    assert 0 < found["hook_step_us_median_before"] <= found["hook_step_us_p99_before"]
