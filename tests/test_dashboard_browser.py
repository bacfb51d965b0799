"""The dashboard in headless Chromium (Playwright's sync API) against uvicorn on 127.0.0.1.

Chromium is Debian's (`apt-get install chromium`); Playwright's own browser download is never
used. With FLOWMEM_TEST_SCREENSHOTS set, each page's screenshot goes to tests/screenshots/
(git-ignored) for a reviewer to look at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.settings import Settings
from tests.browser import BROWSER_LIMIT_MS, CHROMIUM, Watched, keep, serving
from tests.factories import DASHBOARD_TOKEN as TOKEN
from tests.factories import EXTRA, SCRIPT_TASK, Seeded

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
    pytest.mark.slow,
    pytest.mark.xdist_group("dashboard"),  # the seeds they share, built once
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, dashboard_seed: Seeded) -> Iterator[tuple[Seeded, str]]:
    """The seeded store behind uvicorn in a thread: (the seed, the base URL)."""
    seeded = dashboard_seed.copied(
        Settings(db=str(tmp_path_factory.mktemp("browser") / "db"), api_token=TOKEN)
    )
    with serving(seeded.settings) as base:
        yield seeded, base


@pytest.fixture(scope="module")
def browser(chromium_browser: Any) -> Any:
    """The session's chromium (tests/conftest.py); each test opens a context of its own."""
    return chromium_browser


@pytest.fixture
def page(browser: Any, served: tuple[Seeded, str]) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(BROWSER_LIMIT_MS)  # Playwright's 30 s can pass on a loaded machine
    context.set_default_navigation_timeout(BROWSER_LIMIT_MS)
    yield Watched(context.new_page(), served[1])
    context.close()


def test_every_page_loads_clean_and_shows_the_seeded_workflows(
    page: Watched, served: tuple[Seeded, str]
) -> None:
    seeded, _ = served
    workflows = seeded.store.list_workflows()
    page.visit("/", "home")
    table = page.page.locator("#workflows").inner_text()
    assert all(w.id in table for w in workflows)
    w = next(w for w in workflows if w.id == seeded.served)
    page.visit(f"/workflows/{w.id}", "workflow")
    assert page.page.locator("mark.ph").count() >= len(w.placeholders) > 0
    assert page.page.locator("#pitfalls a[href^='/trajectories/']").count() > 0
    page.visit(f"/workflows/{seeded.revised}/history", "history")
    page.visit("/runs", "runs")
    assert all(page.page.locator(f"li[id='{r}']").count() == 1 for r in seeded.runs)
    page.visit("/learning", "learning")
    assert page.page.locator("#curve tbody tr").count() >= 2
    page.visit(f"/trajectories/{w.source_trajectory_ids[0]}", "trajectory")
    page.visit(f"/runs/{seeded.runs[1]}/rollback", "rollback-confirm")
    page.visit("/?q=delete+the+latest+email", "search")
    assert page.page.locator("#search tbody tr").count() >= 1
    page.visit("/clusters", "clusters")
    tasks = page.page.locator("svg circle title").all_text_contents()
    # One circle per task text of the agent shown (the one with the most runs, the first by
    # name on a tie): runs given the same task are one point.
    runs = seeded.store.list_trajectories(limit=None)
    counts = Counter(t.agent for t in runs)
    shown = min(counts, key=lambda a: (-counts[a], a))
    distinct = {t.task for t in runs if t.agent == shown}
    assert len(tasks) == len(distinct)
    # The task with a script tag is drawn as text when its agent is the one shown (without
    # ../shared/data the seed has several agents, and it may be another's).
    assert any(SCRIPT_TASK in t for t in tasks) == (SCRIPT_TASK in distinct)
    # The last circle of the cluster is drawn on top: a real click there lands on it.
    page.page.locator(f"svg a[href='/workflows/{seeded.revised}'] circle").last.click()
    page.page.wait_for_url(f"**/workflows/{seeded.revised}")
    assert page.problems == []


def test_a_phone_width_window_needs_no_sideways_scrolling(page: Watched) -> None:
    page.page.set_viewport_size({"width": 390, "height": 844})
    for path, shot in (("/", "home-phone"), ("/runs", "runs-phone"), ("/clusters", "clusters-phone")):
        page.visit(path, shot)
        assert page.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), path


def test_the_diff_of_two_versions_shows_the_added_step(page: Watched, served: tuple[Seeded, str]) -> None:
    seeded, _ = served
    page.visit(f"/workflows/{seeded.revised}/history", "history")
    page.page.select_option("select[name=old]", "1")
    page.page.select_option("select[name=new]", "2")
    page.page.click("text=Compare")
    page.page.wait_for_url("**/diff?**")
    keep(page.page, "diff")
    added = page.page.locator("#diff tr.added")
    assert added.count() == 1 and EXTRA.action in added.inner_text()
    assert page.problems == []


def test_a_script_in_a_task_renders_as_text(page: Watched, served: tuple[Seeded, str]) -> None:
    seeded, _ = served
    page.visit(f"/trajectories/{seeded.script_run}", "trajectory-script")
    assert page.page.locator("#task").inner_text() == SCRIPT_TASK
    assert page.page.evaluate("window.__xss") is None


def test_rollback_is_refused_without_the_token_and_changes_the_store_with_it(
    page: Watched, served: tuple[Seeded, str]
) -> None:
    seeded, _ = served
    store, run = seeded.store, seeded.runs[1]
    assert store.get_workflow(seeded.revised).version == 2
    page.visit("/runs", "runs")
    page.page.locator(f"li[id='{run}'] a.button").click()
    page.page.wait_for_url(f"**/runs/{run}/rollback")
    with page.page.expect_response(lambda r: r.request.method == "POST") as refused:
        page.page.click("button.danger")
    assert refused.value.status == 401 and "invalid token" in page.page.locator(".error").inner_text()
    assert store.get_workflow(seeded.revised).version == 2 and store.list_runs()[-1].id == run
    page.problems.clear()  # the refusal's 401 is expected
    page.visit(f"/runs/{run}/rollback", "rollback-confirm")
    page.page.fill("input[name=token]", TOKEN)
    page.page.fill("input[name=note]", "drifted runs, <b>undo</b>")
    page.page.click("button.danger")
    page.page.wait_for_url("**/runs?done=**")
    keep(page.page, "rollback-done")
    assert "Rolled back" in page.page.locator("#result").inner_text()
    assert store.get_workflow(seeded.revised).version == 1
    assert (
        store.list_runs()[-1].rolled_back_run == run
        and store.list_runs()[-1].note == "drifted runs, <b>undo</b>"
    )
    assert page.page.locator(f"li[id='{run}'] .undone-note").count() == 1
    assert page.problems == []


BAD_PARAMETERS = (
    ("/?page=abc", 400, "page: not valid; expected a page number, from 1"),
    ("/?q=" + "x" * 2_001, 400, "q: not valid; expected a task of at most 2,000 characters"),
    ("/learning?by=week", 400, "by: not valid; expected run or day"),
    ("/?status=bogus", 400, "status: not valid; expected candidate, active, deprecated or retired"),
    ("/workflows/nope", 404, "no workflow 'nope'"),
    ("/nosuchpage", 404, "There is no page here."),
)
"""Bad requests to the dashboard, the status each gets and what its error page says
(`tests/test_dashboard_errors.py` walks every page's; these are what a browser shows)."""


def test_a_bad_parameter_shows_the_dashboards_own_error_page(
    page: Watched, served: tuple[Seeded, str]
) -> None:
    seeded, base = served
    for path, status, said in (
        *BAD_PARAMETERS,
        (f"/workflows/{seeded.revised}?version=abc", 400, "version:"),
    ):
        response = page.page.goto(base + path)
        assert response is not None and response.status == status, path
        assert response.headers["content-type"].startswith("text/html"), path
        assert page.page.locator("header a.brand").inner_text() == "flowmem", path
        assert page.page.locator("header nav a").count() == 5, path
        assert said in page.page.locator("main").inner_text(), path
        assert page.page.evaluate("getComputedStyle(document.querySelector('header')).display") == "flex", (
            path
        )
        keep(page.page, f"error-{status}-{len(page.problems)}")
        # The page's own status, which Chromium also logs, is all: no stylesheet or other
        # request failed, no script error.
        reason = "Bad Request" if status == 400 else "Not Found"
        assert page.problems == [
            f"HTTP {status}: {response.url}",
            f"console: Failed to load resource: the server responded with a status of {status} ({reason})",
        ], path
        page.problems.clear()


def test_a_right_to_left_override_in_the_query_leaves_the_heading_in_order(page: Watched) -> None:
    page.visit("/?q=%E2%80%AEdelete+the+latest+email", "search-rtl-override")
    heading = page.page.locator("#search h2")
    # The words after the query are laid out left to right, after it: the override stops at
    # the end of the <bdi> (without it, they would be reversed and drawn left of the query).
    after = heading.evaluate(
        "h => { const t = h.lastChild, r = document.createRange(); r.setStart(t, 1);"
        " r.setEnd(t, t.length); const b = r.getBoundingClientRect(); return [b.left, b.right]; }"
    )
    box = heading.locator("bdi").bounding_box()
    assert box is not None and after[0] >= box["x"] + box["width"] - 1 and after[1] > after[0]
    assert heading.inner_text().endswith("” is served")
