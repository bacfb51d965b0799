"""LLM faults, end to end: induction runs against a local OpenAI-compatible stub that injects
timeouts, 429s, 500s and bad outputs. Runs complete, transient faults are retried by the
client, bad outputs are re-asked once or the cluster fails, counts are reported, and what was
served before stays served."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from flowmem.agents.memory import WorkflowMemory
from flowmem.induction.inducers.llm import LLMInducer
from flowmem.jobs.induce import RunReport, run_induction
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory
from flowmem.providers.openai import OpenAILLM, llm_from_settings
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import cancel, forward, remind
from tests.llm_stub import LLMStub

TIMEOUT = 0.5
"""The client's timeout per request (`llm_timeout`), in seconds."""
RETRY_AFTER = 1.0
"""What the stub's 429s ask the client to wait: twice the client's longest first backoff."""


def corpus() -> list[Trajectory]:
    """Three task families, four runs each: three clusters."""
    return [family(i) for family in (forward, cancel, remind) for i in range(4)]


@pytest.fixture
def stub() -> Iterator[LLMStub]:
    with LLMStub(retry_after=RETRY_AFTER) as s:
        yield s


@pytest.fixture
def llm(settings: Settings, stub: LLMStub) -> Iterator[OpenAILLM]:
    configured = settings.model_copy(
        update={
            "llm_model": "stub-model",
            "llm_base_url": stub.url,
            "llm_timeout": TIMEOUT,
            "llm_max_retries": 2,
        }
    )
    client = llm_from_settings(configured)
    yield client
    client.close()


def served(store: Store, settings: Settings) -> dict[str, Any]:
    """What agents are served: each workflow's latest version and content, and search hits."""
    latest = {w.id: (w.version, w.content_hash()) for w in store.list_workflows()}
    with WorkflowMemory(settings, store=store) as memory:
        hits = {
            task: [(h.workflow.id, h.workflow.version) for h in memory.search(task, k=1)]
            for task in (
                "Forward the latest email about 'Q3 numbers' to nadia",
                "Cancel my next meeting with raj",
            )
        }
    return {"latest": latest, "hits": hits}


def figures(report: RunReport) -> dict[str, Any]:
    s = report.summary()
    keys = {"clusters_changed", "versions_created", "llm_calls", "llm_retries", "llm_rejected"}
    return s.model_dump(include=keys) | {"failed": sorted(s.failed_clusters)}


def test_faults_are_retried_or_rejected_counted_and_never_replace_served_versions(
    settings: Settings, store: Store, stub: LLMStub, llm: OpenAILLM
) -> None:
    store_trajectories(store, corpus(), settings.scrub)
    inducer = LLMInducer(llm)

    # Run 1. Cluster by cluster (c0 cancel, c1 forward, c2 remind), the stub answers:
    # c0: timeout, 500 (the client retries both), then a leaking workflow (re-asked), then ok;
    # c1: 429 (retried after its Retry-After), then malformed JSON (re-asked), then ok;
    # c2: truncated JSON (re-asked), then off-schema JSON: the cluster fails.
    script = ["timeout", "500", "leak", "ok", "429", "malformed", "ok", "truncated", "schema"]
    stub.push(*script)
    first = run_induction(store, settings, inducer, namespace=settings.namespace)
    assert stub.faults() == script
    assert [r.task.split()[0] for r in stub.requests] == ["Cancel"] * 4 + ["Forward"] * 3 + ["Remind"] * 2
    assert figures(first) == {
        "clusters_changed": 3,
        "versions_created": 2,
        "llm_calls": 6,  # two prompts per cluster; 9 HTTP requests with the client's 3 retries
        "llm_retries": 3,
        "llm_rejected": {"leak": 1, "malformed": 1, "schema": 1, "truncated": 1},
        "failed": ["agent-c2"],
    }
    assert (
        first.summary()
        .failed_clusters["agent-c2"]
        .startswith("LLMError: no valid workflow after a retry: stub-model returned JSON off the schema")
    )
    assert first.run.counts["llm_rejected_leak"] == 1  # the run record keeps them too
    at = [r.at for r in stub.requests]
    assert at[1] - at[0] >= TIMEOUT  # the client waited out its timeout before retrying
    assert at[5] - at[4] >= RETRY_AFTER  # and honoured Retry-After (its own first backoff is ≤ 0.5 s)
    # Every re-ask repeats the prompt and says what was wrong.
    assert "example-specific values" in stub.requests[3].prompt
    assert "could not be used: stub-model returned invalid JSON" in stub.requests[6].prompt
    assert stub.requests[3].prompt.startswith(stub.requests[2].prompt)

    # Run 2: only the failed cluster is induced again; an invented tool is re-asked, then ok.
    stub.push("invented_tool", "ok")
    second = run_induction(store, settings, inducer, namespace=settings.namespace)
    assert figures(second) == {
        "clusters_changed": 1,
        "versions_created": 1,
        "llm_calls": 2,
        "llm_retries": 1,
        "llm_rejected": {"invented_tool": 1},
        "failed": [],
    }
    assert "admin.export_everything', which no successful run" in stub.requests[-1].prompt
    before = served(store, settings)
    assert sorted(before["latest"]) == ["agent-c0", "agent-c1", "agent-c2"]
    assert all(version == 1 for version, _ in before["latest"].values())
    assert list(before["hits"].values()) == [[("agent-c1", 1)], [("agent-c0", 1)]]

    # Run 3, forced, every answer faulty: c0's requests time out, fail and are rate limited
    # until the client gives up; c1 and c2 answer badly twice. Nothing new is stored.
    n = len(stub.requests)
    stub.push("timeout", "500", "429", "malformed", "truncated", "leak", "invented_tool")
    third = run_induction(store, settings, inducer, namespace=settings.namespace, force=True)
    assert len(stub.requests) - n == 7
    assert figures(third) == {
        "clusters_changed": 3,
        "versions_created": 0,
        "llm_calls": 5,
        "llm_retries": 2,
        "llm_rejected": {"invented_tool": 1, "leak": 1, "malformed": 1, "truncated": 1},
        "failed": ["agent-c0", "agent-c1", "agent-c2"],
    }
    failed = third.summary().failed_clusters
    assert failed["agent-c0"].startswith("RateLimitError")
    assert failed["agent-c1"].startswith("LLMError: no valid workflow after a retry")
    assert "admin.export_everything" in failed["agent-c2"]
    assert served(store, settings) == before  # the same versions, still served
    assert all(len(store.history(wid)) == 1 for wid in before["latest"])

    # Run 4: the failed clusters are retried; the same answers change nothing.
    fourth = run_induction(store, settings, inducer, namespace=settings.namespace)
    assert figures(fourth) == {
        "clusters_changed": 3,
        "versions_created": 0,
        "llm_calls": 3,
        "llm_retries": 0,
        "llm_rejected": {},
        "failed": [],
    }
    assert served(store, settings) == before
    assert len(stub.requests) == 9 + 2 + 7 + 3
