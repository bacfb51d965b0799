"""The dashboard's pages through FastAPI's TestClient: content, paging, escaping, tokens, CSRF."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import InductionRun, Provenance
from flowmem.server.api import create_app
from flowmem.server.dashboard.security import SESSION_COOKIE
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import DASHBOARD_TOKEN as TOKEN
from tests.factories import EXTRA, Seeded, forward, induced, make_workflow

pytestmark = pytest.mark.xdist_group("dashboard")  # the seeds they share, built once


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, dashboard_seed: Seeded) -> Seeded:
    settings = Settings(db=str(tmp_path_factory.mktemp("dash") / "db"), api_token=TOKEN)
    return dashboard_seed.copied(settings)


def client(settings: Settings, **kw: Any) -> TestClient:
    return TestClient(create_app(Settings.model_validate({**settings.model_dump(), **kw})))


def test_every_page_shows_the_seeded_store(seeded: Seeded) -> None:
    api, store = client(seeded.settings), seeded.store
    workflows = store.list_workflows()
    home = api.get("/")
    assert home.status_code == 200 and home.headers["content-type"].startswith("text/html")
    for w in workflows:
        assert f'href="/workflows/{w.id}"' in home.text
    served = next(w for w in workflows if w.id == seeded.served)
    row = home.text.split(f'href="/workflows/{served.id}"')[1].split("</tr>")[0]
    rate = served.stats.successes / served.stats.served
    assert served.stats.served > 0 and f"{rate:.0%}" in row
    page = api.get(f"/workflows/{served.id}").text
    for step in served.steps:
        assert step.action in page
    assert '<mark class="ph">{' in page and "<svg" in page
    pitfalls = page.split('id="pitfalls"')[1].split("</section>")[0]
    linked = re.findall(r'href="/trajectories/([^"]+)"', pitfalls)
    assert linked and all(store.get_trajectory(i).success is False for i in linked)
    assert served.source_trajectory_ids[0] in page.split('id="sources"')[1]
    history = api.get(f"/workflows/{seeded.revised}/history").text
    assert "v2" in history and seeded.runs[1] in history and "rule" in history
    runs = api.get("/runs").text
    assert (
        all(r in runs for r in seeded.runs)
        and "workflow versions created" in runs
        and "clusters induced" in runs
    )
    assert api.get(f"/trajectories/{served.source_trajectory_ids[0]}").status_code == 200
    assert api.get("/static/dashboard.css").headers["content-type"].startswith("text/css")
    assert api.get("/trajectories/nope").status_code == 404
    assert api.get("/workflows/nope").status_code == 404


def test_the_diff_shows_the_added_step_side_by_side(seeded: Seeded) -> None:
    page = client(seeded.settings).get(f"/workflows/{seeded.revised}/diff", params={"old": 1, "new": 2}).text
    added = re.findall(r'<tr class="added">(.*?)</tr>', page, flags=re.S)
    assert len(added) == 1 and EXTRA.action in added[0]
    assert EXTRA.action not in "".join(re.findall(r'<tr class="equal">(.*?)</tr>', page, flags=re.S))


def test_learning_curve_and_cluster_map_count_the_runs(seeded: Seeded) -> None:
    api, store = client(seeded.settings), seeded.store
    runs = store.list_trajectories(limit=None)
    served = [t for t in runs if t.workflows_used]
    page = api.get("/learning").text
    last = re.findall(r"<tr><td>after " + seeded.runs[1] + r"</td>(.*?)</tr>", page, flags=re.S)[0]
    cells = re.findall(r'<td class="num">([^<]*)</td>', last)
    rate = sum(bool(t.success) for t in served) / len(served)
    assert cells[0] == str(len(served)) and cells[1] == f"{rate:.0%}"
    assert api.get("/learning", params={"by": "day"}).status_code == 200
    assert api.get("/learning", params={"by": "week"}).status_code == 400
    # The map shows one agent: by default the one with the most runs (the first by name on a
    # tie); the WorkBench slice has one agent, the seed without the data set several.
    counts = Counter(t.agent for t in runs)
    shown = min(counts, key=lambda a: (-counts[a], a))
    runs = [t for t in runs if t.agent == shown]
    svg = api.get("/clusters").text
    tasks: dict[str, list[bool | None]] = {}
    for t in runs:  # runs given the same task are one point
        tasks.setdefault(t.task, []).append(t.success)
    assert svg.count("<circle") == len(tasks)
    assert svg.count('class="pt failed"') == sum(all(s is False for s in o) for o in tasks.values())
    assert f"<b>{len(runs)} of {len(runs)} runs shown</b>" in svg
    assert f'<a href="/workflows/{seeded.revised}"><circle' in svg


def test_a_script_in_a_task_renders_as_text(seeded: Seeded) -> None:
    api = client(seeded.settings)
    for path in (f"/trajectories/{seeded.script_run}", "/clusters", f"/workflows/{seeded.served}"):
        html = api.get(path).text
        assert "<script>window.__xss" not in html, path
    assert (
        "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in api.get(f"/trajectories/{seeded.script_run}").text
    )
    searched = api.get("/", params={"q": "<script>alert(1)</script> delete email"}).text
    assert "<script>alert(1)" not in searched and "&lt;script&gt;alert(1)" in searched


def test_home_filters_pages_and_searches(settings: Settings) -> None:
    store = induced(settings)
    for i in range(120):
        store.put_workflow(make_workflow(f"manual-{i:03d}", agent="helper" if i % 2 else "agent"))
    api = client(settings)
    first = api.get("/").text
    assert first.count('class="id"') == 50 and "page 1 of 3" in first
    last = api.get("/", params={"page": 3}).text
    assert last.count('class="id"') == 122 - 100 and "page 3 of 3" in last
    helpers = api.get("/", params={"agent": "helper"}).text
    assert "page 1 of 2" in helpers and "manual-119" in helpers and "manual-118" not in helpers
    assert "Workflows <small>60 of 122</small>" in helpers
    hits = api.get("/", params={"q": "Forward the latest email about 'roadmap' to zed"}).text
    search = hits.split('id="search"')[1].split("</section>")[0]
    assert "Score" in search and re.search(r'<td class="num">0\.\d{3}</td>', search)
    assert api.get("/", params={"ns": "bad ns!"}).status_code == 400


def test_reads_need_the_token_when_configured(settings: Settings) -> None:
    induced(settings)
    api = client(settings, api_token=TOKEN, api_read_token=True)
    gone = api.get("/runs", follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == "/login?next=%2Fruns"
    assert TOKEN not in gone.text
    assert api.get("/", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    form = api.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert form.status_code == 200 and csrf is not None
    wrong = api.post("/login", data={"csrf": csrf[1], "token": "nope", "next": "/runs"})
    assert wrong.status_code == 401 and "wrong token" in wrong.text
    assert api.post("/login", data={"csrf": "forged", "token": TOKEN}).status_code == 403
    ok = api.post(
        "/login", data={"csrf": csrf[1], "token": TOKEN, "next": "//evil.test/"}, follow_redirects=False
    )
    assert ok.status_code == 303 and ok.headers["location"] == "/"
    cookie = ok.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and TOKEN not in cookie
    assert api.get("/runs").status_code == 200  # the cookie now proves the token
    assert client(settings).get("/runs").status_code == 200  # reads are open by default


def test_a_forged_session_cookie_proves_nothing(settings: Settings) -> None:
    induced(settings)
    real = client(settings, api_token=TOKEN, api_read_token=True)
    form = real.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    real.post("/login", data={"csrf": csrf[1], "token": TOKEN})
    session = real.cookies.get(SESSION_COOKIE)
    assert session and real.get("/runs").status_code == 200
    other_token = hmac.new(b"another-token", b"flowmem dashboard session", hashlib.sha256).hexdigest()
    forgeries = [other_token, session[:-1] + ("0" if session[-1] != "0" else "1"), "0" * len(session), "x"]
    for forged in forgeries:
        api = client(settings, api_token=TOKEN, api_read_token=True)
        api.cookies.set(SESSION_COOKIE, forged)
        refused = api.get("/runs", follow_redirects=False)
        assert refused.status_code == 303 and refused.headers["location"].startswith("/login"), forged


def _confirm(api: TestClient, run_id: str) -> str:
    page = api.get(f"/runs/{run_id}/rollback")
    assert page.status_code == 200 and "Roll back" in page.text
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None and api.cookies.get("flowmem_csrf") == found[1]
    return found[1]


def test_rollback_needs_the_token_and_a_csrf_token_from_this_server(settings: Settings) -> None:
    store = induced(settings)
    run = store.list_runs()[0]
    before = len(store.list_workflows())
    api = client(settings, api_token=TOKEN)
    csrf = _confirm(api, run.id)
    url = f"/runs/{run.id}/rollback"
    assert api.post(url, data={"token": TOKEN}).status_code == 403  # no CSRF token
    assert api.post(url, data={"token": TOKEN, "csrf": "guessed"}).status_code == 403
    evil = api.post(url, data={"token": TOKEN, "csrf": csrf}, headers={"Origin": "http://evil.test"})
    assert evil.status_code == 403
    assert api.post(url, data={"csrf": csrf}).status_code == 401
    assert api.post(url, data={"csrf": csrf, "token": "wrong"}).status_code == 401
    assert len(store.list_workflows()) == before and len(store.list_runs()) == 1
    done = api.post(
        url, data={"csrf": csrf, "token": TOKEN, "note": "bad run"}, headers={"Origin": "http://testserver"}
    )
    assert done.status_code == 200 and "Rolled back" in done.text
    assert store.list_workflows() == [] and store.list_runs()[-1].rolled_back_run == run.id
    assert api.post(url, data={"csrf": csrf, "token": TOKEN}).status_code == 409  # already rolled back
    assert api.get(url).status_code == 409  # nor is it offered again
    no_token = client(settings)  # a server without FLOWMEM_API_TOKEN accepts no writes
    undo = store.list_runs()[-1].id  # the rollback, which can itself be rolled back
    csrf = _confirm(no_token, undo)
    assert no_token.post(f"/runs/{undo}/rollback", data={"csrf": csrf, "token": TOKEN}).status_code == 403


def test_dashboard_routes_stay_out_of_the_api_schema(settings: Settings) -> None:
    paths = set(client(settings).get("/openapi.json").json()["paths"])
    assert not paths & {"/", "/runs", "/login", "/clusters", "/learning"}


def test_the_home_page_reads_only_when_the_store_moved(settings: Settings, tmp_path: Path) -> None:
    store = induced(settings)
    api = client(settings)
    assert "forward" in api.get("/").text.lower()
    store.put_workflow(make_workflow("brand-new"))
    assert 'href="/workflows/brand-new"' in api.get("/").text


def test_a_placeholders_choices_show_with_its_parameter(settings: Settings) -> None:
    from flowmem.models import WorkflowStep

    step = WorkflowStep(
        action="flights.book", args={"cabin": "{cabin}"}, choices={"cabin": ["business", "economy"]}
    )
    booking = make_workflow("book", steps=1).model_copy(
        update={"steps": [step], "parameters": {"cabin": "task"}}
    )
    store_from(settings).put_workflow(booking)
    page = client(settings).get("/workflows/book").text
    params = page.split("<h2>Parameters</h2>")[1].split("</section>")[0]
    assert "one of <code>business | economy</code>" in params


def test_new_runs_alone_rebuild_the_home_rows_at_most_every_max_age(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowmem.server.dashboard import views

    store = induced(settings)
    ns = settings.namespace
    reads: list[str] = []
    real = views.workflow_rows

    def recording(s: Store, n: str) -> Any:
        reads.append(n)
        return real(s, n)

    monkeypatch.setattr(views, "workflow_rows", recording)
    cache = views.HomeCache(store)
    cache.rows(ns)
    store_trajectories(store, [forward(100)], settings.scrub)  # an agent's run: the home rows stay
    cache.rows(ns)
    assert len(reads) == 1
    store.put_workflow(make_workflow("brand-new"))  # a new version: rebuilt at once
    assert "brand-new" in {r.id for r in cache.rows(ns)} and len(reads) == 2
    eager = views.HomeCache(store, runs_max_age=0)
    eager.rows(ns)
    store_trajectories(store, [forward(101)], settings.scrub)
    eager.rows(ns)
    assert len(reads) == 4


MARKUP = '<img src=x onerror="window.__xss=1">'
"""Markup an agent or a user could put in a workflow's fields or a run's note."""


def test_markup_in_versions_and_runs_renders_as_text_on_the_diff_history_and_runs_pages(
    settings: Settings,
) -> None:
    store = store_from(settings)
    undone = InductionRun(id=Store.new_run_id())
    store.commit_run(undone, [make_workflow("gone")])
    store.rollback(undone.id, note=f"undo {MARKUP}")
    store.commit_run(InductionRun(id=Store.new_run_id()), [make_workflow("fw", 1, steps=2)])
    marked = make_workflow(
        "fw",
        2,
        steps=3,
        name=f"fw {MARKUP}",
        description=f"Forward it {MARKUP}",
        provenance=Provenance(inducer="llm", model=f"m {MARKUP}"),
    )
    steps = [*marked.steps[:2], marked.steps[2].model_copy(update={"action": f"mail.{MARKUP}"})]
    store.put_workflow(marked.model_copy(update={"steps": steps}))
    api = client(settings)
    escaped = "&lt;img src=x onerror="
    for path, params in (
        ("/workflows/fw/diff", {"old": 1, "new": 2}),
        ("/workflows/fw/history", {}),
        ("/runs", {}),
    ):
        page = api.get(path, params=params)
        assert page.status_code == 200, path
        assert "<img" not in page.text and escaped in page.text, path


def test_a_diff_whose_steps_did_not_change_explains_every_version_between(settings: Settings) -> None:
    """v1 -> v4 with the same steps: the page says the steps are the same and what changed,
    then each version between, the run that made it and what it changed from its parent (v4
    serves what v3 did: a fresh candidate), and each status change with its reason."""
    from flowmem.jobs.status import set_status

    store = store_from(settings)
    made = [
        ("r1", make_workflow("fw", 1, pitfalls=["Look the name up first"])),
        ("r2", make_workflow("fw", 2, pitfalls=["Look the name up first", "Never forward to a bare name"])),
        ("r3", make_workflow("fw", 3, name="forward_newest", pitfalls=["Never forward to a bare name"])),
        ("r4", make_workflow("fw", 4, name="forward_newest", pitfalls=["Never forward to a bare name"])),
    ]
    for run, w in made:
        store.commit_run(InductionRun(id=run), [w.model_copy(update={"provenance": Provenance(run_id=run)})])
    set_status(store, "fw", "promote", namespace="default", why="it worked", by="ops", version=1)
    set_status(store, "fw", "deprecate", namespace="default", why="it stopped working", by="ops", version=3)
    page = TestClient(create_app(settings)).get("/workflows/fw/diff", params={"old": 1, "new": 4}).text
    summary = re.sub(r"<[^>]+>", "", page.split('id="summary">')[1].split("</p>")[0])
    assert summary.startswith("The steps are the same in v1 and v4. What changed:")
    assert "name, pitfalls, status (active → candidate)" in summary
    between = [
        re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", li)).strip()
        for li in re.findall(r'<li id="made-v\d">(.*?)</li>', page, flags=re.S)
    ]
    assert [line.split(":")[0] for line in between] == ["v1", "v2", "v3", "v4"]
    assert (
        "made by induction run r1 (manual)" in between[0] and "the first version; now active." in between[0]
    )
    assert "changed pitfalls from v1; now candidate." in between[1]
    assert "changed name, pitfalls from v2; now deprecated." in between[2]
    assert "serves the same as v3 (a fresh candidate" in between[3]
    changes = re.findall(r"v(\d): (\w+) → (\w+), because <bdi>(.*?)</bdi>", page.split('id="transitions"')[1])
    assert changes == [
        ("1", "candidate", "active", "it worked (by ops)"),
        ("3", "candidate", "deprecated", "it stopped working (by ops)"),
    ]
