"""The docs check: README's results table holds the figures `bench/eval_sets.py` measures, and
an edited figure is caught."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.factories import WORKBENCH
from tests.factories import docs_check_module as _module
from tests.processes import READY_LIMIT, Command, CommandRun

pytestmark = pytest.mark.xdist_group("docs-check")  # the evaluation two tests read, run once

ROOT = Path(__file__).resolve().parents[1]
NEEDS_DATA = pytest.mark.skipif(not WORKBENCH.exists(), reason="needs ../shared/data")


@pytest.fixture(scope="module")
def docs_eval(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CommandRun | None]:
    """`bench/eval_sets.py --json` on the shared sets, started in a process of its own (None
    without the shared data): the command the docs check runs for README's table."""
    if not WORKBENCH.exists():
        yield None
        return
    argv = [sys.executable, "bench/eval_sets.py", str(WORKBENCH.parent), "--json"]
    run = CommandRun(Command(argv, cwd=ROOT), tmp_path_factory.mktemp("docs-eval"))
    yield run
    run.stop()


@pytest.mark.slow
@NEEDS_DATA
def test_readme_figures_hold_and_an_edited_one_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docs_eval: CommandRun | None
) -> None:
    check = _module()

    @functools.cache
    def runner(args: tuple[str, ...]) -> Any:
        # This very command, started by the `docs_eval` fixture: its output, once done.
        if docs_eval is not None and args[0] == "bench/eval_sets.py":
            done = docs_eval.result()
            assert done.returncode == 0, done.stderr[-2000:]
            return json.loads(done.stdout)
        return check._json_of(list(args))

    def run(*argv: str) -> int:
        return int(check.main(["--only", "readme", *argv], runner=lambda args: runner(tuple(args))))

    assert run() == 0
    assert "of 82 figures hold" in capsys.readouterr().out  # README's table, docs/metrics.md's warnings
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "metrics.md", tmp_path / "docs" / "metrics.md")
    text = (tmp_path / "README.md").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("| utility_rate |"))
    cells = line.split("|")
    cells[2] = " 0.999 "  # WorkBench flowmem's utility, edited
    (tmp_path / "README.md").write_text(text.replace(line, "|".join(cells)), encoding="utf-8")
    assert run("--root", str(tmp_path)) == 1
    out = capsys.readouterr().out
    assert "'utility_rate' column 1 says '0.999'" in out and "81 of 82 figures hold" in out


def _edited(text: str, check: Any, module: Any) -> str:
    """`text` with the figure `check` names changed (its other figures as they were)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(check.header))
    for i in range(start + 2, len(lines)):
        cells = lines[i].split("|")
        if cells[1].strip().replace("**", "") == check.row or cells[1].strip().replace("**", "").startswith(
            (check.row + " (", check.row + ":")
        ):
            cell = cells[check.column + 1]
            found = list(module._NUMBER.finditer(cell))[check.part]
            digit = found.group(0)[-1]
            changed = found.group(0)[:-1] + str((int(digit) + 5) % 10)  # 5 units of its last place
            cells[check.column + 1] = cell[: found.start()] + changed + cell[found.end() :]
            lines[i] = "|".join(cells)
            return "".join(lines)
    raise AssertionError(f"no row {check.row!r}")


def _demo_report_from(text: str) -> dict[str, Any]:
    """A demo report that says what README's demo table and sentence say (for the edit test:
    whether the real command gives them is tests/test_demo.py's check)."""
    check = _module()
    rounds = []
    for r in check.DEMO_ROUNDS:
        cells = [
            c.strip()
            for c in next(line for line in text.splitlines() if line.startswith(f"| {r} |"))
            .strip("|")
            .split("|")
        ]
        rounds.append(
            {
                "round": r,
                "with_memory": {"success_rate": float(cells[1]), "mean_steps": float(cells[3])},
                "without_memory": {"success_rate": float(cells[2]), "mean_steps": float(cells[4])},
                "followed": float(cells[5].rstrip("%")) / 100,
            }
        )
    found = re.search(check._demo_prose()[0].pattern, " ".join(text.split()))
    assert found is not None
    late = {"with_memory": float(found[1]), "without_memory": float(found[2])}
    return {"by_round": {r["round"]: r for r in rounds}, "late": late}


@pytest.mark.slow
def test_every_checked_figure_of_readme_edited_alone_fails(
    tmp_path: Path, docs_eval: CommandRun | None
) -> None:
    """By construction: each figure a check names, edited by one digit, is the one reported."""
    check = _module()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    record = json.loads((ROOT / "bench" / "results" / "latest.json").read_text(encoding="utf-8"))
    sources = {"bench": check.bench_figures(record), "demo": _demo_report_from(readme)}
    checks = [*check._perf_checks(), *(c for c in check._demo_checks() if c.doc == "README.md")]
    if docs_eval is not None:
        done = docs_eval.result()
        assert done.returncode == 0, done.stderr[-2000:]
        sources["eval"] = json.loads(done.stdout)
        checks += check._readme_checks()
    shutil.copytree(ROOT / "bench" / "results", tmp_path / "bench" / "results")
    assert check.run_checks(checks, sources, ROOT) == []
    for c in checks:
        (tmp_path / "README.md").write_text(_edited(readme, c, check), encoding="utf-8")
        problems = check.run_checks(checks, sources, tmp_path)
        assert len(problems) == 1 and f"{c.row!r} column {c.column}" in problems[0], (c, problems)
    assert len(checks) >= 22 + 25


def test_a_figure_no_check_covers_fails() -> None:
    check = _module()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    checks = check._demo_checks()
    assert check.unchecked_figures(checks, ROOT) == []
    with_row = readme.replace("| 8 | ", "| 7 | 0.75 | 0.375 | 3.77 | 4.00 | 92% |\n| 8 | ", 1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "read_text", lambda self, **kw: with_row if self.name == "README.md" else readme)
        found = check.unchecked_figures(checks, ROOT)
    assert len(found) == 5 and all("'7' column" in line for line in found)


def test_an_edited_figure_of_a_sentence_fails(tmp_path: Path) -> None:
    check = _module()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sources = {"demo": _demo_report_from(readme)}
    prose = [p for p in check._demo_prose() if p.doc == "README.md"]
    assert check.run_prose(prose, sources, ROOT) == []
    quoted = f"{sources['demo']['late']['with_memory']:.2f}"
    assert readme.count(quoted + " tool calls") == 1
    (tmp_path / "README.md").write_text(readme.replace(quoted + " tool calls", "3.50 tool calls"))
    [problem] = check.run_prose(prose, sources, tmp_path)
    assert "late.with_memory is written 3.50" in problem


def test_the_recorded_run_is_checked_from_anywhere_and_a_missing_figure_is_one_line(tmp_path: Path) -> None:
    """`python bench/docs_check.py --only perf` runs by its path from any directory (the suite
    finds its checkout itself); a figure missing from the recorded run is named in one line, no
    traceback."""
    script = [sys.executable, str(ROOT / "bench" / "docs_check.py"), "--only", "perf"]

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*script, *args], cwd=tmp_path, capture_output=True, text=True, timeout=READY_LIMIT
        )

    held = check()
    assert held.returncode == 0 and held.stderr == "", held.stdout + held.stderr
    assert re.fullmatch(r"docs-check: (\d+) of \1 figures hold\n", held.stdout)
    record = json.loads((ROOT / "bench" / "results" / "latest.json").read_text(encoding="utf-8"))
    del record["api_search_rps_8"]
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "latest.json").write_text(json.dumps(record), encoding="utf-8")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")  # the search table is docs/performance.md's
    missing = check("--root", str(tmp_path))
    assert missing.returncode == 1 and missing.stderr == ""
    *problems, summary = missing.stdout.splitlines()
    lacks = "bench/results/latest.json has no figure 'api_search_rps_8'"
    assert problems == [f"README.md: 'HTTP search, 8 clients' column 1: {lacks}"]
    assert summary.startswith("docs-check: ") and summary.endswith(" figures hold")
