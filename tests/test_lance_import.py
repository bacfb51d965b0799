"""`storage.lance_import`: LanceDB without the REST client's API modules, and that package
whole once something asks it for a name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import pytest

from flowmem.storage.lance_import import _defer_init

ROOT = Path(__file__).resolve().parents[1]

STORE_END_TO_END = """
import sys
from flowmem.settings import Settings
from flowmem.jobs.factories import store_from
from flowmem.agents import WorkflowMemory
from flowmem.models import InductionRun
from tests.factories import forward, make_workflow

settings = Settings(db=sys.argv[1])
store = store_from(settings)
store.insert_trajectories([forward(i) for i in range(3)])
w = make_workflow("forward_latest")
store.commit_run(InductionRun(id="r1"), [w], keys={w.id: store.embedder.embed(["forward the latest mail"])})
with WorkflowMemory(settings) as memory:
    hits = memory.search("forward the latest mail to ana")
    with memory.record("forward the latest mail to ana", id="recorded-1") as run:
        run.step("mail.search", {"query": "latest"}, observation="e1")
    assert memory.flush(60)
assert len(store.get_trajectories(["recorded-1"])) == 1
assert [h.workflow.id for h in hits] == ["forward_latest"], hits
assert len(store.get_trajectories([forward(0).id])) == 1
api = sorted(m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api."))
print("api before:", api)
import lance_namespace_urllib3_client as client
version = client.__version__  # a dunder the __init__ sets is a name asked too
print("asked:", client.TableApi.__name__, client.ApiClient.__name__, version)
print("api after:", len([m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api.")]))
try:
    client.no_such_name
except AttributeError as err:
    print("missing:", err)
"""


def _python(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_store_is_used_end_to_end_without_the_rest_api_modules(tmp_path: Path) -> None:
    out = _python(STORE_END_TO_END, str(tmp_path / "db")).splitlines()
    assert out[0] == "api before: []"
    # Asked for a name, the package runs its own __init__: every API is there, as imported plainly.
    assert out[1].startswith("asked: TableApi ApiClient ")
    assert int(out[2].removeprefix("api after: ")) >= 5
    assert out[3] == "missing: module 'lance_namespace_urllib3_client' has no attribute 'no_such_name'"


def test_a_package_imported_before_is_left_as_it_is() -> None:
    script = """
import lance_namespace_urllib3_client as before
from flowmem.storage.lance_import import load_lancedb
load_lancedb()
import sys
print(sys.modules["lance_namespace_urllib3_client"] is before, "__getattr__" in vars(before))
"""
    assert _python(script).split() == ["True", "False"]


def _deferred(root: Path, monkeypatch: pytest.MonkeyPatch, name: str, init: str) -> ModuleType:
    """A package `name` with this `__init__` and a `models` submodule, put in place deferred;
    the marks its `__init__` makes (`_runs`) start empty."""
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(textwrap.dedent(init))
    (root / name / "models.py").write_text("MODEL = 'model'\n")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delitem(sys.modules, f"{name}.models", raising=False)
    monkeypatch.setenv("DEFERRED_INIT_RUNS", "")
    _defer_init(name)
    return sys.modules[name]


def _runs() -> str:
    """What the fake package's `__init__` has marked: an "x" a run."""
    return os.environ["DEFERRED_INIT_RUNS"]


def test_the_deferred_init_runs_once_on_the_first_name_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "flowmem_deferred_pkg"
    module = _deferred(
        tmp_path, monkeypatch, name, "import os\nos.environ['DEFERRED_INIT_RUNS'] += 'x'\nAPI = 'api'\n"
    )
    from flowmem_deferred_pkg.models import MODEL  # type: ignore[import-not-found]

    assert MODEL == "model" and _runs() == ""  # a submodule imports; the __init__ has not run
    assert module.API == "api" and _runs() == "x"
    assert module.API == "api" and module.__name__ == name and _runs() == "x"  # once
    assert "__getattr__" not in vars(module)
    with pytest.raises(AttributeError, match="no attribute 'other'"):
        _ = module.other
    _defer_init(name)  # already imported: left alone
    assert sys.modules[name] is module


def test_an_init_that_fails_fails_again_when_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _deferred(
        tmp_path, monkeypatch, "flowmem_failing_pkg", "raise ImportError('its dependency is missing')\n"
    )
    for _ in range(2):
        with pytest.raises(ImportError, match="its dependency is missing"):
            _ = module.API


def test_nothing_is_put_in_place_of_a_module_that_is_not_a_package_or_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("flowmem_no_such_package", "textwrap"):
        before = sys.modules.get(name)
        monkeypatch.delitem(sys.modules, name, raising=False)
        _defer_init(name)
        assert name not in sys.modules
        if before is not None:
            sys.modules[name] = before


def test_threads_asking_at_once_run_the_init_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "flowmem_raced_pkg"
    init = "import os, time\ntime.sleep(0.2)\nos.environ['DEFERRED_INIT_RUNS'] += 'x'\nAPI = 'api'\n"
    module = _deferred(tmp_path, monkeypatch, name, init)
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda _: module.API, range(8)))
    assert found == ["api"] * 8 and _runs() == "x"
