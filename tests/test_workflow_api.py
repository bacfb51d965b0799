"""The familiar workflow-memory API (`add_workflow` / `search_workflow`) on a real store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from flowmem import WorkflowMemory
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.induce import run_induction
from flowmem.settings import Settings

DEPLOY = [
    "Run unit and integration tests",
    "Build Docker image",
    "Push image to registry",
    "Update Kubernetes deployment",
    "Verify health checks",
]


# -- the usage examples, as code written against the common API has them -----------------


async def record_success(memory: Any) -> str:
    return str(
        await memory.add_workflow(
            task="Deploy application to production",
            steps=DEPLOY,
            outcome="Application deployed and healthy",
            result="Deployed v2.1.0 successfully",
        )
    )


async def record_failure(memory: Any) -> str:
    return str(
        await memory.add_workflow(
            task="Deploy application to staging",
            steps=["Build Docker image", "Push image to registry", "Update Kubernetes deployment"],
            outcome="Deployment did not become healthy",
            result="FAILED: health checks timed out after the rollout",
        )
    )


async def plan(memory: Any, task: str) -> tuple[list[str], list[str]]:
    """The agent's logic: follow what worked, avoid what failed."""
    follow: list[str] = []
    avoid: list[str] = []
    found = await memory.search_workflow(task, k=3)
    for wf in found:
        steps = wf.metadata.get("steps", [])
        result = wf.metadata.get("result") or ""
        print(wf.metadata["task"], "->", wf.metadata["outcome"])
        if result.startswith("FAILED"):
            avoid.extend(steps)
        else:
            follow.extend(steps)
    return follow, avoid


# -- tests ------------------------------------------------------------------------------


def test_the_usage_examples_run_unchanged_on_a_real_store(tmp_path: Path) -> None:
    async def main() -> None:
        memory = WorkflowMemory.open(str(tmp_path / "db"))
        ok = await record_success(memory)
        failed = await record_failure(memory)
        follow, avoid = await plan(memory, "deploy application")
        assert follow == DEPLOY
        assert avoid == ["Build Docker image", "Push image to registry", "Update Kubernetes deployment"]
        found = await memory.search_workflow("deploy application")
        assert {f.id for f in found} == {ok, failed}
        assert {f.id: f.kind for f in found} == {ok: "procedure", failed: "failure"}
        assert found[0].metadata["score"] >= found[1].metadata["score"]
        stored = memory.store.get_trajectory(failed)
        assert stored.success is False and stored.source == "add_workflow"
        assert memory.store.get_trajectory(ok).success is True
        memory.close()

    asyncio.run(main())


def test_sync_twins_and_a_result_not_known_yet(tmp_path: Path) -> None:
    with WorkflowMemory.open(Settings(db=str(tmp_path / "db"))) as memory:
        rotate = ["Create new key", "Revoke old key"]
        wid = memory.add_workflow_sync("Rotate the API keys", rotate, "Keys rotated")
        assert memory.store.get_trajectory(wid).success is None
        [found] = memory.search_workflow_sync("rotate keys", k=1)
        assert found.metadata["result"] is None and found.metadata["steps"] == rotate
        with pytest.raises(ValueError, match="steps must be a non-empty list"):
            memory.add_workflow_sync("x", [], "y")
        with pytest.raises(ValueError, match="k must be at least 1"):
            memory.search_workflow_sync("x", k=0)


def test_similar_procedures_are_induced_into_one_workflow_that_search_returns(tmp_path: Path) -> None:
    settings = Settings(db=str(tmp_path / "db"))
    services = ["billing", "search", "checkout", "profile", "gateway"]
    with WorkflowMemory.open(settings) as memory:
        for i, service in enumerate(services):
            memory.add_workflow_sync(
                f"Deploy the {service} service to production",
                DEPLOY,
                outcome="Service deployed and healthy",
                result=f"Deployed {service} v1.{i} successfully",
            )
        memory.add_workflow_sync(
            "Deploy the ledger service to production",
            DEPLOY[1:4],
            outcome="Service deployed and healthy",
            result="FAILED: rollout stuck, tests had not run",
        )
        report = run_induction(memory.store, settings, RuleInducer(), namespace=settings.namespace)
        [workflow] = report.versions
        assert workflow.actions == DEPLOY
        found = memory.search_workflow_sync("deploy the payments service to production", k=3)
        first = found[0]
        assert first.kind == "workflow" and first.workflow is not None and first.id == workflow.id
        meta = first.metadata
        assert meta["steps"] == DEPLOY and meta["outcome"] == "Service deployed and healthy"
        assert meta["result"] == "induced from 5 successful runs" and meta["version"] == 1
        assert len(meta["task"].split()) >= 4  # the workflow's description: when to use it
        text = memory.context("deploy the payments service to production", k=1)
        assert "1. Run unit and integration tests\n" in text  # prose steps render as prose
        # The procedures it was induced from are not returned again; the failed one still is,
        # as the failure it was: where it left the workflow.
        assert [f.kind for f in found[1:]] == ["failure"]
        assert found[1].metadata["result"].startswith("FAILED")
        assert (
            found[1].metadata["went_wrong"]
            == "skipped Run unit and integration tests, then called Build Docker image"
        )


def test_deploys_that_differ_only_in_their_version_are_one_workflow_with_a_pitfall(tmp_path: Path) -> None:
    """Three deploys of one procedure, the version in their step texts, and one that failed
    without the migrations: one workflow, the version a placeholder, the failure a pitfall."""
    settings = Settings(db=str(tmp_path / "db"))
    versions = ["2.4.1", "2.4.2", "2.5.0"]

    def steps(v: str, *, migrate: bool = True) -> list[str]:
        done = [f"Build Docker image app:{v}", f"Push app:{v} to the registry"]
        done += ["Run database migrations"] if migrate else []
        return [*done, f"Deploy app:{v} to production", "Verify the health checks"]

    with WorkflowMemory.open(settings) as memory:
        for v in versions:
            memory.add_workflow_sync(
                f"Deploy version {v} of the app to production", steps(v), "App deployed", f"Deployed {v}"
            )
        failed = memory.add_workflow_sync(
            "Deploy version 2.5.1 of the app to production",
            steps("2.5.1", migrate=False),
            "App deployed",
            "FAILED: the app crashed, the migrations had not run",
        )
        stored = memory.store.get_trajectory(failed)
        assert stored.steps[0].action == "Build Docker image {image}" and stored.steps[0].args == {
            "image": "app:2.5.1"
        }
        report = run_induction(memory.store, settings, RuleInducer(), namespace=settings.namespace)
        [workflow] = report.versions
        assert len(workflow.source_trajectory_ids) == 3
        text = memory.context("Deploy version 3.0.0 of the app to production", k=1)
        assert "1. Build Docker image {image}\n" in text and "4. Deploy {image} to {destination}\n" in text
        assert [p.text for p in workflow.pitfalls] == [
            "called Deploy {image} to {destination} without calling Run database migrations (1/1 failures)"
        ]
        assert "Pitfall: called Deploy {image} to {destination} without calling Run database" in text
        assert not any(v in text for v in [*versions, "2.5.1"])
        assert "()" not in text and " then 1." not in text
        [found, procedure] = memory.search_workflow_sync("deploy version 3.0.0 of the app", k=2)
        assert found.kind == "workflow" and found.metadata["steps"][0] == "Build Docker image {image}"
        # The failed procedure is returned as the failure it was, for code that avoids what
        # failed: its steps as the workflow's are written, with no value of its run.
        assert procedure.id == failed and procedure.kind == "failure"
        assert procedure.metadata["steps"] == [
            "Build Docker image {image}",
            "Push {image} to the registry",
            "Deploy {image} to {destination}",
            "Verify the health checks",
        ]
        assert procedure.metadata["task"] == "Deploy version {version} of the app to {destination}"
        assert procedure.metadata["result"] == "FAILED: the app crashed, the migrations had not run"
