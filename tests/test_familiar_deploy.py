"""The familiar API tried as a new user would (issue 38): deploys written down as free text.

Four successful deploys of `v2.3.1`…`v2.4.1`, to staging and to production, and two failed
ones that skipped the tests (each task says "Deploy version X to the Y environment"),
through the real API (`add_workflow_sync` × 6, the rule inducer, the offline embedder, a
store in a temporary directory). One deploy workflow with `{version}` and `{environment}` and
its "skipped the tests" pitfall; every surface (`search_workflow`, `memory.context`,
`memory.search`, `flowmem search`) gives a query the same answer under one relevance rule;
and nothing any of them returns carries a run's example values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flowmem import WorkflowMemory
from flowmem.agents.procedures import FoundWorkflow
from flowmem.cli import app
from flowmem.induction.inducers.rule import RuleInducer
from flowmem.jobs.induce import run_induction
from flowmem.models import Workflow
from flowmem.settings import Settings

DEPLOYED = ["v2.3.1", "v2.3.2", "v2.4.0", "v2.4.1"]
FAILED = ["v2.5.0", "v2.5.1"]
ENVIRONMENTS = ["staging", "production"]
"""Where each deploy went, in turn: staging and production deploys differ only in a value."""
REGISTRY = "registry.example.com"
EXAMPLE_VALUES = [*(v[1:] for v in DEPLOYED + FAILED), REGISTRY, "example.com", "/app:"]
"""What no surface may return: the runs' versions (with or without their "v") and registry path."""

PRODUCTION = "Deploy version v3.0.0 to the production environment"
STAGING = "Deploy version v3.0.0 to the staging environment"


def steps(version: str, environment: str, *, tests: bool = True) -> list[str]:
    done = ["run tests"] if tests else []
    return [
        *done,
        f"build docker image tag {version}",
        f"push to {REGISTRY}/app:{version}",
        f"deploy {version} to {environment}",
    ]


def record(memory: WorkflowMemory, versions: list[str], *, failed: bool) -> None:
    for i, v in enumerate(versions):
        environment = ENVIRONMENTS[i % 2]
        memory.add_workflow_sync(
            f"Deploy version {v} to the {environment} environment",
            steps(v, environment, tests=not failed),
            f"the new version runs on {environment}",
            "FAILED: the app crashed on start; the tests had not run" if failed else f"deployed {v}",
        )


@pytest.fixture(scope="module")
def deploys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WorkflowMemory, Workflow]]:
    """The six deploys recorded and induced once; the memory and the one workflow induced."""
    settings = Settings(db=str(tmp_path_factory.mktemp("familiar") / "db"))
    with WorkflowMemory.open(settings) as memory:
        record(memory, DEPLOYED, failed=False)
        record(memory, FAILED, failed=True)
        report = run_induction(memory.store, settings, RuleInducer(), namespace=settings.namespace)
        [workflow] = report.versions
        yield memory, workflow


def served(found: list[FoundWorkflow]) -> str:
    """Everything `search_workflow` returned, as one text."""
    texts = [json.dumps(f.metadata, default=str) for f in found]
    texts += [f.workflow.model_dump_json() for f in found if f.workflow is not None]
    return "\n".join(texts)


def leaked(text: str) -> list[str]:
    return [v for v in EXAMPLE_VALUES if v in text]


def cli_search(memory: WorkflowMemory, task: str) -> list[dict[str, Any]]:
    env = {"FLOWMEM_DB": memory.settings.db, "FLOWMEM_NAMESPACE": memory.settings.namespace}
    result = CliRunner().invoke(app, ["search", task, "--json"], env=env)
    assert result.exit_code == 0, result.output
    found: list[dict[str, Any]] = json.loads(result.output)
    return found


def words(name: str) -> list[str]:
    return [w for w in re.split(r"[\s_]+", name) if w]


def test_the_deploys_are_one_workflow_with_the_pitfall_of_the_failed_ones(
    deploys: tuple[WorkflowMemory, Workflow],
) -> None:
    _, workflow = deploys
    assert len(workflow.source_trajectory_ids) == len(DEPLOYED)
    assert [p for p in workflow.pitfalls if "run tests" in p.text], workflow.pitfalls
    assert workflow.actions[0] == "run tests" and len(workflow.parameters) >= 1
    assert leaked(workflow.model_dump_json()) == []
    # A name a person would give it: what the tasks ask, without their values.
    assert workflow.name == "deploy_version_to_environment" and len(words(workflow.name)) <= 5
    assert workflow.description.startswith("Use to deploy {version} to {environment}")


def test_the_workflow_has_a_version_and_an_environment_placeholder(
    deploys: tuple[WorkflowMemory, Workflow],
) -> None:
    _, workflow = deploys
    text = " ".join(f"{s.action} {json.dumps(s.args)}" for s in workflow.steps)
    assert "{version}" in text and "{environment}" in text, text


def test_every_surface_gives_the_production_query_the_same_answer(
    deploys: tuple[WorkflowMemory, Workflow],
) -> None:
    """The workflow or nothing, from every surface alike: one relevance floor. (With the
    offline hashing embedder the production query is 0.30 similar to the staging tasks, under
    its floor of 0.40, so today it is nothing: `settings.EMBEDDER_FLOORS`.)"""
    memory, workflow = deploys
    hits = memory.search(PRODUCTION)
    found = memory.search_workflow_sync(PRODUCTION)
    context = memory.context(PRODUCTION)
    listed = cli_search(memory, PRODUCTION)
    if hits:
        assert [h.workflow.id for h in hits] == [workflow.id]
        assert found[0].kind == "workflow" and found[0].id == workflow.id
        assert workflow.name in context and [w["id"] for w in listed] == [workflow.id]
    else:
        assert found == [] and context == "" and listed == []
    assert all(f.kind != "procedure" or not str(f.metadata["result"]).startswith("FAILED") for f in found)
    assert leaked(served(found)) == [] and leaked(context) == [] and leaked(json.dumps(listed)) == []


def test_a_staging_deploy_gets_the_workflow_first_and_the_failure_as_it_was(
    deploys: tuple[WorkflowMemory, Workflow],
) -> None:
    memory, workflow = deploys
    found = memory.search_workflow_sync(STAGING, k=3)
    first, *rest = found
    assert first.kind == "workflow" and first.id == workflow.id
    assert (
        first.metadata["pitfalls"] == [p.text for p in workflow.pitfalls]
        and first.metadata["steps"][0] == "run tests"
    )
    assert first.metadata["outcome"] == "the new version runs on {environment}"
    # The two failed runs read alike once abstracted: one failure, never steps to follow.
    [failure] = rest
    meta = failure.metadata
    assert failure.kind == "failure" and meta["runs"] == len(FAILED)
    assert meta["result"] == "FAILED: the app crashed on start; the tests had not run"
    assert meta["went_wrong"] is not None and meta["went_wrong"].startswith("skipped run tests")
    assert "run tests" not in meta["steps"] and meta["task"] != meta["steps"]
    assert leaked(served(found)) == []
    # The same answer from the other surfaces, without a value of the runs either.
    assert [h.workflow.id for h in memory.search(STAGING)] == [workflow.id]
    context = memory.context(STAGING)
    assert "without calling run tests" in context and leaked(context) == []
    assert [w["id"] for w in cli_search(memory, STAGING)] == [workflow.id]


def test_the_seed_usage_follows_the_workflow_and_avoids_the_failure(
    deploys: tuple[WorkflowMemory, Workflow],
) -> None:
    """Code written against the common API branches on `result` starting with "FAILED"."""
    memory, workflow = deploys
    follow: list[str] = []
    avoid: list[str] = []
    for wf in memory.search_workflow_sync(STAGING, k=3):
        result = wf.metadata.get("result") or ""
        (avoid if result.startswith("FAILED") else follow).extend(wf.metadata.get("steps", []))
    assert follow == [
        "run tests",
        *(s for s in memory.search_workflow_sync(STAGING, k=1)[0].metadata["steps"][1:]),
    ]
    assert avoid and "run tests" not in avoid and leaked(" ".join(follow + avoid)) == []
    assert len(follow) == len(workflow.steps)


def test_recorded_procedures_not_induced_yet_are_served_abstracted_under_the_same_floor(
    tmp_path: Path,
) -> None:
    """Before any induction: each recorded procedure is one run, so it is served with its
    values as placeholders, and only when the floor lets its task through."""
    with WorkflowMemory.open(Settings(db=str(tmp_path / "db"))) as memory:
        record(memory, DEPLOYED[:1], failed=False)  # each to staging (the first of a record)
        record(memory, DEPLOYED[2:3], failed=False)
        record(memory, FAILED[:1], failed=True)
        found = memory.search_workflow_sync(STAGING, k=3)
        assert sorted(f.kind for f in found) == ["failure", "procedure"]
        procedure = next(f for f in found if f.kind == "procedure")
        assert procedure.metadata["runs"] == 2 and procedure.metadata["steps"] == [
            "run tests",
            "build docker image tag {version}",
            "push to {value}",
            "deploy {version} to {environment}",
        ]
        assert procedure.metadata["task"] == "Deploy version {version} to the {environment} environment"
        assert procedure.metadata["result"] == "deployed {version}"
        failure = next(f for f in found if f.kind == "failure")
        assert failure.metadata["result"].startswith("FAILED") and failure.metadata["went_wrong"] is None
        assert leaked(served(found)) == []
        # A request of no domain the store knows is under the floor for them as for
        # `memory.search`: nothing.
        elsewhere = "Book a table for two at an Italian restaurant tonight"
        assert memory.search_workflow_sync(elsewhere) == [] and memory.search(elsewhere) == []
