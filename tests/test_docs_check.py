"""The docs check: README's results table holds the figures `bench/eval_sets.py` measures, and
an edited figure is caught."""

from __future__ import annotations

import functools
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import READY_LIMIT, WORKBENCH, foreground_tree

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not WORKBENCH.exists(), reason="needs ../shared/data")


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("docs_check", ROOT / "bench" / "docs_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_check"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


def test_readme_figures_hold_and_an_edited_one_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], docs_eval: subprocess.Popen[str] | None
) -> None:
    check = _module()

    @functools.cache
    def runner(args: tuple[str, ...]) -> Any:
        # The session started this very command (tests/conftest.py): its output, once done.
        if docs_eval is not None and args[0] == "bench/eval_sets.py":
            foreground_tree(docs_eval.pid)  # waited for now: at full priority
            stdout, stderr = docs_eval.communicate(timeout=READY_LIMIT)
            assert docs_eval.returncode == 0, stderr[-2000:]
            return json.loads(stdout)
        return check._json_of(list(args))

    def run(*argv: str) -> int:
        return int(check.main(["--only", "readme", *argv], runner=lambda args: runner(tuple(args))))

    assert run() == 0
    assert "of 30 figures hold" in capsys.readouterr().out
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    text = (tmp_path / "README.md").read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("| utility_rate |"))
    cells = line.split("|")
    cells[2] = " 0.999 "  # WorkBench flowmem's utility, edited
    (tmp_path / "README.md").write_text(text.replace(line, "|".join(cells)), encoding="utf-8")
    assert run("--root", str(tmp_path)) == 1
    out = capsys.readouterr().out
    assert "'utility_rate' column 1 says '0.999'" in out and "29 of 30 figures hold" in out
