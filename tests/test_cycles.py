"""No hidden import cycles: a late import or a `TYPE_CHECKING` import must not stand where a
top-level import would close a cycle, and the `storage-leaves` contract reports the storage
cycle if it comes back (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.processes import LINT_IMPORTS, copy_package, lint_imports

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "flowmem"


def _module_names() -> dict[str, Path]:
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


MODULES = _module_names()


def _targets(node: ast.Import | ast.ImportFrom, here: str) -> set[str]:
    """The flowmem modules an import statement in module `here` loads: `from p import m` loads
    `p.m` when that is a module, else `p` (a name from its `__init__`)."""
    if isinstance(node, ast.Import):
        found = {a.name for a in node.names}
    else:
        base = node.module or ""
        if node.level:
            package = here if MODULES[here].name == "__init__.py" else here.rpartition(".")[0]
            for _ in range(node.level - 1):
                package = package.rpartition(".")[0]
            base = f"{package}.{base}" if base else package
        found = {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return found & MODULES.keys()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(here: str) -> tuple[set[str], set[str]]:
    """(loaded when the module is, loaded later or never): the flowmem modules a module
    imports at its top (class bodies and `try` blocks included), and those it imports inside
    a function or under `if TYPE_CHECKING:`."""
    top: set[str] = set()
    late: set[str] = set()

    def visit(nodes: list[ast.stmt] | list[ast.AST], deferred: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                (late if deferred else top).update(_targets(node, here))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(list(ast.iter_child_nodes(node)), True)
            elif isinstance(node, ast.If) and _is_type_checking(node):
                visit(list(node.body), True)
                visit(list(node.orelse), deferred)
            else:
                visit(list(ast.iter_child_nodes(node)), deferred)

    visit(list(ast.parse(MODULES[here].read_text()).body), False)
    return top, late


IMPORTS = {name: _imports(name) for name in MODULES}


def _reached(start: str) -> set[str]:
    """Every flowmem module that importing `start` loads through top-level imports."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in IMPORTS[todo.pop()][0] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_no_late_import_hides_a_cycle() -> None:
    hidden = [
        f"{here} -> {target}"
        for here, (_, late) in IMPORTS.items()
        for target in sorted(late)
        if target == here or here in _reached(target)
    ]
    assert hidden == []


def test_the_store_migrates_through_a_top_level_import() -> None:
    top, late = IMPORTS["flowmem.storage.base"]
    assert "flowmem.storage.migrations" in top
    assert "flowmem.storage.migrations" not in late
    assert "flowmem.storage.base" not in _reached("flowmem.storage.migrations")


def test_the_legomem_roles_and_the_procedure_api_do_not_import_the_memory() -> None:
    for name in ("flowmem.agents.legomem", "flowmem.agents.procedures"):
        top, late = IMPORTS[name]
        assert "flowmem.agents.memory" not in top | late, name
        assert "flowmem.agents.memory" not in _reached(name), name


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    return copy_package(ROOT, tmp_path)


CONTRACT = "storage: the connection migrates, the migrations use only the leaves (no cycle)"


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (make setup)")
def test_the_storage_contract_reports_the_cycle_coming_back(package_copy: Path) -> None:
    clean = lint_imports(package_copy)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert f"{CONTRACT} KEPT" in clean.stdout

    # The migrations reaching up to the store's plumbing again, and a leaf reaching up to
    # the migrations: each is reported.
    for module, line in [
        ("storage/migrations.py", "from flowmem.storage.base import StoreBase"),
        ("storage/errors.py", "import flowmem.storage.migrations"),
    ]:
        path = package_copy / "flowmem" / module
        path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    broken = lint_imports(package_copy)
    assert broken.returncode != 0
    assert f"{CONTRACT} BROKEN" in broken.stdout
    assert "flowmem.storage.migrations is not allowed to import flowmem.storage.base" in broken.stdout
    assert "flowmem.storage.errors is not allowed to import flowmem.storage.migrations" in broken.stdout
