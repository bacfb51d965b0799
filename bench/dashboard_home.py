"""The dashboard's home page over 10,000 workflows: server time per request, p50.

Seeds a store through flowmem's own API (one induction-run commit of N workflows, 1,000
recorded runs of which half were served a workflow, usage stats), then times GET / in process
(FastAPI's TestClient: the request's whole handling, no network):

- cold: the first request after the store changed (reads every workflow's listing columns);
- warm: later requests (the listing is cached until a table version moves): page 1, a deep
  page, a filter, and the search box.

Usage: python bench/dashboard_home.py [N]   (default: 10000)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

if not __package__:  # run as `python bench/dashboard_home.py`: import bench.* from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.data import THINGS, VERBS, team_description, words, workflow
from flowmem.jobs.factories import store_from
from flowmem.models import InductionRun, Step, Trajectory, UsageStats, Workflow, WorkflowRef, WorkflowStep
from flowmem.server.api import create_app
from flowmem.settings import Settings


def workflows(n: int) -> list[Workflow]:
    out = []
    for i in range(n):
        verb, thing = words(i)
        out.append(
            workflow(
                i,
                description=team_description(i),
                steps=[
                    WorkflowStep(action=f"{thing}.search", args={"query": "{query}"}),
                    WorkflowStep(action=f"{thing}.{verb}", args={"id": "{id}"}),
                ],
                parameters={"query": "task", "id": "result of step 1"},
                agent="helper" if i % 4 == 0 else "agent",
                status="active" if i % 3 else "candidate",
                cluster_id=i,
                source_trajectory_ids=[f"t{i % 1000:04d}"],
            )
        )
    return out


def runs(n: int, start: int = 0) -> list[Trajectory]:
    return [
        Trajectory(
            id=f"t{i:04d}",
            task=f"{VERBS[i % 9]} the {THINGS[i % 7]} for team {i}",
            steps=[Step(action=f"{THINGS[i % 7]}.search", args={"query": str(i)})],
            success=i % 3 != 0,
            workflows_used=[WorkflowRef(id=f"w{i:07d}", version=1)] if i % 2 else [],
        )
        for i in range(start, start + n)
    ]


def timed(api: TestClient, path: str, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        response = api.get(path)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return times


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    run(int(argv[0]) if argv else 10_000)
    return 0


def run(n: int) -> None:
    """Seed a store of `n` workflows and time the home page on it."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(db=f"{tmp}/db")
        store = store_from(settings)
        start = time.perf_counter()
        store.commit_run(InductionRun(id="bench"), workflows(n))
        store.insert_trajectories(runs(1_000))
        store.put_usage(
            {(f"w{i:07d}", 1): UsageStats(served=3, successes=2, failures=1) for i in range(0, n, 2)}
        )
        print(f"seeded {n:,} workflows and 1,000 runs in {time.perf_counter() - start:.1f} s")
        api = TestClient(create_app(settings))
        cold = []
        for i in range(5):
            store.put_usage({("w0000000", 1): UsageStats(served=i + 4)})  # the store moved: no cache
            cold += timed(api, "/", 1)
        busy = []
        for i in range(5):
            store.insert_trajectories(runs(1, start=1_000 + i))  # an agent's run is stored
            busy += timed(api, "/", 1)
        cases = {
            "warm, page 1": "/",
            "warm, page 150": "/?page=150",
            "warm, status=candidate, page 20": "/?status=candidate&page=20",
            "warm, search box": "/?q=archive+the+invoice+for+team+7",
        }
        print(f"{'GET /':<34} {'p50 ms':>8} {'min':>7} {'max':>7}")
        for label, times in (
            ("cold (after a new version), 5 runs", cold),
            ("after a run is stored, 5 runs", busy),
        ):
            print(f"{label:<34} {statistics.median(times):8.1f} {min(times):7.1f} {max(times):7.1f}")
        for label, path in cases.items():
            times = timed(api, path, 30)
            print(f"{label:<34} {statistics.median(times):8.1f} {min(times):7.1f} {max(times):7.1f}")


if __name__ == "__main__":
    raise SystemExit(main())
