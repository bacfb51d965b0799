"""The dashboard's trace and run pages through TestClient: the runs table and its filters, a run's
tree of parent and subtask runs, what an induction run created, changed and retired, and the
rollback preview, which is exactly what the rollback then does."""

from __future__ import annotations

import html
import re
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Step, Trajectory, WorkflowRef
from flowmem.server.api import create_app
from flowmem.server.dashboard.traces import RUNS_PAGE_SIZE
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import DASHBOARD_TOKEN as TOKEN
from tests.factories import DemoTraces

pytestmark = pytest.mark.xdist_group("dashboard")  # the seeds they share, built once

DAY = datetime(2024, 3, 1, 9, tzinfo=UTC)
AGENTS = ("mail", "calendar", "crm")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_traces_seed: DemoTraces) -> DemoTraces:
    return demo_traces_seed.copied(
        Settings(db=str(tmp_path_factory.mktemp("traces") / "db"), api_token=TOKEN)
    )


def _copy(demo: DemoTraces, tmp_path: Path) -> tuple[Settings, Store]:
    """A copy of the demo's store that a test may roll back."""
    shutil.copytree(demo.settings.db, tmp_path / "db")
    settings = Settings.model_validate({**demo.settings.model_dump(), "db": str(tmp_path / "db")})
    return settings, store_from(settings)


def _run(i: int) -> Trajectory:
    """Run i of the table: agent, outcome, day and served workflow each cycle with i."""
    return Trajectory(
        id=f"run-{i:03d}",
        task=f"Task number {i}",
        agent=AGENTS[i % 3],
        steps=[Step(action="tool.call", args={"n": i})],
        success=(True, False, None)[i % 4] if i % 4 < 3 else True,
        workflows_used=[WorkflowRef(id="wf-a" if i % 5 == 0 else "wf-b", version=1)] if i % 5 < 2 else [],
        created_at=DAY + timedelta(days=i % 6, minutes=i),
    )


def _listed(api: TestClient, url: str) -> list[str]:
    """The run ids of every page of the runs table from `url`, following its `next` links."""
    ids: list[str] = []
    while url:
        page = api.get(url)
        assert page.status_code == 200, url
        table = page.text.split('id="runs"')[1].split("</table>")[0]
        ids += [html.unescape(i) for i in re.findall(r'<small class="id">([^<]+)</small>', table)]
        found = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        url = html.unescape(found[1]) if found else ""
    return ids


def test_the_runs_table_filters_by_agent_outcome_days_and_served_workflow_on_every_page(
    settings: Settings,
) -> None:
    runs = [_run(i) for i in range(130)]
    store_trajectories(store_from(settings), runs, settings.scrub)
    api = TestClient(create_app(settings))
    newest_first = sorted(runs, key=lambda t: t.created_at, reverse=True)

    def expect(keep: Any) -> list[str]:
        return [t.id for t in newest_first if keep(t)]

    assert _listed(api, "/trajectories") == expect(lambda t: True)
    assert len(re.findall(r"<tr>", api.get("/trajectories?page=3").text)) == 130 - 2 * RUNS_PAGE_SIZE + 1
    cases: dict[str, Any] = {
        "agent=calendar": lambda t: t.agent == "calendar",
        "success=false": lambda t: t.success is False,
        "success=none": lambda t: t.success is None,
        "success=true&agent=crm": lambda t: t.success is True and t.agent == "crm",
        "since=2024-03-03": lambda t: t.created_at.date() >= date(2024, 3, 3),
        "since=2024-03-02&until=2024-03-03": lambda t: (
            date(2024, 3, 2) <= t.created_at.date() <= date(2024, 3, 3)
        ),
        "workflow=wf-a": lambda t: any(r.id == "wf-a" for r in t.workflows_used),
        "workflow=wf-b&until=2024-03-01&agent=": lambda t: (
            t.created_at.date() <= date(2024, 3, 1) and any(r.id == "wf-b" for r in t.workflows_used)
        ),
    }
    for query, keep in cases.items():
        wanted = expect(keep)
        assert 0 < len(wanted) < 130, query
        assert _listed(api, f"/trajectories?{query}") == wanted, query
    first = api.get("/trajectories?agent=calendar&success=false").text
    assert "<small>" in first and "<option selected>calendar</option>" in first
    assert '<option value="false" selected>failed</option>' in first


def test_a_bad_filter_answers_with_the_dashboards_error_page_naming_it(settings: Settings) -> None:
    api = TestClient(create_app(settings))
    for url, said in (
        ("/trajectories?since=2024-02-30", "since: not valid; expected a day, YYYY-MM-DD"),
        (
            "/trajectories?success=yes",
            "success: not valid; expected true (succeeded), false (failed) or none",
        ),
        ("/trajectories?workflow=%3Cb%3E", "workflow: not valid; expected a workflow id"),
        ("/trajectories?page=0", "page: not valid; expected a page number, from 1"),
        ("/trajectories?since=2024-03-02&until=2024-03-01", "since (2024-03-02) is after until (2024-03-01)"),
    ):
        page = api.get(url)
        assert page.status_code == 400 and page.headers["content-type"].startswith("text/html"), url
        assert said in html.unescape(page.text) and '<a class="brand" href="/">flowmem</a>' in page.text, url


def _tree(page: str) -> list[str]:
    """The runs of a page's tree, in document order."""
    tree = page.split('id="tree"')[1].split("</section>")[0]
    return [html.unescape(i) for i in re.findall(r'data-run="([^"]+)"', tree)]


def test_a_subtask_runs_page_shows_its_whole_tree_from_the_orchestrator_down(settings: Settings) -> None:
    def sub(tid: str, parent: str, agent: str, minute: int) -> Trajectory:
        return Trajectory(
            id=tid,
            task=f"Subtask {tid}",
            agent=agent,
            parent_id=parent,
            steps=[Step(action=f"{agent}.act")],
            success=True,
            created_at=DAY + timedelta(minutes=minute),
        )

    orchestrator = Trajectory(
        id="orc",
        task="Hand the account over and tell them",
        agent="orchestrator",
        steps=[
            Step(action="delegate", args={"agent": "crm"}),
            Step(action="delegate", args={"agent": "mail"}),
        ],
        success=False,
        created_at=DAY,
    )
    runs = [
        orchestrator,
        sub("orc/2", "orc", "mail", 5),  # recorded after orc/1, stored first
        sub("orc/1", "orc", "crm", 1),
        sub("orc/2/1", "orc/2", "lookup", 6),
        sub("orphan", "never-stored", "mail", 9),
        _run(1),
    ]
    store_trajectories(store_from(settings), runs, settings.scrub)
    api = TestClient(create_app(settings))
    page = api.get("/trajectories/orc/2").text
    assert _tree(page) == ["orc", "orc/1", "orc/2", "orc/2/1"]
    assert 'class="current" data-run="orc/2"' in page and 'id="parent" href="/trajectories/orc"' in page
    for other in ("orc", "orc/1", "orc/2/1"):
        assert f'href="/trajectories/{other}"' in page.split('id="tree"')[1], other
    assert "<summary>2 steps</summary>" in page  # the orchestrator's delegations, folded
    assert _tree(api.get("/trajectories/orc").text) == ["orc", "orc/1", "orc/2", "orc/2/1"]
    assert _tree(api.get("/trajectories/run-001").text) == []
    assert "is no other run's subtask" in api.get("/trajectories/run-001").text
    assert "never-stored</bdi></code> is not stored" in api.get("/trajectories/orphan").text
    rows = {
        html.unescape(m[1]): m[0]
        for m in re.findall(
            r'(<tr>.*?<small class="id">([^<]+)</small>.*?</tr>)', api.get("/trajectories").text, re.S
        )
    }
    assert "<small>2 subtask runs</small>" in rows["orc"] and "<small>1 subtask run</small>" in rows["orc/2"]
    assert '<a class="parent" href="/trajectories/orc">orc</a>' in rows["orc/1"]


def test_the_demos_orchestrator_run_shows_each_subtask_run_with_its_steps(demo: DemoTraces) -> None:
    store = demo.store
    children = sorted(
        (t for t in store.list_trajectories(limit=None) if t.parent_id == demo.orchestrator),
        key=lambda t: (t.created_at, t.id),
    )
    assert len(children) >= 2
    page = TestClient(create_app(demo.settings)).get(f"/trajectories/{children[-1].id}").text
    assert _tree(page) == [demo.orchestrator, *[t.id for t in children]]
    for t in children:
        node = page.split(f'data-run="{t.id}"')[1].split("</details>")[0]
        assert f"<summary>{len(t.steps)} step" in node and all(s.action in node for s in t.steps)


def _section(page: str, name: str) -> str:
    return page.split(f'id="{name}"')[1].split("</section>")[0]


def test_an_induction_runs_page_lists_what_it_created_changed_and_retired_each_linked(
    demo: DemoTraces,
) -> None:
    store, api = demo.store, TestClient(create_app(demo.settings))
    run = store.get_run(demo.runs[-1])
    mine = [v for w in store.list_workflows() for v in store.history(w.id) if v.provenance.run_id == run.id]
    page = api.get(f"/runs/{run.id}").text
    created, changed, retired = (_section(page, s) for s in ("created", "changed", "retired"))
    for v in mine:
        link = f'href="/workflows/{v.id}?version={v.version}"'
        assert link in (created if v.version == 1 else changed), (v.id, v.version)
        if v.version > 1:
            assert f'href="/workflows/{v.id}/diff?old={v.parent_version}&amp;new={v.version}"' in changed
    assert len(re.findall(r"<li>", created)) == sum(v.version == 1 for v in mine) > 0
    assert len(re.findall(r"<li>", changed)) == sum(v.version > 1 for v in mine) > 0
    assert run.state.retired and len(re.findall(r"<li>", retired)) == len(run.state.retired)
    for wid, version, old in run.state.retired:
        item = retired.split(f'href="/workflows/{wid}?version={version}"')[1].split("</li>")[0]
        assert f">{old}</span>" in item and 'now <span class="status retired">retired</span>' in item
    for href in set(re.findall(r'href="(/(?:workflows|runs)/[^"#]+)"', page)):
        assert api.get(html.unescape(href)).status_code == 200, href
    assert f'href="/runs/{run.id}"' in api.get("/runs").text


def _preview(page: str) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """(versions to leave the table, versions to be served again) of a rollback confirmation."""

    def found(name: str) -> set[tuple[str, int]]:
        part = page.split(f'id="{name}"')[1].split("</ul>")[0] if f'id="{name}"' in page else ""
        return {
            (html.unescape(w), int(v))
            for w, v in re.findall(r'data-workflow="([^"]+)" data-version="(\d+)"', part)
        }

    return found("removed"), found("restored")


def _stored(store: Store) -> dict[tuple[str, int], str]:
    """Every version the store serves a page of, with its status."""
    return {(v.id, v.version): v.status for w in store.list_workflows() for v in store.history(w.id)}


def _roll_back(api: TestClient, run_id: str) -> None:
    form = api.get(f"/runs/{run_id}/rollback").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf is not None
    done = api.post(
        f"/runs/{run_id}/rollback",
        data={"csrf": csrf[1], "token": TOKEN, "note": "preview check"},
        headers={"Origin": "http://testserver"},
    )
    assert done.status_code == 200 and "Rolled back" in done.text


@pytest.mark.parametrize("which", [-1, 0])
def test_the_rollback_preview_is_exactly_what_the_rollback_then_does(
    demo: DemoTraces, tmp_path: Path, which: int
) -> None:
    settings, store = _copy(demo, tmp_path)
    api = TestClient(create_app(settings))
    run = store.get_run(demo.runs[which])
    table_version = store.table_versions()[-1].version
    page = api.get(f"/runs/{run.id}/rollback").text
    assert store.table_versions()[-1].version == table_version  # the preview changed nothing
    leaving, served_again = _preview(page)
    later = set(demo.runs[demo.runs.index(run.id) + 1 :])
    assert {r for r in re.findall(r'href="/runs/([^"/]+)"', _section(page, "preview"))} == later
    before = _stored(store)
    _roll_back(api, run.id)
    after = _stored(store)
    assert leaving == before.keys() - after.keys() and leaving
    assert served_again == {k for k in after if before.get(k) == "retired" != after[k]}
    assert served_again == {(w, v) for w, v, _ in run.state.retired}
    undone = api.get(f"/runs/{run.id}").text
    rollback = store.list_runs()[-1]
    assert f'Rolled back by <a href="/runs/{rollback.id}">' in undone
    effect = api.get(f"/runs/{rollback.id}").text
    left = _section(effect, "rolled-back").split('id="left"')[1].split("</ul>")[0]
    assert len(re.findall(r"<li>", left)) == len(leaving)
    for page_html in (undone, effect):  # a workflow the rollback removed has no page: no link to it
        for href in set(re.findall(r'href="(/(?:workflows|runs)/[^"#]+)"', page_html)):
            assert api.get(html.unescape(href)).status_code == 200, href
    assert api.get(f"/runs/{run.id}/rollback").status_code == 409


def test_rollback_plan_is_a_dry_run_and_rollback_applies_it(demo: DemoTraces, tmp_path: Path) -> None:
    _, store = _copy(demo, tmp_path)
    run = demo.runs[-1]
    versions, runs = store.table_versions(), store.list_runs()
    plan = store.rollback_plan(run)
    assert store.table_versions() == versions and store.list_runs() == runs
    assert plan.restore_to == store.get_run(run).base_version and plan.later == []
    assert {k.run_id for k in plan.removed} == {run}
    before = _stored(store)
    store.rollback(run)
    assert {(k.workflow_id, k.version) for k in plan.removed} == before.keys() - _stored(store).keys()
    assert all(_stored(store)[(t.workflow_id, t.version)] == t.new for t in plan.restored)
