"""The tests' own layout: a test module is read on its own. What several modules share lives in
helper modules (tests/factories.py, tests/inmemory.py, tests/malformed.py, tests/processes.py,
tests/prefect_servers.py, tests/llm_stub.py) or in tests/conftest.py's fixtures, none of which
imports a test module; no module imports tests/conftest.py (pytest loads it)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


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
            if parts[1] == "conftest" or parts[1].startswith("test_"):
                found.append(f"{path.relative_to(TESTS)} imports {name}")
    assert found == []


PROCESS_FIXTURES = {"prefect_harness", "harness_server", "chromium_browser", "coexist_server", "launched"}
PROCESS_FIXTURES |= {"prefect_demo", "demo_json", "temporary_server_demo", "serve_schedule", "bench_run"}
PROCESS_FIXTURES |= {"docs_eval", "determinism_children", "concurrency_writers", "concurrency_inducers"}
"""The fixtures (tests/conftest.py's, or a module's own) that run a server or a command in a
process of its own, or a browser."""


def _marks(decorators: list[ast.expr]) -> str:
    return " ".join(ast.unparse(d) for d in decorators)


def unmarked_end_to_end(path: Path, processes: set[str]) -> list[str]:
    """The tests of `path` that use a process fixture (as a parameter, through one of the
    module's fixtures, or by the module's `usefixtures`) without the `slow` mark."""
    tree = ast.parse(path.read_text())
    module_marks = " ".join(
        ast.unparse(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets)
    )
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    params = {f.name: {a.arg for a in f.args.args} for f in functions}
    fixtures = {f.name for f in functions if "fixture" in _marks(f.decorator_list)}
    found = []
    for f in functions:
        if not f.name.startswith("test_"):
            continue
        used = params[f.name] | {n for p in params[f.name] & fixtures for n in params[p]}
        uses = bool(used & processes) or any(f'"{name}"' in module_marks for name in processes)
        if uses and "slow" not in _marks(f.decorator_list) + module_marks:
            found.append(f"{path.name}::{f.name}")
    return found


def test_end_to_end_tests_are_marked_slow(tmp_path: Path) -> None:
    """A test that waits for a server or a command in a process of its own is end to end: marked
    `slow` (`pytest -m "not slow"` leaves them out; `make test` runs every test)."""
    paths = sorted(TESTS.glob("test_*.py"))
    found = [name for path in paths for name in unmarked_end_to_end(path, PROCESS_FIXTURES)]
    assert found == []
    planted = tmp_path / "test_planted.py"
    planted.write_text(
        "import pytest\n\n@pytest.fixture\ndef server(coexist_server): ...\n\n"
        "def test_direct(bench_run): ...\n\ndef test_through(server): ...\n\n"
        "@pytest.mark.slow\ndef test_marked(server): ...\n"
    )
    assert unmarked_end_to_end(planted, PROCESS_FIXTURES) == [
        "test_planted.py::test_direct",
        "test_planted.py::test_through",
    ]
