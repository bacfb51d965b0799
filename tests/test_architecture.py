"""The architecture as a contract: layers checked by import-linter, what an agent process
loads, where modules live (docs/ARCHITECTURE.md); how complex a function grows is
tests/test_complexity.py's."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flowmem.induction.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import induce
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings
from flowmem.sim import simulate
from tests.conftest import READY_LIMIT

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "flowmem"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

TOP_LEVEL = {"__init__.py", "settings.py", "models.py"}
"""The modules allowed at the top of the package besides the `cli*` ones."""

AGENT_FORBIDDEN = ("prefect", "hdbscan", "sklearn", "scipy", "fastapi", "rich")
"""What an agent process must not import: the scheduler, the clustering, the servers, the CLI."""


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    # The copy comes first on the path, so the contracts are checked against it, not against
    # the installed package.
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": str(Path(sys.executable).parent)},
        capture_output=True,
        text=True,
        timeout=READY_LIMIT,
    )


@pytest.fixture
def package_copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(PACKAGE, tree / "flowmem", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (make setup)")
def test_the_layer_contract_holds_and_fails_on_a_violation(package_copy: Path) -> None:
    clean = _lint_imports(package_copy)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "4 kept, 0 broken" in clean.stdout

    # The core reaching up to an adapter, an adapter reaching up to a use case, and the
    # store reaching sideways to a provider: each is reported.
    for module, imported in [
        ("policy/usage.py", "flowmem.storage"),
        ("storage/rows.py", "flowmem.jobs.ingest"),
        ("storage/base.py", "flowmem.providers.openai"),
    ]:
        path = package_copy / "flowmem" / module
        path.write_text(path.read_text() + f"\nimport {imported}  # noqa\n")
    broken = _lint_imports(package_copy)
    assert broken.returncode != 0
    assert "flowmem.policy is not allowed to import flowmem.storage" in broken.stdout
    assert "flowmem.storage is not allowed to import flowmem.jobs" in broken.stdout
    assert "flowmem.storage is not allowed to import flowmem.providers" in broken.stdout


def test_an_agent_process_loads_no_scheduler_clustering_server_or_cli(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "db"))
    store = store_from(settings)
    store_trajectories(store, simulate(60, seed=3), settings.scrub)
    assert induce(store, settings, RuleInducer(), namespace=settings.namespace).versions
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
    assert {name for name in top if not name.startswith("cli")} <= TOP_LEVEL


def test_every_module_says_first_what_it_is_for() -> None:
    missing = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        doc = ast.get_docstring(tree)
        first = tree.body[0] if tree.body else None
        is_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
        if not doc or not is_doc or len(doc.splitlines()[0]) < 10:
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []
