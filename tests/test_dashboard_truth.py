"""The dashboard tells the truth: each home row is the version agents are served, with the
status and counts `flowmem workflows show` gives for it; the search box is `memory.context`;
columns sort, retired workflows hide until asked for, workflows that share a name are told
apart (FastAPI's TestClient; tests/test_dashboard_browser_find.py does the same in Chromium)."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from flowmem.agents.memory import WorkflowMemory
from flowmem.agents.served_index import ServedIndex
from flowmem.cli import app as cli
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.server.api import create_app
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import TRUTH_NAME, cancel, forward, remind, seed_truth

SEARCH_TASKS = (
    "Forward the latest email about 'budget review' to kofi",
    "Forward the latest email about 'vendor contract' to nadia",
    "Cancel my next meeting with sofia",
    "Cancel my next meeting with carlos",
    "Remind me to call olga on friday",
)
"""Tasks like those the search store was induced from."""

UNRELATED = "<script>alert(1)</script>"
"""A task like none of them (the issue's example)."""


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, Store]:
    settings = Settings(db=str(tmp_path_factory.mktemp("truth") / "db"))
    return settings, seed_truth(settings)


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A store induced from three kinds of runs, served with the default relevance floor (the
    hashing embedder's, docs/induction.md, "A relevance floor")."""
    settings = Settings(db=str(tmp_path_factory.mktemp("search") / "db"))
    store = store_from(settings)
    runs = [f(i) for f in (forward, cancel, remind) for i in range(8)]
    store_trajectories(store, runs, settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    return settings


def home_rows(page: str) -> dict[str, dict[str, Any]]:
    """The workflows table's rows by id: status, shown version, served count, differs line."""
    table = page.split('id="workflows"')[1].split("</table>")[0]
    found = {}
    for wid, row in re.findall(r'<tr data-id="([^"]+)">(.*?)</tr>', table, flags=re.S):
        differs = re.search(r'class="differs">differs: <bdi>(.*?)</bdi>', row)
        found[html.unescape(wid)] = {
            "status": re.findall(r'<span class="status (\w+)">', row)[0],
            "version": int(re.findall(r'class="version"[^>]*>v(\d+)</a>', row)[0]),
            "served": int(re.findall(r'<td class="num served">(\d+)</td>', row)[0]),
            "trial": [int(v) for v in re.findall(r'class="trial">v(\d+) candidate on trial', row)],
            "differs": html.unescape(differs[1]) if differs else None,
        }
    return found


def shown(db: str, *args: str) -> dict[str, Any]:
    """`flowmem workflows show ... --json` on the store at `db`."""
    result = CliRunner().invoke(cli, ["workflows", "show", *args, "--json"], env={"FLOWMEM_DB": db})
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def test_every_row_is_the_version_agents_are_served_as_workflows_show_gives_it(
    truth: tuple[Settings, Store],
) -> None:
    settings, store = truth
    rows = home_rows(TestClient(create_app(settings)).get("/", params={"retired": "true"}).text)
    workflows = store.list_workflows()
    assert set(rows) == {w.id for w in workflows} and len(rows) == 8
    served: dict[str, list[Any]] = {}
    for w in ServedIndex.serving(store, settings.namespace, settings).served():
        served.setdefault(w.id, []).append(w)
    for w in workflows:
        versions = served.get(w.id, [])
        agents_get = next((v for v in versions if v.status == "active"), versions[0] if versions else None)
        version = agents_get.version if agents_get else w.version  # not served: the latest
        expected = shown(settings.db, w.id, "--version", str(version))
        row = rows[w.id]
        assert (row["status"], row["version"], row["served"]) == (
            expected["status"],
            expected["version"],
            expected["stats"]["served"],
        ), w.id
        assert row["trial"] == [v.version for v in versions if v is not agents_get], w.id
    # The case: v1 active and served 26 times, v3 the latest, a candidate never served.
    fwd = next(w.id for w in workflows if w.version == 3)
    assert shown(settings.db, fwd)["status"] == "candidate"
    assert rows[fwd] | {"differs": None} == {
        "status": "active",
        "version": 1,
        "served": 26,
        "trial": [3],
        "differs": None,
    }
    assert (rows["demoted"]["status"], rows["demoted"]["served"]) == ("deprecated", 5)  # its stored stats
    assert (rows["promoted"]["status"], rows["promoted"]["version"]) == ("active", 2)
    assert rows["rolled"]["version"] == 1  # run 2's version 2 was rolled back


def test_retired_workflows_are_listed_only_when_asked_for(truth: tuple[Settings, Store]) -> None:
    settings, _ = truth
    api = TestClient(create_app(settings))
    default = api.get("/").text
    assert "retired" not in home_rows(default) and 'id="hidden-retired"' in default
    assert "1 retired workflow not listed" in default
    assert '<a href="/?retired=true">show them</a>' in default
    listed = api.get("/", params={"retired": "true", "sort": "-served"}).text
    assert "retired" in home_rows(listed)
    # Sorting by another column keeps the filter (and a second click reverses the sort).
    assert 'data-sort="name" href="/?sort=name&amp;retired=true"' in listed
    assert 'data-sort="served" href="/?sort=served&amp;retired=true"' in listed
    assert list(home_rows(api.get("/", params={"status": "retired"}).text)) == ["retired"]


def test_columns_sort_and_a_bad_sort_is_the_dashboards_error_page(truth: tuple[Settings, Store]) -> None:
    settings, _ = truth
    api = TestClient(create_app(settings))

    def order(sort: str) -> list[tuple[str, dict[str, Any]]]:
        return list(home_rows(api.get("/", params={"sort": sort, "retired": "true"}).text).items())

    by_name = [wid for wid, _ in order("name")]
    names = {w.id: w.name for w in truth[1].list_workflows()}
    assert [names[w] for w in by_name] == sorted(names[w] for w in by_name)
    served = [r["served"] for _, r in order("-served")]
    assert served == sorted(served, reverse=True) and served[0] == 26
    assert [r["version"] for _, r in order("version")] == sorted(r["version"] for _, r in order("version"))
    for bad in ("bogus", "--name", "name;drop"):
        page = api.get("/", params={"sort": bad})
        assert page.status_code == 400 and page.headers["content-type"].startswith("text/html")
        assert "sort: not valid; expected a column: name, description" in page.text
    assert api.get("/", params={"retired": "perhaps"}).status_code == 400


def test_workflows_that_share_a_name_are_told_apart_by_their_steps(truth: tuple[Settings, Store]) -> None:
    settings, _ = truth
    rows = home_rows(TestClient(create_app(settings)).get("/").text)
    short, long = rows["fw-short"]["differs"], rows["fw-long"]["differs"]
    assert long.startswith("has ") and "mail.read(email_id={email_id})" in long
    assert short.startswith("lacks ") and "mail.read(email_id={email_id})" in short
    assert sum(r["differs"] is not None for r in rows.values()) == 2  # only the two named TRUTH_NAME
    assert TRUTH_NAME in TestClient(create_app(settings)).get("/").text


def search_box(page: str) -> tuple[list[tuple[str, int]], str | None, bool]:
    """The search box's served (id, version) pairs, its prompt block, and whether it says no
    workflow fits."""
    box = page.split('id="search"')[1].split("</section>")[0]
    hits = [
        (html.unescape(i), int(v)) for i, v in re.findall(r'<tr data-id="([^"]+)" data-version="(\d+)">', box)
    ]
    block = re.search(r'<pre class="prompt" id="context">(.*?)</pre>', box, flags=re.S)
    return hits, html.unescape(block[1]) if block else None, 'id="no-fit"' in box


def test_the_search_box_is_what_memory_context_gives_an_agent(searched: Settings, tmp_path: Path) -> None:
    api = TestClient(create_app(searched))
    with WorkflowMemory(searched) as memory:
        for task in SEARCH_TASKS:
            page = api.get("/", params={"q": task}).text
            hits, block, no_fit = search_box(page)
            expected = memory.search(task)
            assert hits == [(h.workflow.id, h.workflow.version) for h in expected] and hits, task
            assert block == memory.context(task) and not no_fit, task
            assert list(home_rows(page)) == [h.workflow.id for h in expected], task  # the list, filtered
        assert memory.context(UNRELATED) == ""
    page = api.get("/", params={"q": UNRELATED}).text
    assert search_box(page) == ([], None, True) and home_rows(page) == {}
    assert "No workflow fits" in page


def test_each_workflow_page_shows_the_block_an_agent_gets(searched: Settings) -> None:
    api = TestClient(create_app(searched))
    with WorkflowMemory(searched) as memory:
        for task in SEARCH_TASKS:
            (hit,) = memory.search(task)  # served alone: its page's block is the whole context
            page = api.get(f"/workflows/{hit.workflow.id}").text
            block = re.search(r'<pre class="prompt">(.*?)</pre>', page, flags=re.S)
            assert block is not None and html.unescape(block[1]) == memory.context(task), task
            assert f'Agents are served <a href="/workflows/{hit.workflow.id}?version=1">v1</a>' in page


def test_the_search_box_serves_at_most_the_k_memory_context_serves(truth: tuple[Settings, Store]) -> None:
    """With no gap or ratio to cut the list short, k alone bounds it: 3 of the 7 served."""
    settings = truth[0].model_copy(update={"relevance_gap": None, "relevance_ratio": None})
    task = "Forward the latest email about 'launch plan' to raj"
    page = TestClient(create_app(settings)).get("/", params={"q": task}).text
    with WorkflowMemory(settings) as memory:
        expected = memory.search(task)
        assert len(expected) == 3 < len(memory.index.served())
        assert search_box(page)[:2] == (
            [(h.workflow.id, h.workflow.version) for h in expected],
            memory.context(task),
        )


AGENTS = ("mailer", "helper")
"""Two agents that are both given forwarding tasks, and do them differently."""


@pytest.fixture(scope="module")
def two_agents(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A store induced from two agents' runs of the same kinds of tasks: `mailer` forwards with
    a contact lookup, `helper` without one (and both cancel meetings)."""
    settings = Settings(db=str(tmp_path_factory.mktemp("agents") / "db"))
    store = store_from(settings)
    runs = [
        f(i, **kw).model_copy(update={"agent": agent, "id": f"{agent}-{f.__name__}-{i}"})
        for agent, kw in ((AGENTS[0], {}), (AGENTS[1], {"skip_lookup": True}))
        for i in range(8)
        for f in (forward, lambda i, **_: cancel(i))
    ]
    store_trajectories(store, runs, settings.scrub)
    run_induction(store, settings, RuleInducer(), namespace=settings.namespace)
    return settings


def test_the_search_box_with_an_agent_chosen_is_what_memory_context_gives_that_agent(
    two_agents: Settings,
) -> None:
    """The agent menu is `memory.context(task, agent=...)`'s `agent`: with one chosen, the box
    serves that agent's workflows only (a box that ignored it would serve the other's too)."""
    api = TestClient(create_app(two_agents))
    with WorkflowMemory(two_agents) as memory:
        for task in SEARCH_TASKS[:4]:
            for agent in AGENTS:
                page = api.get("/", params={"q": task, "agent": agent}).text
                hits, block, no_fit = search_box(page)
                expected = memory.search(task, agent=agent)
                assert hits == [(h.workflow.id, h.workflow.version) for h in expected], (task, agent)
                assert all(h.workflow.agent == agent for h in expected) and hits, (task, agent)
                assert block == memory.context(task, agent=agent) and not no_fit, (task, agent)
                assert f'agent="{agent}"' in page  # the call the box says it makes
            if task.startswith("Forward"):
                # The agents forward differently, so they are served different blocks: a box
                # that ignored the menu would show one block for both, wrong for one of them.
                assert memory.context(task, agent=AGENTS[0]) != memory.context(task, agent=AGENTS[1]), task
