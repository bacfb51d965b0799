"""The dashboard's trace and run pages in headless Chromium (tests/browser.py): the trace tree of
an orchestrator's run, an induction run's changes and the rollback preview, on the demo's store
and on a store induced from a WorkBench slice (when ../shared/data holds it); no console error,
no failed request; a screenshot of each page in tests/screenshots/ with FLOWMEM_TEST_SCREENSHOTS
set."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.jobs.factories import store_from
from flowmem.server.dashboard.traces import RUNS_PAGE_SIZE
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.browser import CHROMIUM, Watched, serving, watched_page
from tests.factories import DASHBOARD_TOKEN as TOKEN
from tests.factories import WORKBENCH, DemoTraces, Seeded

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
    pytest.mark.slow,
    pytest.mark.xdist_group("dashboard"),  # the seeds they share, built once
]


@pytest.fixture(scope="module")
def browser(chromium_browser: Any) -> Any:
    """The session's chromium (tests/conftest.py); each test opens a context of its own."""
    return chromium_browser


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory, demo_traces_seed: DemoTraces
) -> Iterator[tuple[DemoTraces, str]]:
    seeded = demo_traces_seed.copied(
        Settings(db=str(tmp_path_factory.mktemp("demo") / "db"), api_token=TOKEN)
    )
    with serving(seeded.settings) as base:
        yield seeded, base


@pytest.fixture(scope="module")
def workbench(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Seeded, str]]:
    if not WORKBENCH.exists():
        pytest.skip(f"no WorkBench data at {WORKBENCH}")
    dashboard_seed: Seeded = request.getfixturevalue("dashboard_seed")  # built only with the data
    seeded = dashboard_seed.copied(Settings(db=str(tmp_path_factory.mktemp("wb") / "db"), api_token=TOKEN))
    with serving(seeded.settings) as base:
        yield seeded, base


def _page(browser: Any, base: str) -> Iterator[Watched]:
    with watched_page(browser, base) as page:
        yield page


@pytest.fixture
def on_demo(browser: Any, demo: tuple[DemoTraces, str]) -> Iterator[Watched]:
    yield from _page(browser, demo[1])


@pytest.fixture
def on_workbench(browser: Any, workbench: tuple[Seeded, str]) -> Iterator[Watched]:
    yield from _page(browser, workbench[1])


def _texts(page: Watched, selector: str, attribute: str) -> list[str]:
    return [str(e.get_attribute(attribute)) for e in page.page.locator(selector).all()]


def test_the_runs_table_filters_to_an_orchestrator_whose_tree_links_its_subtask_runs(
    on_demo: Watched, demo: tuple[DemoTraces, str]
) -> None:
    seeded, _ = demo
    store, page = seeded.store, on_demo.page
    children = sorted(
        (t for t in store.list_trajectories(limit=None) if t.parent_id == seeded.orchestrator),
        key=lambda t: (t.created_at, t.id),
    )
    orchestrator = store.get_trajectory(seeded.orchestrator)
    on_demo.visit("/trajectories", "traces-runs")
    page.select_option("select[name=agent]", "orchestrator")
    page.select_option("select[name=success]", "true" if orchestrator.success else "false")
    page.click("#run-filters button")
    page.wait_for_url("**/trajectories?**agent=orchestrator**")
    on_demo.shot("traces-runs-filtered")
    agents = page.locator("#runs tbody tr td:nth-child(3)").all_inner_texts()
    assert agents and set(agents) == {"orchestrator"}
    page.click(f"#runs a[href='/trajectories/{seeded.orchestrator}']")
    page.wait_for_url(f"**/trajectories/{seeded.orchestrator}")
    tree = _texts(on_demo, "#tree li[data-run]", "data-run")
    assert tree == [seeded.orchestrator, *[t.id for t in children]]
    on_demo.shot("traces-tree-orchestrator")
    last = children[-1]
    page.click(f"#tree a[href='/trajectories/{last.id}']")
    page.wait_for_url(f"**/trajectories/{last.id}")
    assert page.locator("#tree li.current").get_attribute("data-run") == last.id
    assert page.locator("#parent").get_attribute("href") == f"/trajectories/{seeded.orchestrator}"
    node = page.locator(f"#tree li[data-run='{last.id}'] > details")
    node.locator("summary").click()  # unfold the subtask run's steps
    steps = node.locator("ol.steps li code.action")
    assert steps.all_inner_texts() == [s.action for s in last.steps] and steps.first.is_visible()
    on_demo.shot("traces-tree-subtask")
    assert on_demo.problems == []


def _changes(page: Watched) -> dict[str, set[tuple[str, int]]]:
    """Each section of an induction run's page: the (workflow, version) of its version links."""
    found: dict[str, set[tuple[str, int]]] = {}
    for section in ("created", "changed", "retired"):
        links = _texts(page, f"#{section} a[href*='?version=']", "href")
        found[section] = {
            (h.split("/workflows/")[1].split("?")[0], int(h.split("version=")[1])) for h in links
        }
    return found


def _made_by(store: Store, run_id: str) -> set[tuple[str, int]]:
    return {
        (v.id, v.version)
        for w in store.list_workflows()
        for v in store.history(w.id)
        if v.provenance.run_id == run_id
    }


def _check_run_page(page: Watched, store: Store, run_id: str, shot: str) -> dict[str, set[tuple[str, int]]]:
    page.visit("/runs", f"{shot}-runs")
    page.page.click(f"li[id='{run_id}'] a[href='/runs/{run_id}']")
    page.page.wait_for_url(f"**/runs/{run_id}")
    page.shot(shot)
    found = _changes(page)
    made = _made_by(store, run_id)
    assert found["created"] | found["changed"] == made
    assert all(v == 1 for _, v in found["created"]) and all(v > 1 for _, v in found["changed"])
    run = store.get_run(run_id)
    assert found["retired"] == {(w, v) for w, v, _ in run.state.retired}
    return found


def test_an_induction_runs_page_shows_what_it_created_changed_and_retired(
    on_demo: Watched, demo: tuple[DemoTraces, str]
) -> None:
    seeded, _ = demo
    found = _check_run_page(on_demo, seeded.store, seeded.runs[-1], "traces-run-demo")
    assert found["created"] and found["changed"] and found["retired"]
    wid, version = sorted(found["changed"])[0]
    on_demo.page.click(f"#changed a.diff[href^='/workflows/{wid}/diff']")
    on_demo.page.wait_for_url(f"**/workflows/{wid}/diff?old={version - 1}&new={version}")
    on_demo.shot("traces-run-demo-diff")
    on_demo.page.go_back()
    on_demo.page.click("#retired a[href^='/workflows/']")
    on_demo.page.wait_for_url("**/workflows/**?version=*")
    assert on_demo.problems == []


def _preview_then_roll_back(page: Watched, store: Store, run_id: str, shot: str) -> set[tuple[str, int]]:
    """Open the run's rollback confirmation from its page, read the preview, confirm; returns the
    preview's versions, checked against what left the table."""
    before = {(v.id, v.version) for w in store.list_workflows() for v in store.history(w.id)}
    page.page.goto(f"{page.base}/runs/{run_id}")
    page.page.click("a.button.danger")
    page.page.wait_for_url(f"**/runs/{run_id}/rollback")
    page.shot(f"{shot}-preview")
    rows = page.page.locator("#removed li").all()
    leaving = {
        (str(r.get_attribute("data-workflow")), int(str(r.get_attribute("data-version")))) for r in rows
    }
    restored = page.page.locator("#restored li").all()
    served_again = {
        (str(r.get_attribute("data-workflow")), int(str(r.get_attribute("data-version")))) for r in restored
    }
    page.page.fill("input[name=token]", TOKEN)
    page.page.fill("input[name=note]", "checked the preview")
    page.page.click("button.danger")
    page.page.wait_for_url("**/runs?done=**")
    page.shot(f"{shot}-done")
    after = {(v.id, v.version): v.status for w in store.list_workflows() for v in store.history(w.id)}
    assert leaving and leaving == before - after.keys()
    assert store.list_runs()[-1].rolled_back_run == run_id
    run = store.get_run(run_id)
    assert served_again == {(w, v) for w, v, _ in run.state.retired}
    assert all(after[k] != "retired" for k in served_again)
    return leaving


def test_the_rollback_preview_lists_what_the_rollback_then_changes(
    browser: Any, demo: tuple[DemoTraces, str], tmp_path: Path
) -> None:
    seeded, _ = demo
    shutil.copytree(seeded.settings.db, tmp_path / "db")  # the other tests keep the store unrolled
    settings = Settings.model_validate({**seeded.settings.model_dump(), "db": str(tmp_path / "db")})
    store, run_id = store_from(settings), seeded.runs[-1]
    made = _made_by(store, run_id)
    with serving(settings) as base, watched_page(browser, base) as page:
        leaving = _preview_then_roll_back(page, store, run_id, "traces-rollback-demo")
        assert leaving == made  # the last run's versions, and nothing else
        page.visit(f"/runs/{run_id}", "traces-run-demo-undone")
        assert "Rolled back by" in page.page.locator("#undone").inner_text()
        page.page.click("#undone a")
        page.page.wait_for_url("**/runs/rollback-*")
        page.shot("traces-rollback-demo-run")
        assert page.page.locator("#left li").count() == len(leaving)
        assert page.problems == []


def test_a_workbench_slice_shows_its_runs_run_changes_and_rollback_preview(
    on_workbench: Watched, workbench: tuple[Seeded, str]
) -> None:
    seeded, _ = workbench
    store = seeded.store
    on_workbench.visit(f"/trajectories?workflow={seeded.served}", "traces-runs-workbench")
    served = {
        t.id
        for t in store.list_trajectories(limit=None)
        if any(r.id == seeded.served for r in t.workflows_used)
    }
    listed = set(on_workbench.page.locator("#runs tbody small.id").all_inner_texts())
    assert served and listed <= served and len(listed) == min(len(served), RUNS_PAGE_SIZE)
    on_workbench.page.click("#runs tbody a[href^='/trajectories/']")
    on_workbench.page.wait_for_url("**/trajectories/**")
    on_workbench.shot("traces-run-workbench")
    found = _check_run_page(on_workbench, store, seeded.runs[1], "traces-induction-workbench")
    assert (seeded.revised, 2) in found["changed"]
    leaving = _preview_then_roll_back(on_workbench, store, seeded.runs[1], "traces-rollback-workbench")
    assert (seeded.revised, 2) in leaving
    assert on_workbench.problems == []
