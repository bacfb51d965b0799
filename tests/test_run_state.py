"""The typed run state: one codec reads what runs kept before it was typed, a schema migration
rewrites stored states, stores written before it induce incrementally without a refit, and the
placement of new runs is decided from the state and plain columns, without a store.

Two fixtures: `store-0.1.0.tar.gz` (release 0.1.0, its runs kept no fit) and
`store-untyped-state.tar.gz` (commit 12a6edc, schema version 3: its last run placed new tasks
in the stored clusters and kept the untyped dict), each written by that code
(`tests/fixtures/make_*_store.py`).
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from flowmem.induction.base import ClusterInput
from flowmem.induction.cluster.cluster import Clustering
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.induction.plan.bounded import ClusterMembers, Fitted
from flowmem.induction.plan.increment import Columns, Placement, next_state, place_new_runs, thaw
from flowmem.induction.plan.orchestrate import ClusterPlan, fingerprint, task_key
from flowmem.induction.plan.runplan import (
    Limits,
    Opening,
    RunPlan,
    clusters_before,
    fitted_plan,
    open_run,
    place,
    placed_plan,
    refit_reason,
    skipped_plan,
)
from flowmem.jobs.factories import store_from
from flowmem.jobs.induce import RunReport, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import RUN_STATE_VERSION, Fit, InductionRun, Retirement, RunState, Trajectory
from flowmem.settings import Settings
from flowmem.storage import Store
from flowmem.storage.migrations import META, SCHEMA_VERSION, STEPS, schema_version
from tests.factories import cancel, forward, lance_connect, make_workflow

FIXTURES = Path(__file__).parent / "fixtures"
UNTYPED = json.loads((FIXTURES / "store-untyped-state.json").read_text())


def _extract(name: str, tmp_path: Path) -> str:
    with tarfile.open(FIXTURES / name) as tar:
        tar.extractall(tmp_path, filter="data")
    return str(tmp_path / "db")


def _stored_states(db: str) -> list[str]:
    return [r["state"] for r in lance_connect(db).open_table("runs").to_arrow().to_pylist()]


def _induce(store: Store, settings: Settings) -> RunReport:
    return run_induction(store, settings, RuleInducer(), namespace=settings.namespace)


def _again(store: Store, settings: Settings, n: int, tag: str = "again") -> None:
    """Store `n` more runs of tasks the namespace knows (ids ending `-tag`), as production
    stores them."""
    known = [t for t in store.list_trajectories(limit=None) if t.success is not None and not t.parent_id]
    again = [t.model_copy(update={"id": f"{t.id}-{tag}"}) for t in known[:n]]
    assert store_trajectories(store, again, settings.scrub).count == n


# -- the codec ---------------------------------------------------------------------------------


UNTYPED_STATE = {
    "fingerprints": {"a-c0": "f0", "a-c1": "f1"},
    "sizes": {"a-c0": [3, 1], "a-c1": [2, 0]},
    "failed": ["a-c2"],
    "clusters": {"a": {"0": ["k1", "k2"], "1": ["k3"]}},
    "placed": {"a": {"1": ["k4"]}},
    "fit": {"trajectories": 9, "texts": 4, "agents": ["a"], "settings": "sig"},
    "refit": "the first run",
    "subroutines": ["a-c1"],
    "retired": [["a-c5", 2, "active"]],
}
"""Every key a run kept in its state before it was typed (jobs/induce.py at 12a6edc)."""


def test_the_codec_reads_every_key_of_the_untyped_state() -> None:
    state = RunState.from_stored(json.dumps(UNTYPED_STATE))
    assert state.version == RUN_STATE_VERSION
    assert state.fingerprints == {"a-c0": "f0", "a-c1": "f1"}
    assert state.sizes == {"a-c0": (3, 1), "a-c1": (2, 0)}
    assert state.failed == ("a-c2",)
    assert state.clusters == {"a": {0: frozenset({"k1", "k2"}), 1: frozenset({"k3"})}}
    assert state.placed == {"a": {1: frozenset({"k4"})}}
    assert state.fit == Fit(trajectories=9, texts=4, agents=("a",), settings="sig")
    assert state.refit == "the first run" and state.subroutines == ("a-c1",)
    assert state.retired == (Retirement("a-c5", 2, "active"),)
    # Written and read back through the same codec: the same state, the same text.
    text = state.to_stored()
    assert json.loads(text)["version"] == RUN_STATE_VERSION
    assert RunState.from_stored(text) == state and RunState.from_stored(text).to_stored() == text


def test_absent_keys_take_their_defaults_and_a_state_without_sizes_keeps_no_fit() -> None:
    assert RunState.from_stored(None) == RunState.from_stored("{}") == RunState()
    release = {"clusters": {"a": {"0": ["k1"]}}, "failed": [], "fingerprints": {"a-c0": "f0"}}
    state = RunState.from_stored(release)
    assert state.clusters == {"a": {0: frozenset({"k1"})}} and state.placed is None and state.fit is None
    no_sizes = {key: v for key, v in UNTYPED_STATE.items() if key != "sizes"}
    assert RunState.from_stored(no_sizes).fit is None
    assert RunState.from_stored({**UNTYPED_STATE, "placed": []}).placed is None


def test_a_newer_state_is_refused() -> None:
    with pytest.raises(ValueError, match="newer"):
        RunState.from_stored({"version": RUN_STATE_VERSION + 1})


# -- the migration -----------------------------------------------------------------------------


def test_step_3_to_4_types_every_stored_state(tmp_path: Path) -> None:
    db = _extract("store-untyped-state.tar.gz", tmp_path)
    conn = lance_connect(db)
    assert "flowmem_meta" in conn.list_tables().tables and schema_version(conn) == 3
    before = _stored_states(db)
    assert all("version" not in json.loads(s) for s in before)
    STEPS[3](conn)
    after = _stored_states(db)
    assert [RunState.from_stored(s) for s in after] == [RunState.from_stored(s) for s in before]
    assert all(json.loads(s)["version"] == RUN_STATE_VERSION for s in after)
    version = conn.open_table("runs").version
    STEPS[3](conn)  # a concurrent opener or a resumed migration runs it again: no change
    assert _stored_states(db) == after and conn.open_table("runs").version == version


def test_a_store_written_before_the_typed_state_induces_without_a_refit(tmp_path: Path) -> None:
    db = _extract("store-untyped-state.tar.gz", tmp_path)
    settings = Settings(db=db, namespace="default")
    store = store_from(settings)
    runs = store.list_runs()
    assert schema_version(store.db) == SCHEMA_VERSION and META in store.db.list_tables().tables
    assert [{"id": r.id, "refit": r.state.refit} for r in runs] == UNTYPED["runs"]
    assert all(json.loads(s)["version"] == RUN_STATE_VERSION for s in _stored_states(db))
    last = runs[-1].state
    assert last.fit is not None and len(last.fingerprints) == UNTYPED["clusters"]
    assert (
        sum(len(keys) for ids in (last.placed or {}).values() for keys in ids.values()) == UNTYPED["placed"]
    )

    _again(store, settings, 2)
    report = _induce(store, settings)
    assert report.plan.refit is None and report.summary().refit is None
    assert report.plan.changed and len(report.plan.fingerprints) == UNTYPED["clusters"]
    assert report.run.state.fit == last.fit  # placed in the stored clusters, fitted once
    assert store.list_runs()[-1].state == report.run.state  # stored typed, read back equal


def test_the_release_store_refits_once_then_places_new_runs(tmp_path: Path) -> None:
    db = _extract("store-0.1.0.tar.gz", tmp_path)
    settings = Settings(db=db, namespace="default")
    store = store_from(settings)
    assert all(r.state.fit is None for r in store.list_runs())  # 0.1.0 kept no fit
    _again(store, settings, 2)
    first = _induce(store, settings)
    assert first.plan.refit == "the last run kept no clustering to place new tasks in"
    _again(store, settings, 4, "later")
    second = _induce(store, settings)
    assert second.plan.refit is None and second.plan.changed
    assert second.run.state.fit == first.run.state.fit


# -- the plan, without a store -----------------------------------------------------------------


X = ["forward the report to ann", "forward the memo to bob"]
Y = ["cancel the standup", "cancel the review"]


def _columns(rows: Sequence[tuple[str, str, bool | None, list[float]]]) -> Columns:
    return Columns(
        ids=[f"r{i}" for i in range(len(rows))],
        agents=[agent for agent, _, _, _ in rows],
        tasks=[task for _, task, _, _ in rows],
        success=[s for _, _, s, _ in rows],
        vectors=np.array([v for _, _, _, v in rows], dtype=np.float32),
    )


BASE = [("a", X[0], True, [1.0, 0.0]), ("a", X[1], True, [0.9, 0.1]), ("a", Y[0], True, [0.0, 1.0])]
BASE += [("a", Y[1], False, [0.1, 0.9])]


def _state(**update: object) -> RunState:
    """The state a fit of `BASE` leaves: cluster 0 holds the X tasks, cluster 1 the Y tasks."""
    state = RunState(
        fingerprints={
            "a-c0": fingerprint([("r0", True), ("r1", True)]),
            "a-c1": fingerprint([("r2", True), ("r3", False)]),
        },
        sizes={"a-c0": (2, 0), "a-c1": (1, 1)},
        clusters={"a": {0: frozenset(map(task_key, X)), 1: frozenset(map(task_key, Y))}},
        placed={},
        fit=Fit(trajectories=4, texts=4, agents=("a",), settings="sig"),
    )
    return state.model_copy(update=update)


def _place(
    state: RunState, rows: Sequence[tuple[str, str, bool | None, list[float]]], **kw: float
) -> Placement | str:
    return place_new_runs(state, _columns(rows), signature="sig", min_tasks=2, pending=set(), **kw)


def test_a_new_task_joins_the_nearest_cluster_and_only_its_cluster_is_induced() -> None:
    placed = _place(_state(), [*BASE, ("a", "forward the memo to cy", False, [0.8, 0.2])], refit_share=0.5)
    assert isinstance(placed, Placement)
    assert placed.placed == {"a": {0: {task_key("forward the memo to cy")}}}
    assert placed.chosen == {("a", 0): [0, 1, 4]} and not placed.deferred
    assert placed.sizes == {"a-c0": (2, 1), "a-c1": (1, 1)}
    assert placed.fingerprints["a-c1"] == _state().fingerprints["a-c1"]  # unchanged: not induced


def test_a_small_change_to_a_cluster_waits() -> None:
    rows = [*BASE, ("a", X[0], True, [1.0, 0.0])]  # a known task again: nothing to place
    placed = _place(_state(), rows, min_change=0.6)
    assert isinstance(placed, Placement) and not placed.chosen and placed.deferred == ["a-c0"]
    pending = place_new_runs(
        _state(), _columns(rows), signature="sig", min_tasks=2, pending={"a-c0"}, min_change=0.6
    )
    assert isinstance(pending, Placement) and list(pending.chosen) == [("a", 0)]


@pytest.mark.parametrize(
    ("state", "rows", "reason"),
    [
        (_state(fit=None), BASE, "the last run kept no clustering"),
        (_state(placed=None), BASE, "the last run kept no clustering"),
        (_state(fit=Fit(trajectories=4, texts=4, agents=("a",), settings="other")), BASE, "settings changed"),
        (_state(), [*BASE, ("b", "triage the inbox", True, [0.5, 0.5])], "a new agent, b"),
        (_state(), [*BASE, ("a", "archive it", True, [0.5, 0.5])], "1 tasks new since the clusters"),
        (_state(), BASE[:3], "runs the clustering holds are no longer stored"),
    ],
)
def test_why_the_clusters_are_fitted_again(
    state: RunState, rows: list[tuple[str, str, bool | None, list[float]]], reason: str
) -> None:
    why = _place(state, rows)
    assert isinstance(why, str) and reason in why


def test_the_next_state_keeps_a_deferred_clusters_fingerprint_and_forgets_a_failed_one() -> None:
    before = _state(subroutines=("a-c9",))
    state = next_state(
        before,
        fingerprints={"a-c0": "new0", "a-c1": "new1", "a-c2": "new2"},
        sizes={"a-c0": (3, 0), "a-c1": (1, 2), "a-c2": (1, 0)},
        deferred=["a-c0"],
        failed=["a-c2"],
        clusters=thaw(before.clusters) or {},
        placed={"a": {1: {"k"}}},
        fit=before.fit,
        refit=None,
        subroutines=["a-c7"],
        retired=[Retirement("a-c3", 1, "active")],
    )
    assert state.fingerprints == {"a-c0": before.fingerprints["a-c0"], "a-c1": "new1"}
    assert state.sizes == {"a-c0": (2, 0), "a-c1": (1, 2), "a-c2": (1, 0)}
    assert state.failed == ("a-c2",) and state.placed == {"a": {1: frozenset({"k"})}}
    assert state.subroutines == ("a-c9",)  # no fit: the sub-routines are kept
    refit = next_state(
        before,
        fingerprints={},
        sizes={},
        deferred=[],
        failed=[],
        clusters={},
        placed={},
        fit=before.fit,
        refit="why",
        subroutines=["a-c8", "a-c7"],
        retired=[],
    )
    assert refit.subroutines == ("a-c7", "a-c8")


# -- the plan of a run (`induction.plan.runplan`), from the last state and the columns -------------


def _last(state: RunState, *, trajectories: int = 4) -> InductionRun:
    return InductionRun(id="r1", namespace="default", counts={"trajectories": trajectories}, state=state)


def _opening(
    last: InductionRun | None, *, total: int = 4, reinduce: frozenset[str] = frozenset(), force: bool = False
) -> Opening:
    run = InductionRun(id="r2", namespace="default")
    return open_run(run, last, total=total, reinduce=reinduce, force=force)


def test_a_run_opens_with_its_pending_clusters_and_skips_when_nothing_is_new() -> None:
    waiting = _opening(_last(_state(failed=("a-c1",))), reinduce=frozenset({"a-c0-2"}))
    assert waiting.pending == {"a-c1", "a-c0"} and waiting.revive == {"a-c0-2"}  # a variant's cluster
    assert waiting.new_trajectories == 0 and not waiting.nothing_new  # clusters wait for a retry
    idle = _opening(_last(_state()))
    assert idle.nothing_new and not idle.pending
    plan = skipped_plan(idle)
    assert plan.skipped and plan.refit is None and not plan.current and plan.last == idle.last
    assert not _opening(_last(_state()), force=True).nothing_new
    assert not _opening(None, total=0).nothing_new  # a first run always runs
    assert _opening(_last(_state()), total=7).new_trajectories == 3


@pytest.mark.parametrize(
    ("last", "force", "signature", "reason"),
    [
        (None, False, "sig", "the first run"),
        (_state(), True, "sig", "every cluster is induced again"),
        (_state(fit=None), False, "sig", "the last run kept no clustering to place new tasks in"),
        (_state(), False, "other", "the clustering settings changed"),
        (_state(), False, "sig", None),
    ],
)
def test_why_a_run_refits_before_reading_a_column(
    last: RunState | None, force: bool, signature: str, reason: str | None
) -> None:
    opening = _opening(_last(last) if last else None, force=force)
    assert refit_reason(opening, signature=signature) == reason
    placed = place(opening, _columns(BASE), Limits(signature=signature, min_tasks=2))
    assert placed == reason if reason else isinstance(placed, Placement)


def test_a_placed_plan_induces_the_pending_cluster_defers_the_small_change_revives_the_retired() -> None:
    state = _state(failed=("a-c1",))
    opening = _opening(_last(state), total=5)
    rows = [*BASE, ("a", X[0], True, [1.0, 0.0])]  # a known task again: a small change to a-c0
    placement = place(opening, _columns(rows), Limits(signature="sig", min_tasks=2, min_change=0.6))
    assert isinstance(placement, Placement) and list(placement.chosen) == [("a", 1)]
    inputs = [ClusterInput("default", "a", 1, "subtask", [], [])]
    current = {"a-c1": make_workflow("a-c1", status="retired"), "a-c0": make_workflow("a-c0")}
    plan = placed_plan(opening, current, placement, inputs, task_of={"r4": X[0]})
    assert [c.key for c in plan.changed] == ["a-c1"] and plan.deferred == ("a-c0",)
    assert plan.refit is None and plan.fit == state.fit and not plan.skipped
    assert plan.revive == {"a-c1"} and plan.clusters.memberships == thaw(state.clusters)
    after = plan.next_state(failed=[], retired=[])
    assert after.fingerprints["a-c0"] == state.fingerprints["a-c0"]  # deferred: still owed
    assert after.sizes["a-c0"] == state.sizes["a-c0"] and after.failed == ()
    assert after.fingerprints["a-c1"] == placement.fingerprints["a-c1"]
    assert "a-c1" not in plan.next_state(failed=["a-c1"], retired=[]).fingerprints


def _fitted(runs: Sequence[Trajectory]) -> ClusterPlan:
    """A fit of `runs` (one agent): forwarding tasks in cluster 0, the others in cluster 1."""
    groups = [[t for t in runs if "Forward" in t.task], [t for t in runs if "Forward" not in t.task]]
    texts = sorted({t.task for t in runs})
    labels = np.array([0 if "Forward" in text else 1 for text in texts], dtype=np.int64)
    return ClusterPlan(
        [ClusterInput("default", "agent", cid, "subtask", group, []) for cid, group in enumerate(groups)],
        clusterings={"agent": Clustering(texts, labels)},
        memberships={"agent": {cid: {task_key(t.task) for t in group} for cid, group in enumerate(groups)}},
    )


def _members(runs: Sequence[Trajectory]) -> Fitted:
    """`_fitted` as a fit in bounded memory hands it on: its clusters as their members' ids."""
    plan = _fitted(runs)
    members = [
        ClusterMembers(
            c.namespace,
            c.agent,
            c.cluster_id,
            c.scope,
            tuple(t.id for t in c.successes),
            tuple(t.id for t in c.failures),
        )
        for c in plan.clusters
    ]
    texts = len(plan.clusterings["agent"].texts)
    return Fitted(replace(plan, clusters=[]), members, texts=texts, trajectories=len(runs))


def test_a_refitted_plan_induces_the_changed_and_pending_clusters_and_records_its_fit() -> None:
    runs = [forward(i) for i in range(3)] + [cancel(i) for i in range(2)]
    fitted = _members(runs)
    prints = _fitted(runs).fingerprints()
    assert prints == {c.key: c.fingerprint() for c in fitted.members}  # the same clusters, as ids
    state = _state(fingerprints={"agent-c0": prints["agent-c0"], "agent-c1": "before"}, clusters={})
    last = _last(state, trajectories=5)
    task_of = {t.id: t.task for t in runs}

    def plan(opening: Opening, why: str = "w", signature: str = "s") -> RunPlan:
        return fitted_plan(opening, {}, fitted, task_of=task_of, why=why, signature=signature)

    planned = plan(_opening(last, total=5), why="because", signature="sig2")
    assert [c.key for c in planned.changed] == ["agent-c1"]  # agent-c0 holds the same runs
    assert planned.refit == "because" and planned.sizes == {"agent-c0": (3, 0), "agent-c1": (2, 0)}
    assert planned.fit == Fit(trajectories=5, texts=fitted.texts, agents=("agent",), settings="sig2")
    assert planned.task_of == task_of and planned.placed is fitted.plan.placed
    retry = _opening(_last(state.model_copy(update={"failed": ("agent-c0",)})), total=5)
    assert len(plan(retry).changed) == 2
    forced = _opening(last, total=5, force=True)
    assert len(plan(forced).changed) == 2
    assert plan(forced).next_state(failed=[], retired=[]).refit == "w"


def test_a_refit_keeps_ids_from_the_last_fit_or_else_from_the_current_workflows() -> None:
    runs = [forward(i) for i in range(3)]
    kept = _opening(_last(_state()))
    assert clusters_before(kept, {}, runs) == thaw(_state().clusters)
    w = make_workflow("agent-c4", cluster_id=4, source_trajectory_ids=[t.id for t in runs])
    none_kept = _opening(_last(_state(clusters={})))
    assert clusters_before(none_kept, {w.id: w}, runs) == {"agent": {4: {task_key(t.task) for t in runs}}}
    assert clusters_before(_opening(None), {}, runs) == {}
