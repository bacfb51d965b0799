"""The dashboard's charts in headless Chromium (Playwright's sync API) against uvicorn on
127.0.0.1, over the demo office's runs of five agents: the cluster map of one agent at a time,
chosen from a menu, its clusters in distinct colours and noise apart, its legend of workflow
names; the learning curve's axes; no console error and no failed request on the way.

Chromium is Debian's (`apt-get install chromium`); Playwright's own browser download is never
used. With FLOWMEM_TEST_SCREENSHOTS set, each page's screenshot goes to tests/screenshots/
(git-ignored) for a reviewer to look at.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.server.dashboard.charts import NOISE
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.browser import BROWSER_LIMIT_MS, CHROMIUM, Watched, keep, serving
from tests.factories import copy_store

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)"),
    pytest.mark.slow,
    pytest.mark.xdist_group("charts"),  # the seed they share, built once
]

TEXT_INSIDE = """svg => {
  const box = svg.getBoundingClientRect();
  return [...svg.querySelectorAll('text')].filter(t => {
    const b = t.getBoundingClientRect();
    return b.left < box.left - 1 || b.right > box.right + 1
      || b.top < box.top - 1 || b.bottom > box.bottom + 1;
  }).map(t => t.textContent);
}"""
"""The texts of an SVG chart drawn (even partly) outside it: cut off on the page."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, charts_seed: Settings) -> Iterator[tuple[Store, str]]:
    """The demo office's store behind uvicorn in a thread: (the store, the base URL)."""
    settings = Settings(db=str(tmp_path_factory.mktemp("browser-charts") / "db"))
    store = copy_store(charts_seed, settings)
    with serving(settings) as base:
        yield store, base


@pytest.fixture
def page(served: tuple[Store, str], chromium_browser: Any) -> Iterator[tuple[Any, list[str]]]:
    """A Chromium page (in a context of its own, of the session's chromium: tests/conftest.py)
    and the console errors, page errors and failed requests it saw."""
    context = chromium_browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(BROWSER_LIMIT_MS)
    context.set_default_navigation_timeout(BROWSER_LIMIT_MS)
    watched = Watched(context.new_page(), served[1])
    yield watched.page, watched.problems
    context.close()


def _rgb(colour: str) -> str:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def test_the_cluster_map_shows_one_agent_at_a_time_in_distinct_colours(
    page: tuple[Any, list[str]], served: tuple[Store, str]
) -> None:
    tab, problems = page
    store, base = served
    counts: dict[str, int] = {}
    for t in store.list_trajectories(limit=None):
        counts[t.agent] = counts.get(t.agent, 0) + 1
    busiest = min(counts, key=lambda a: (-counts[a], a))  # ties: the first by name
    tab.goto(base + "/clusters")
    keep(tab, "charts-clusters")
    assert tab.locator("h1").inner_text() == f"Clusters of {busiest}"
    assert tab.locator("select[name=agent] option").count() == len(counts)
    for agent in ("calendar_agent", "email_agent"):
        tab.select_option("select[name=agent]", agent)
        tab.click("text=Show")
        tab.wait_for_url(f"**agent={agent}**")
        keep(tab, f"charts-clusters-{agent}")
        assert tab.locator("h1").inner_text() == f"Clusters of {agent}"
        assert f"{counts[agent]} of {counts[agent]} runs shown" in tab.locator("#shown").inner_text()
        fills = tab.locator("svg g.cluster").evaluate_all("gs => gs.map(g => getComputedStyle(g).fill)")
        assert len(fills) >= 3 and len(set(fills)) == len(fills), fills
        swatches = tab.locator("#legend li[data-cluster] .swatch").evaluate_all(
            "ss => ss.map(s => getComputedStyle(s).backgroundColor)"
        )
        assert swatches == fills  # the legend's colour for each cluster is the one drawn
        names = tab.locator("#legend li[data-cluster] a").all_inner_texts()
        assert names and all(n and not n.startswith(agent) for n in names)  # names, not ids
        assert tab.locator("svg.chart").evaluate(TEXT_INSIDE) == []
    noise = tab.locator("svg g.noise").evaluate_all("gs => gs.map(g => getComputedStyle(g).fill)")
    assert noise == [_rgb(NOISE)] and _rgb(NOISE) not in fills
    # A click on a circle of a cluster with a workflow opens that workflow's page (the last
    # circle of the last such cluster: drawn last, nothing covers it).
    link = tab.locator("svg g.cluster a").last
    target = link.get_attribute("href")
    link.locator("circle").last.click()
    tab.wait_for_url(f"**{target}")
    assert problems == []


def test_the_learning_curve_names_both_axes_and_labels_each_period(
    page: tuple[Any, list[str]], served: tuple[Store, str]
) -> None:
    tab, problems = page
    _, base = served
    for by, x_title in (("run", "induction run (the runs recorded after it)"), ("day", "day")):
        tab.goto(f"{base}/learning?by={by}")
        keep(tab, f"charts-learning-{by}")
        chart = tab.locator("svg.chart")
        assert chart.locator("text.label.x").count() == 1  # fails at once, not after the timeout
        assert chart.locator("text.label.x").text_content() == x_title
        assert chart.locator("text.label.y").text_content() == "success rate"
        periods = tab.locator("#curve tbody tr td:nth-child(2)").all_inner_texts()
        ticks = chart.locator("text.tick[text-anchor=middle]").all_text_contents()
        assert ticks == periods and len(ticks) >= (2 if by == "run" else 1)
        assert chart.evaluate(TEXT_INSIDE) == []
    assert problems == []
