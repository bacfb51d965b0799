"""Retirement: a workflow an earlier run induced, whose cluster is gone or was induced again
without it, is retired by the next run: never served, still readable, undone by a rollback."""

from __future__ import annotations

import pytest

from flowmem.demo import simulate
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.induce import run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Provenance
from flowmem.retrieval.serving import served_versions
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import make_workflow


def _served_ids(store: Store, ns: str) -> set[str]:
    return {w.id for w in store.served_workflows(namespace=ns)}


def test_a_run_retires_what_its_clusters_no_longer_hold_and_a_rollback_serves_it_again(
    store: Store, settings: Settings
) -> None:
    ns = settings.namespace
    store_trajectories(store, simulate(60, seed=3), settings.scrub)
    first = run_induction(store, settings, RuleInducer(), namespace=ns)
    assert first.versions and first.retired == []
    induced = {w.id for w in first.versions}
    kept = sorted(induced)[0]
    # As an earlier run would have left them: a workflow of a cluster that no re-clustering
    # gives any more, a variant of a cluster that the next run induces again, and one put
    # by hand (never induced by a run: never retired).
    stale = make_workflow("agent-c99", provenance=Provenance(inducer="rule", run_id=first.run.id))
    variant = make_workflow(f"{kept}-9", provenance=Provenance(inducer="rule", run_id=first.run.id))
    hand = make_workflow("handmade")
    for w in (stale, variant, hand):
        store.put_workflow(w)
    assert {"agent-c99", f"{kept}-9", "handmade"} <= _served_ids(store, ns)

    second = run_induction(store, settings, RuleInducer(), namespace=ns, force=True)
    assert second.summary().retired == sorted(["agent-c99", f"{kept}-9"])
    assert {(t.workflow_id, t.cause) for t in second.retired} == {
        ("agent-c99", "gone"),
        (f"{kept}-9", "replaced"),
    }
    served = _served_ids(store, ns)
    assert "agent-c99" not in served and f"{kept}-9" not in served
    assert "handmade" in served and induced <= served  # nothing else is retired
    old = store.get_workflow("agent-c99", version=1, namespace=ns)  # still readable by version
    assert old.status == "retired" and old.steps == stale.steps
    log = store.transitions(namespace=ns, workflow_id="agent-c99")
    assert [(r.old, r.new, r.cause) for r in log] == [("candidate", "retired", "gone")]
    assert second.run.counts["retired"] == 2

    store.rollback(second.run.id, namespace=ns)
    assert {"agent-c99", f"{kept}-9"} <= _served_ids(store, ns)  # as before the run
    again = run_induction(store, settings, RuleInducer(), namespace=ns, force=True)
    assert again.summary().retired == sorted(["agent-c99", f"{kept}-9"])


def test_retired_versions_are_never_served() -> None:
    active = make_workflow("w", 1, status="active")
    retired = make_workflow("w", 2, steps=3, status="retired")
    assert served_versions([active, retired]) == [active]
    assert served_versions([make_workflow("x", status="retired")]) == []


def test_promote_deprecate_retire_by_hand_are_recorded_with_who_and_why(
    store: Store, settings: Settings
) -> None:
    from flowmem.jobs.status import set_status
    from flowmem.storage import StoreError

    ns = settings.namespace
    store.put_workflow(make_workflow("w", 1))
    store.put_workflow(make_workflow("w", 2, steps=3))
    [t] = set_status(store, "w", "promote", namespace=ns, version=1, why="checked by hand", by="ana")
    assert (t.version, t.old, t.new, t.cause, t.reason) == (
        1,
        "candidate",
        "active",
        "manual",
        "checked by hand (by ana)",
    )
    done = set_status(store, "w", "promote", namespace=ns, why="v2 is better", by="ana")
    assert [(t.version, t.new) for t in done] == [(2, "active"), (1, "deprecated")]
    assert [w.version for w in served_versions(store.history("w", namespace=ns))] == [2]
    assert set_status(store, "w", "promote", namespace=ns, why="again", by="ana") == []  # already so
    with pytest.raises(StoreError, match="no version 7"):
        set_status(store, "w", "deprecate", namespace=ns, version=7, why="x", by="ana")
    with pytest.raises(StoreError, match="say why"):
        set_status(store, "w", "retire", namespace=ns, why=" ", by="ana")
    [t] = set_status(store, "w", "retire", namespace=ns, why="obsolete tool", by="bo")
    assert (t.version, t.new) == (2, "retired") and "w" not in _served_ids(store, ns)
    log = store.transitions(namespace=ns, workflow_id="w")
    assert (
        log[-1].reason == "obsolete tool (by bo)"
        and store.get_workflow("w", namespace=ns).status == "retired"
    )


def test_the_cli_retires_a_workflow_in_one_line(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from flowmem.cli import app
    from flowmem.jobs.factories import store_from

    store_from(settings).put_workflow(make_workflow("w", 1))
    monkeypatch.setenv("FLOWMEM_DB", settings.db)
    result = CliRunner().invoke(app, ["workflows", "retire", "w", "--why", "tool removed", "--by", "ops"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "w v1: candidate -> retired (tool removed (by ops))"
    missing = CliRunner().invoke(app, ["workflows", "deprecate", "nope", "--why", "x"])
    assert missing.exit_code == 1 and "Traceback" not in missing.output
