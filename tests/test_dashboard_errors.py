"""Every bad parameter of every dashboard page answers with the dashboard's own error page, in
HTML, with the status it deserves (never FastAPI's JSON body); the API keeps JSON errors; text
someone else wrote is isolated from the page's own text (bidirectional isolation)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flowmem.server.api import create_app
from flowmem.server.dashboard.routes import PageRoute
from flowmem.settings import Settings
from tests.factories import DASHBOARD_TOKEN as TOKEN
from tests.factories import Seeded

pytestmark = pytest.mark.xdist_group("dashboard")  # the seeds they share, built once

RLO = "\u202e"
"""RIGHT-TO-LEFT OVERRIDE: without isolation, everything after it on the line reads backwards."""


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, dashboard_seed: Seeded) -> Seeded:
    return dashboard_seed.copied(Settings(db=str(tmp_path_factory.mktemp("errors") / "db"), api_token=TOKEN))


@pytest.fixture(scope="module")
def api(seeded: Seeded) -> TestClient:
    return TestClient(create_app(seeded.settings))


def bad_requests(seeded: Seeded) -> dict[str, list[tuple[str, int]]]:
    """Per page (its route's path), the bad requests to it and the status each deserves."""
    w, run = seeded.revised, seeded.runs[1]
    t = seeded.store.get_workflow(seeded.served).source_trajectory_ids[0]
    return {
        "/": [
            ("/?q=" + "x" * 2_001, 400),
            ("/?page=abc", 400),
            ("/?page=0", 400),
            ("/?status=bogus", 400),
            ("/?kind=bogus", 400),
            ("/?ns=bad%20ns!", 400),
            ("/?sort=bogus", 400),
            ("/?retired=perhaps", 400),
        ],
        "/learning": [("/learning?by=week", 400), ("/learning?by=", 400), ("/learning?ns=!", 400)],
        "/clusters": [("/clusters?ns=!", 400)],
        "/trajectories/{trajectory_id:path}": [("/trajectories/nope", 404), (f"/trajectories/{t}?ns=!", 400)],
        "/trajectories": [
            ("/trajectories?page=abc", 400),
            ("/trajectories?success=maybe", 400),
            ("/trajectories?since=2024-13-01", 400),
            ("/trajectories?until=yesterday", 400),
            ("/trajectories?since=2024-02-01&until=2024-01-01", 400),
            ("/trajectories?workflow=a%20b", 400),
            ("/trajectories?agent=" + "x" * 201, 400),
            ("/trajectories?ns=!", 400),
        ],
        "/runs/{run_id}": [("/runs/nope", 404), (f"/runs/{run}?ns=!", 400)],
        "/workflows/{workflow_id}": [
            ("/workflows/nope", 404),
            (f"/workflows/{w}?version=abc", 400),
            (f"/workflows/{w}?version=0", 400),
            (f"/workflows/{w}?version=99", 404),
        ],
        "/workflows/{workflow_id}/history": [
            ("/workflows/nope/history", 404),
            (f"/workflows/{w}/history?ns=!", 400),
        ],
        "/workflows/{workflow_id}/diff": [
            (f"/workflows/{w}/diff", 400),
            (f"/workflows/{w}/diff?old=1", 400),
            (f"/workflows/{w}/diff?old=a&new=2", 400),
            (f"/workflows/{w}/diff?old=1&new=99", 404),
            ("/workflows/nope/diff?old=1&new=2", 404),
        ],
        "/runs": [("/runs?ns=!", 400)],
        "/runs/{run_id}/rollback": [("/runs/nope/rollback", 404), (f"/runs/{run}/rollback?ns=!", 400)],
        "/login": [],  # takes any `next` (an off-server one is replaced by /)
        "/static/dashboard.css": [],
    }


def assert_error_page(response: Any, status: int, url: str) -> str:
    """The dashboard's layout (its header and navigation) around an error alert."""
    assert response.status_code == status, url
    assert response.headers["content-type"].startswith("text/html"), url
    html = response.text
    assert '<a class="brand" href="/">flowmem</a>' in html and '<a href="/runs">Induction runs</a>' in html, (
        url
    )
    assert re.search(r'<p class="error" role="alert">.+</p>', html), url
    assert '"detail"' not in html, url
    return html


def page_paths(routes: list[Any]) -> set[str]:
    """The paths of the dashboard's GET pages among `routes` (FastAPI keeps an included
    router as one route holding it)."""
    found = set()
    for r in routes:
        if isinstance(r, PageRoute) and "GET" in (r.methods or ()):
            found.add(r.path)
        elif hasattr(r, "original_router"):
            found |= page_paths(r.original_router.routes)
    return found


def test_every_page_is_walked(api: TestClient, seeded: Seeded) -> None:
    """A page added later without its bad requests here fails this test."""
    assert page_paths(api.app.routes) == set(bad_requests(seeded))  # type: ignore[attr-defined]


def test_every_bad_parameter_answers_with_the_dashboards_error_page(api: TestClient, seeded: Seeded) -> None:
    for requests in bad_requests(seeded).values():
        for url, status in requests:
            assert_error_page(api.get(url), status, url)


def test_the_error_page_names_the_parameter_and_what_it_accepts(api: TestClient, seeded: Seeded) -> None:
    html = assert_error_page(api.get("/learning?by=week"), 400, "by")
    assert "by: not valid; expected run or day" in html and "week" not in html.split("<main>")[1]
    html = assert_error_page(api.get("/?q=" + "x" * 2_001), 400, "q")
    assert "q: not valid; expected a task of at most 2,000 characters" in html and "x" * 100 not in html
    html = assert_error_page(api.get("/?status=bogus"), 400, "status")
    assert "expected candidate, active, deprecated or retired" in html
    html = assert_error_page(api.get(f"/workflows/{seeded.revised}/diff"), 400, "diff")
    assert "old: missing; expected a version number, from 1" in html and "new: missing" in html
    assert "has no version 99" in assert_error_page(
        api.get(f"/workflows/{seeded.revised}?version=99"), 404, "v99"
    )


def test_a_bad_namespace_is_not_shown_as_the_namespace(api: TestClient) -> None:
    html = assert_error_page(api.get("/?ns=%3Cb%3Ex"), 400, "ns")
    assert "namespace <b>default</b>" in html and "&lt;b&gt;x" not in html


def test_a_path_no_page_has_is_an_html_404_and_a_method_no_page_takes_an_html_405(api: TestClient) -> None:
    for url in ("/nosuchpage", "/workflows/", "/runs/x/y/z"):
        assert_error_page(api.get(url), 404, url)
    assert_error_page(api.post("/learning"), 405, "POST /learning")


def test_the_api_keeps_its_json_errors(api: TestClient) -> None:
    for url, status in (
        ("/v1/workflows?status=bogus", 422),
        ("/v1/workflows/nope", 404),
        ("/v1/workflows/search", 422),
        ("/v1/nosuchroute", 404),
    ):
        response = api.get(url)
        assert response.status_code == status, url
        assert response.headers["content-type"] == "application/json", url
        assert "detail" in response.json(), url
    assert api.get("/v1/trajectories").status_code == 405


def test_the_sign_in_redirect_is_unchanged(seeded: Seeded) -> None:
    settings = Settings.model_validate({**seeded.settings.model_dump(), "api_read_token": True})
    response = TestClient(create_app(settings)).get("/learning?by=week", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"].startswith("/login?next=")


def test_a_right_to_left_override_in_a_query_cannot_reverse_the_heading(api: TestClient) -> None:
    html = api.get("/", params={"q": f"{RLO}delete the latest email"}).text
    heading = re.search(r'<section class="card" id="search">\s*<h2>(.*?)</h2>', html, flags=re.S)
    assert heading is not None
    assert heading.group(1) == f"What an agent asking “<bdi>{RLO}delete the latest email</bdi>” is served"


def test_names_tasks_and_ids_are_isolated_where_they_sit_in_a_line(api: TestClient, seeded: Seeded) -> None:
    w = seeded.store.get_workflow(seeded.served)
    page = api.get(f"/workflows/{w.id}").text
    assert f"<h1><bdi>{w.name}</bdi> <small>" in page and f"agent <bdi>{w.agent}</bdi> ·" in page
    assert f"<title>\u2068{w.name}\u2069 · flowmem</title>" in page
    home = api.get("/").text
    assert f">{'<bdi>' + w.name + '</bdi>'}</a>" in home
    t = seeded.store.get_trajectory(w.source_trajectory_ids[0])
    run = api.get(f"/trajectories/{t.id}").text
    assert f"<code><bdi>{t.id}</bdi></code>" in run and '<p class="task" id="task" dir="auto">' in run
    assert f"agent <bdi>{t.agent}</bdi> ·" in run
