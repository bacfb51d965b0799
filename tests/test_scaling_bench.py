"""What `bench/scaling.py --dask` rests on: `same_stores` says two stores hold the same
workflows and runs when the same induction of the same data committed them (at other times,
under other run ids), and not once one of them has run another induction."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scaling import committed, flow_env, same_stores
from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.settings import Settings


def _induced(db: str, *batches: int) -> None:
    """Each batch of simulated tasks stored in `db`, then induced."""
    settings = Settings(db=db)
    store = store_from(settings)
    for seed, n in enumerate(batches, start=5):
        store_trajectories(store, simulate(n, seed=seed), settings.scrub)
        run_induction(store, settings, RuleInducer(), namespace=settings.namespace)


def test_the_same_induction_in_two_stores_is_the_same_and_another_run_is_not(tmp_path: Path) -> None:
    here, there, more = (str(tmp_path / name) for name in ("here", "there", "more"))
    _induced(here, 60)
    _induced(there, 60)
    _induced(more, 60, 12)  # the same first run, then new runs placed and induced
    workflows, runs = committed(here)
    assert len(runs) == 1 and len(workflows) > 3
    assert store_from(Settings(db=here)).list_runs()[0].id != store_from(Settings(db=there)).list_runs()[0].id
    assert same_stores([here, there]) == {
        "identical": True,
        "workflows": len({w["id"] for w in workflows}),
        "versions": len(workflows),
        "runs": 1,
    }
    assert same_stores([here, there, more])["identical"] is False
    assert committed(more)[1][0] == runs[0]  # the first run is the same; the second is what differs


def test_a_flow_child_gets_the_runner_it_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOWMEM_DASK_ADDRESS", "tcp://10.0.0.5:8786")  # this shell's: not the child's
    env = flow_env("/tmp/db", "http://127.0.0.1:1/api", "/tmp/home", "local:2")
    assert (env["FLOWMEM_DB"], env["FLOWMEM_DASK_ADDRESS"]) == ("/tmp/db", "local:2")
    assert env["PREFECT_API_URL"] == "http://127.0.0.1:1/api"
    assert "FLOWMEM_DASK_ADDRESS" not in flow_env("/tmp/db", "http://127.0.0.1:1/api", "/tmp/home", None)
