"""Finding workflows in the dashboard, in headless Chromium (Playwright's sync API) against
uvicorn on 127.0.0.1, on a store induced from a WorkBench slice and on the demo's store: every
home row is the version agents are served, as `flowmem workflows show` gives it; the search
box is `memory.context` for 5 tasks and says no workflow fits an unrelated one; the columns
sort. No console error and no failed request on the way; screenshots in tests/screenshots/
with FLOWMEM_TEST_SCREENSHOTS set.

Chromium is Debian's (`apt-get install chromium`); Playwright's own browser download is never
used. tests/test_dashboard_truth.py checks the same through TestClient.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.agents.memory import WorkflowMemory
from flowmem.agents.served_index import ServedIndex
from flowmem.demo.loop import run_loop
from flowmem.jobs.factories import store_from
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.browser import BROWSER_LIMIT_MS, CHROMIUM, serving
from tests.browser import Watched as PageWatch
from tests.factories import WORKBENCH, Seeded, copy_store

UNRELATED = "<script>alert(1)</script>"
"""A task like none of the stores' (the issue's example)."""

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
    pytest.mark.slow,
    pytest.mark.xdist_group("dashboard"),  # the seeds they share, built once
]


def _seed(request: pytest.FixtureRequest, kind: str, settings: Settings) -> Store:
    if kind == "workbench":
        if not WORKBENCH.exists():
            pytest.skip(f"no WorkBench data at {WORKBENCH}")
        dashboard_seed: Seeded = request.getfixturevalue("dashboard_seed")  # built only with the data
        return copy_store(dashboard_seed.settings, settings)
    run_loop(settings, rounds=4, tasks=20)  # the demo's loop, smaller: retired and trial versions
    return store_from(settings)


class Served:
    """A seeded store behind uvicorn in a thread."""

    def __init__(self, kind: str, settings: Settings, store: Store, base: str) -> None:
        self.kind, self.settings, self.store, self.base = kind, settings, store, base


@pytest.fixture(scope="module", params=["workbench", "demo"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    kind = str(request.param)
    settings = Settings(db=str(tmp_path_factory.mktemp(f"find-{kind}") / "db"))  # the default floor
    store = _seed(request, kind, settings)
    with serving(settings) as base:
        yield Served(kind, settings, store, base)


@pytest.fixture(scope="module")
def browser(chromium_browser: Any) -> Any:
    """The session's chromium (tests/conftest.py); each test opens a context of its own."""
    return chromium_browser


class Watched(PageWatch):
    """A page of one served store, with every console error, page error and failed request it
    saw; its screenshots are named after the store."""

    def __init__(self, page: Any, served: Served) -> None:
        super().__init__(page, served.base)
        self.served = served

    def shot(self, name: str) -> None:
        super().shot(f"find-{self.served.kind}-{name}")

    def rows(self) -> list[dict[str, Any]]:
        """The workflows table's rows as the browser shows them."""
        return list(
            self.page.eval_on_selector_all(
                "#workflows tbody tr[data-id]",
                """rows => rows.map(r => ({
                    id: r.dataset.id,
                    name: r.querySelector('td.name a').textContent,
                    status: r.querySelector('.status').textContent,
                    version: Number(r.querySelector('a.version').textContent.slice(1)),
                    served: Number(r.querySelector('td.served').textContent),
                    trial: r.querySelector('.trial') ? r.querySelector('.trial').textContent : null,
                }))""",
            )
        )


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(BROWSER_LIMIT_MS)  # Playwright's 30 s can pass on a loaded machine
    context.set_default_navigation_timeout(BROWSER_LIMIT_MS)
    yield Watched(context.new_page(), served)
    context.close()


def test_every_row_is_the_version_agents_are_served(page: Watched, served: Served) -> None:
    store, settings = served.store, served.settings
    page.visit("/?retired=true", "home-all")
    rows = {r["id"]: r for r in page.rows()}
    workflows = store.list_workflows()
    assert set(rows) == {w.id for w in workflows}
    serving: dict[str, list[Any]] = {}
    for w in ServedIndex.serving(store, settings.namespace, settings).served():
        serving.setdefault(w.id, []).append(w)
    for w in workflows:
        versions = serving.get(w.id, [])
        agents_get = next((v for v in versions if v.status == "active"), versions[0] if versions else None)
        # What `flowmem workflows show ID --version N` prints (it calls Store.get_workflow).
        expected = store.get_workflow(w.id, agents_get.version if agents_get else None)
        row = rows[w.id]
        assert (row["status"], row["version"], row["served"]) == (
            expected.status,
            expected.version,
            expected.stats.served,
        ), w.id
        trial = [v for v in versions if v is not agents_get]
        assert (row["trial"] or None) == (
            f"v{trial[0].version} candidate on trial, served {trial[0].stats.served}" if trial else None
        ), w.id
    page.visit("/", "home")
    assert all(r["status"] != "retired" for r in page.rows())
    retired = sum(r["status"] == "retired" for r in rows.values())
    assert page.page.locator("#hidden-retired").count() == (1 if retired else 0)


def _tasks(store: Store, memory: WorkflowMemory) -> list[str]:
    """Five tasks of the store's runs that are served workflows, the first of each workflow."""
    found: dict[str, str] = {}
    for t in sorted(store.list_trajectories(limit=None), key=lambda t: t.id):
        hits = memory.search(t.task)
        if hits and hits[0].workflow.id not in found and t.task not in found.values():
            found[hits[0].workflow.id] = t.task
        if len(found) == 5:
            break
    assert len(found) == 5
    return list(found.values())


def test_the_search_box_is_memory_context_for_5_tasks_and_nothing_for_an_unrelated_one(
    page: Watched, served: Served
) -> None:
    page.visit("/", "home")
    with WorkflowMemory(served.settings) as memory:
        for i, task in enumerate([*_tasks(served.store, memory), UNRELATED]):
            page.page.fill("input[name=q]", task)
            page.page.click("button[type=submit]")
            page.page.wait_for_load_state()
            page.shot(f"search-{i}")
            hits = page.page.eval_on_selector_all(
                "#search tbody tr[data-id]",
                "rows => rows.map(r => [r.dataset.id, Number(r.dataset.version)])",
            )
            expected = memory.search(task)
            assert hits == [[h.workflow.id, h.workflow.version] for h in expected], task
            listed = [r["id"] for r in page.rows()]
            assert sorted(listed) == sorted(h.workflow.id for h in expected), task
            if task == UNRELATED:
                assert memory.context(task) == "" and page.page.locator("#no-fit").is_visible()
                assert page.page.locator("#context").count() == 0
            else:
                assert page.page.locator("#context").text_content() == memory.context(task), task
                assert page.page.locator("#no-fit").count() == 0


def test_the_columns_sort_by_a_click(page: Watched, served: Served) -> None:
    page.visit("/?retired=true", "home-all")
    page.page.click("#workflows th a[data-sort=served]")
    page.page.wait_for_url("**sort=-served**")
    page.shot("sorted-served")
    served_desc = [r["served"] for r in page.rows()]
    assert served_desc == sorted(served_desc, reverse=True) and len(served_desc) > 1
    page.page.click("#workflows th a[data-sort=served]")
    page.page.wait_for_url("**sort=served**")
    assert [r["served"] for r in page.rows()] == sorted(served_desc)
    page.page.click("#workflows th a[data-sort=name]")
    page.page.wait_for_url("**sort=name**")
    page.shot("sorted-name")
    names = [r["name"] for r in page.rows()]
    assert names == sorted(names, key=lambda n: (n.lower(), n))
    assert page.page.locator("#workflows th[aria-sort=ascending] a[data-sort=name]").count() == 1
    assert page.page.locator("input[name=retired]").is_checked()  # the filter is kept
