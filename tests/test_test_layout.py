"""The tests' own layout: a test module is read on its own. What several modules share lives in
helper modules (tests/factories.py, tests/malformed.py, tests/processes.py, tests/llm_stub.py),
which import no test module either; no module imports tests/conftest.py (pytest loads it)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

CONFTEST_STARTS = {"tests.test_bench", "tests.test_demo", "tests.test_examples", "tests.test_concurrency"}
CONFTEST_STARTS |= {"tests.test_prefect_coexist"}
"""The test modules whose processes tests/conftest.py's session fixtures start ahead of their
tests (`AHEAD`): the one import of a test module outside one, each named here."""


def imported(path: Path) -> set[str]:
    """The modules `path` imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_imports_of(tmp_path: Path) -> None:
    """`imported` sees each form of import: at the top, in a function, a module by name."""
    path = tmp_path / "m.py"
    path.write_text(
        "import tests.test_a as a\nfrom tests.test_b import x\ndef f():\n    from tests import test_c\n"
    )
    assert {"tests.test_a", "tests.test_b", "tests.test_c"} <= imported(path)


def test_no_module_of_the_tests_imports_a_test_module_or_the_conftest() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for name in imported(path):
            parts = name.split(".")
            if parts[0] != "tests" or len(parts) < 2:
                continue
            if parts[1] == "conftest" or (parts[1].startswith("test_") and path.name != "conftest.py"):
                found.append(f"{path.relative_to(TESTS)} imports {name}")
            elif parts[1].startswith("test_") and ".".join(parts[:2]) not in CONFTEST_STARTS:
                found.append(f"{path.relative_to(TESTS)} imports {name}")
    assert found == []
