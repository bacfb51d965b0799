"""The architecture as a contract: layers checked by import-linter, what an agent process
loads, where modules live (docs/ARCHITECTURE.md); how complex a function grows is
tests/test_complexity.py's."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest

from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings
from tests.processes import LINT_IMPORTS, READY_LIMIT, copy_package, lint_imports

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "flowmem"

TOP_LEVEL = {"__init__.py", "settings.py", "models.py", "lazy.py", "docstrings.py"}
"""The only modules at the top of the package: the public API, the one configuration, the domain,
the leaf that imports a package's public names when first used, and the leaf below the models
that reads their field descriptions when a schema is made."""

AGENT_FORBIDDEN = ("prefect", "dask", "distributed", "hdbscan", "sklearn", "scipy", "fastapi", "rich")
"""What an agent process must not import: the scheduler and its Dask cluster, the clustering, the
servers, the CLI."""


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    return copy_package(ROOT, tmp_path)


def _contracts() -> list[dict[str, Any]]:
    contracts: list[dict[str, Any]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
        "importlinter"
    ]["contracts"]
    return contracts


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (make setup)")
def test_the_layer_contract_holds_and_fails_on_a_violation(package_copy: Path) -> None:
    clean = lint_imports(package_copy)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert f"{len(_contracts())} kept, 0 broken" in clean.stdout

    # The core reaching up to an adapter, an adapter reaching up to a use case, the store
    # reaching sideways to a provider, and the core reaching up to each driver (the command
    # line, the flows, the servers, the simulated office): each is reported.
    planted = [
        ("policy/usage.py", "flowmem.storage"),
        ("storage/rows.py", "flowmem.jobs.ingest"),
        ("storage/base.py", "flowmem.providers.openai"),
        ("retrieval/serving.py", "flowmem.cli.malloc_arenas"),
        ("induction/render/diff.py", "flowmem.flows.pipeline"),
        ("policy/scrub.py", "flowmem.server.api"),
        ("induction/inducers/rule.py", "flowmem.demo"),
    ]
    for module, imported in planted:
        path = package_copy / "flowmem" / module
        path.write_text(path.read_text() + f"\nimport {imported}  # noqa\n")
    broken = lint_imports(package_copy)
    assert broken.returncode != 0
    # One line per pair of layers, e.g. "flowmem.policy is not allowed to import flowmem.cli".
    expected = [
        f"flowmem.{module.split('/')[0]} is not allowed to import {'.'.join(imported.split('.')[:2])}"
        for module, imported in planted
    ]
    assert [line for line in expected if line not in broken.stdout] == []


def test_every_module_of_the_package_is_in_a_layer() -> None:
    """Only `TOP_LEVEL` sits outside the layers: every other module and subpackage of
    `flowmem` is named in the layer contract, so that its imports are checked."""
    (layers,) = [c["layers"] for c in _contracts() if c["id"] == "layers"]
    layered = {name.strip() for layer in layers for name in re.split(r"[:|]", layer)}
    children = {p.stem for p in PACKAGE.glob("*.py") if p.name not in TOP_LEVEL}
    children |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert children - layered == set()


def test_an_agent_process_loads_no_scheduler_clustering_server_or_cli(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "db"))
    store = store_from(settings)
    store_trajectories(store, simulate(60, seed=3), settings.scrub)
    assert run_induction(store, settings, RuleInducer(), namespace=settings.namespace).versions
    before = store.count_trajectories(namespace=settings.namespace)
    task = simulate(1, seed=4)[0].task
    script = textwrap.dedent(
        f"""
        import json, sys
        import flowmem.agents
        from flowmem import Settings, WorkflowMemory

        memory = WorkflowMemory.open(Settings(db={settings.db!r}))
        hits = memory.search({task!r}, k=3)
        with memory.record({task!r}) as run:
            run.step("mail.search", {{"query": "x"}}, observation="nothing")
            run.finish(success=True)
        assert memory.flush(timeout={READY_LIMIT})
        memory.close()
        loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({list(AGENT_FORBIDDEN)!r}))
        print(json.dumps({{"hits": len(hits), "loaded": loaded}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=READY_LIMIT)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["loaded"] == [] and 1 <= result["hits"] <= 3  # k is a maximum
    assert store.count_trajectories(namespace=settings.namespace) == before + 1


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_modules_live_in_their_layer() -> None:
    top = {p.name for p in PACKAGE.glob("*.py")}
    assert top <= TOP_LEVEL


def test_every_module_says_first_what_it_is_for() -> None:
    """Of the package and of the benchmark suite beside it."""
    missing = []
    for path in [*_modules(), *sorted((ROOT / "bench").glob("*.py"))]:
        tree = ast.parse(path.read_text())
        doc = ast.get_docstring(tree)
        first = tree.body[0] if tree.body else None
        is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        if not doc or not is_doc or len(doc.splitlines()[0]) < 10:
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []


def _imports(path: Path) -> set[str]:
    """The top-level names of what a module imports (at its top or inside a function)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_the_wheel_ships_the_package_only() -> None:
    """Issue 40: the benchmark suite (bench/), the tests and the examples stay in the checkout.
    pyproject.toml's package discovery finds flowmem and its subpackages only, and no module of
    flowmem imports the suite, which an installed wheel lacks."""
    from setuptools import find_namespace_packages  # type: ignore[import-untyped]  # `packages.find`

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    found = find_namespace_packages(str(ROOT), include=config["include"], exclude=config.get("exclude", ()))
    assert "flowmem" in found and "flowmem.cli" in found
    assert [p for p in found if p != "flowmem" and not p.startswith("flowmem.")] == []
    assert list(PACKAGE.glob("bench/*.py")) == []  # (a checkout may keep its old __pycache__ there)
    assert [str(p.relative_to(ROOT)) for p in _modules() if {"bench", "tests"} & _imports(p)] == []
