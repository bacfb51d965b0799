"""The README's quickstart runs as printed, and its picture is what the script draws."""

from __future__ import annotations

import os
import re
import runpy
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowmem.cli import app

ROOT = Path(__file__).resolve().parents[1]


def quickstart() -> tuple[str, list[list[str]]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quickstart") : text.index("## What it does")]
    [code] = re.findall(r"```python\n(.*?)```", section, re.S)
    [shell] = re.findall(r"```bash\n(.*?)```", section, re.S)
    return code, [shlex.split(line, comments=True) for line in shell.strip().splitlines()]


def test_the_quickstart_runs_as_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, commands = quickstart()
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("FLOWMEM_")]:
        monkeypatch.delenv(key)
    script = tmp_path / "quickstart.py"
    script.write_text(code)
    runpy.run_path(str(script))
    assert (tmp_path / ".flowmem" / "db").is_dir()
    outputs = []
    for command in commands:
        assert command[0] == ".venv/bin/flowmem"
        result = CliRunner().invoke(app, command[1:])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    assert "1 new versions (1 new workflows), 0 pitfalls in them (0 checkable)" in outputs[0]
    assert "forward_email" in outputs[1] and 'email_id="{email_id}"' in outputs[1]


def test_the_pipeline_picture_is_what_its_script_draws() -> None:
    drawn = runpy.run_path(str(ROOT / "docs" / "img" / "pipeline.py"))["svg"]()
    assert (ROOT / "docs" / "img" / "pipeline.svg").read_text() == drawn
