"""The dashboard's charts through FastAPI's TestClient: the cluster map shows one agent at a
time in colours no two of its clusters share, noise in a colour no cluster has, a legend of
workflow names and how many runs it shows; every chart names its axes; a page with nothing to
draw says what is missing; the diff shows list fields as lines."""

from __future__ import annotations

import colorsys
import re
from collections import defaultdict

import pytest
from fastapi.testclient import TestClient

from flowmem.demo import simulate
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import InductionRun
from flowmem.server.api import create_app
from flowmem.server.dashboard import charts, clustermap
from flowmem.server.dashboard.detail import VersionPoint
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import CHARTS_NEW_TASK, copy_store, make_workflow

pytestmark = pytest.mark.xdist_group("charts")  # the seed they share, built once

AGENTS = ("board_agent", "calendar_agent", "crm_agent", "email_agent", "orchestrator")
"""The agents of the demo office's runs."""


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory, charts_seed: Settings) -> tuple[Settings, Store]:
    settings = Settings(db=str(tmp_path_factory.mktemp("charts") / "db"))
    return settings, copy_store(charts_seed, settings)


@pytest.fixture(scope="module")
def api(seeded: tuple[Settings, Store]) -> TestClient:
    return TestClient(create_app(seeded[0]))


def groups(html: str) -> list[tuple[str, str, str]]:
    """(kind, cluster, fill) of each group of circles the map draws."""
    return re.findall(r'<g class="(cluster|noise)" data-cluster="(\d*)" fill="(#[0-9a-f]{6})"', html)


def tasks_of(store: Store, agent: str) -> dict[str, int]:
    """Task text -> runs of `agent` given it."""
    found: dict[str, int] = defaultdict(int)
    for t in store.list_trajectories(limit=None):
        if t.agent == agent:
            found[t.task] += 1
    return found


def titles(html: str) -> list[str]:
    return re.findall(r"<circle [^>]*><title>(.*?) \((?:cluster \d+|no cluster); ", html)


def test_the_map_shows_one_agent_its_clusters_in_distinct_colours_and_noise_apart(
    api: TestClient, seeded: tuple[Settings, Store]
) -> None:
    _, store = seeded
    for agent in AGENTS:
        html = api.get("/clusters", params={"agent": agent}).text
        drawn = groups(html)
        clusters = {cid: fill for kind, cid, fill in drawn if kind == "cluster"}
        assert len(clusters) >= 3, agent
        assert len(set(clusters.values())) == len(clusters), f"{agent}: two clusters share a colour"
        assert charts.NOISE not in clusters.values(), agent
        assert "0" in clusters, agent  # every agent numbers its clusters from 0: one agent a map
        # Every circle is a task of this agent, once: runs given the same task are one point.
        assert sorted(t.replace("&#39;", "'") for t in titles(html)) == sorted(tasks_of(store, agent)), agent
    html = api.get("/clusters", params={"agent": "email_agent"}).text
    noise = [fill for kind, _, fill in groups(html) if kind == "noise"]
    assert noise == [charts.NOISE]
    noise_group = html.split('<g class="noise"')[1].split("</g>")[0]
    assert CHARTS_NEW_TASK in noise_group and noise_group.count('class="pt failed"') == 1


def test_cluster_colours_are_distinct_saturated_and_never_the_noise_grey() -> None:
    for n in (1, 2, 10, 11, 19, 117, 400):
        colours = charts.cluster_colours(list(range(n)))
        assert len(set(colours.values())) == n and charts.NOISE not in colours.values()
        for colour in colours.values():
            r, g, b = (int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
            assert colorsys.rgb_to_hls(r, g, b)[2] >= 0.5, colour  # grey is for noise only
    r, g, b = (int(charts.NOISE[i : i + 2], 16) / 255 for i in (1, 3, 5))
    assert colorsys.rgb_to_hls(r, g, b)[2] < 0.15


def test_the_legend_names_each_clusters_workflow_and_its_runs(
    api: TestClient, seeded: tuple[Settings, Store]
) -> None:
    _, store = seeded
    html = api.get("/clusters", params={"agent": "email_agent"}).text
    legend = html.split('id="legend"')[1].split("</ul>")[0]
    named = re.findall(
        r'<li data-cluster="(\d+)">.*?<a href="/workflows/([^"]+)"><bdi>([^<]+)</bdi></a>', legend
    )
    assert len(named) >= 3
    for cid, wid, name in named:
        w = store.get_workflow(wid)
        assert (w.agent, w.cluster_id, w.name) == ("email_agent", int(cid), name) and name != wid
    swatches = dict(
        re.findall(r'<li data-cluster="(\d+)"><span class="swatch" style="background: (#\w+)"', legend)
    )
    assert swatches == {cid: fill for kind, cid, fill in groups(html) if kind == "cluster"}
    assert '<li class="noise"><span class="swatch noise" style="background: ' + charts.NOISE in legend
    assert "2 runs: noise, or recorded since the last induction run" in legend


def test_the_page_says_how_many_runs_it_shows_and_samples_evenly(
    api: TestClient, seeded: tuple[Settings, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, store = seeded
    runs = sum(tasks_of(store, "crm_agent").values())
    html = api.get("/clusters", params={"agent": "crm_agent"}).text
    assert f"<b>{runs} of {runs} runs shown</b>" in html and "sampled" not in html
    monkeypatch.setattr(clustermap, "MAX_POINTS", 5)
    html = api.get("/clusters", params={"agent": "crm_agent"}).text
    shown = re.search(r"<b>(\d+) of (\d+) runs shown</b>\s+\(5 tasks sampled evenly of (\d+)", html)
    assert shown, "the page does not say it samples"
    assert int(shown.group(2)) == runs and 5 <= int(shown.group(1)) < runs
    assert int(shown.group(3)) == len(tasks_of(store, "crm_agent")) and len(titles(html)) == 5


def test_the_agent_is_chosen_from_the_namespaces_agents(
    api: TestClient, seeded: tuple[Settings, Store]
) -> None:
    _, store = seeded
    html = api.get("/clusters").text
    counts = {a: sum(tasks_of(store, a).values()) for a in AGENTS}
    busiest = min(AGENTS, key=lambda a: (-counts[a], a))  # ties: the first by name
    assert f"<h1>Clusters of <bdi>{busiest}</bdi></h1>" in html
    options = re.findall(r'<option value="([^"]+)"( selected)?>', html)
    assert [a for a, _ in options] == list(AGENTS) and [a for a, s in options if s] == [busiest]
    unknown = api.get("/clusters", params={"agent": "nobody"})
    assert unknown.status_code == 404 and "no agent &#39;nobody&#39;" in unknown.text
    assert "its agents: board_agent, calendar_agent" in unknown.text
    assert api.get("/clusters", params={"agent": "x" * 201}).status_code == 400


def test_every_chart_names_its_axes(api: TestClient, seeded: tuple[Settings, Store]) -> None:
    _, store = seeded
    learning = api.get("/learning").text
    induce_runs = [r for r in store.list_runs() if r.kind == "induce"]
    assert len(induce_runs) == 1
    assert '<text x="' in learning and ">success rate</text>" in learning
    assert ">induction run (the runs recorded after it)</text>" in learning
    ticks = re.findall(r'<text [^>]*class="tick" text-anchor="middle">([^<]+)</text>', learning)
    assert ticks == ["before", "run 1"]
    assert ">day</text>" in api.get("/learning", params={"by": "day"}).text
    served = next(w for w in store.list_workflows() if w.stats.served)
    page = api.get(f"/workflows/{served.id}").text
    assert ">version (the day it was created)</text>" in page and ">runs</text>" in page
    clusters = api.get("/clusters").text
    assert "first principal component of the task embeddings" in clusters
    assert "second principal component" in clusters


def test_count_ticks_are_whole_and_never_repeat() -> None:
    for served in (1, 2, 3, 7):
        svg = charts.versions_svg(
            [VersionPoint(version=1, label="v1", served=served, successes=1, failures=0)]
        )
        ticks = re.findall(r'class="tick" text-anchor="end">([^<]+)</text>', svg)
        assert ticks[0] == "0" and ticks[-1] == str(served) and len(set(ticks)) == len(ticks), ticks


def test_a_version_never_served_says_so_instead_of_a_chart(
    api: TestClient, seeded: tuple[Settings, Store]
) -> None:
    _, store = seeded
    never = next(w for w in store.list_workflows() if not w.stats.served)
    page = api.get(f"/workflows/{never.id}").text
    assert "Never served: no run has been given any version of this workflow yet." in page
    assert "<svg" not in page


def test_empty_pages_say_what_is_missing(settings: Settings) -> None:
    api = TestClient(create_app(settings))
    clusters, learning = api.get("/clusters").text, api.get("/learning").text
    assert "No run recorded yet in namespace <b>default</b>" in clusters and "<svg" not in clusters
    assert "No run recorded yet in namespace <b>default</b>" in learning and "<svg" not in learning
    store = store_from(settings)
    store_trajectories(store, simulate(12, seed=1), settings.scrub)
    clusters, learning = api.get("/clusters").text, api.get("/learning").text
    assert 'id="not-induced">No induction run yet' in clusters and "<svg" in clusters
    assert "no cluster" in clusters and '<g class="cluster"' not in clusters
    assert 'id="not-induced">No induction run yet' in learning


def test_the_diff_shows_pitfalls_as_lines_not_a_python_list(settings: Settings) -> None:
    store = store_from(settings)
    store.commit_run(
        InductionRun(id=Store.new_run_id()), [make_workflow("fw", pitfalls=["Look the name up first"])]
    )
    store.put_workflow(
        make_workflow("fw", 2, pitfalls=["Look the name up first", "Never forward to a bare name"])
    )
    page = TestClient(create_app(settings)).get("/workflows/fw/diff", params={"old": 1, "new": 2}).text
    row = page.split('id="field-pitfalls"')[1].split("</tr>")[0]
    assert "[" not in row and "'" not in row and "&#39;" not in row
    old, new = re.findall(r"<td>(.*?)</td>", row, flags=re.S)[1:]
    assert re.findall(r"<li>(?:<bdi>)?([^<]+)", old) == ["Look the name up first"]
    assert re.findall(r'<li( class="added")?><bdi>([^<]+)', new) == [
        ("", "Look the name up first"),
        (' class="added"', "Never forward to a bare name"),
    ]
