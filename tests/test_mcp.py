"""The MCP server, driven by the SDK's own client over stdio: one `flowmem mcp` subprocess per
namespace, shared by the tests of this module."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import Trajectory, Workflow
from flowmem.settings import Settings
from flowmem.storage import Store
from tests.factories import make_workflow

if TYPE_CHECKING:  # imported by the fixtures and helpers below, not at collection (see `server`)
    from mcp import Client
    from mcp.types import CallToolResult

# The two servers the module's tests share, started once: on one worker.
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("mcp")]

FORWARD_TASK = "Forward the newest email about 'roadmap' to zed"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def cancel_workflow(namespace: str) -> Workflow:
    return Workflow.model_validate(
        {
            "id": "cancel_meeting",
            "name": "cancel_meeting",
            "description": "Cancel the next calendar meeting with a person.",
            "steps": [
                {"action": "calendar.search_events", "args": {"query": "{person}"}},
                {"action": "calendar.cancel_event", "args": {"event_id": "{event_id}"}},
            ],
            "namespace": namespace,
            "status": "active",
        }
    )


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store where namespace a has two workflows (forward_latest in 2 versions) and a run,
    and namespace b has one workflow of its own."""
    path = tmp_path_factory.mktemp("mcp") / "db"
    store = store_from(Settings(db=str(path), namespace="a"))
    store.put_workflow(make_workflow("forward_latest", 1, namespace="a", status="active"))
    store.put_workflow(make_workflow("forward_latest", 2, steps=3, namespace="a", status="active"))
    store.put_workflow(cancel_workflow("a"))
    store.put_workflow(make_workflow("forward_b", namespace="b", status="active"))
    store_trajectories(
        store, [Trajectory(id="run-a", task=FORWARD_TASK, namespace="a")], store.settings.scrub
    )
    return path


def store_of(db: Path, namespace: str) -> Store:
    return store_from(Settings(db=str(db), namespace=namespace))


def server(db: Path, namespace: str) -> Client:
    # The MCP SDK is imported here, not at the module's top: every pytest-xdist process imports
    # every test module to collect it, and only the one running this module's tests needs it.
    from mcp import Client, StdioServerParameters

    env = {
        "FLOWMEM_DB": str(db),
        "FLOWMEM_NAMESPACE": namespace,
        "DO_NOT_TRACK": "1",
        "LANCEDB_LOG": "error",
        "PATH": os.environ.get("PATH", ""),
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "flowmem.cli", "mcp"], env=env, cwd=str(db.parent)
    )
    return Client(params, read_timeout_seconds=60)


@pytest.fixture(scope="module")
async def clients(db: Path) -> AsyncIterator[dict[str, Client]]:
    """Connected clients of two servers on the same store, for namespaces a and b (started
    together: each loads its workflows while the other starts)."""
    async with server(db, "a") as a, server(db, "b") as b:
        yield {"a": a, "b": b}


@pytest.fixture
def client_a(clients: dict[str, Client]) -> Client:
    return clients["a"]


@pytest.fixture
def client_b(clients: dict[str, Client]) -> Client:
    return clients["b"]


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool's structured result; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def fail(client: Client, tool: str, **arguments: Any) -> str:
    """A tool's error message; fails the test if the call succeeds."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return text(result)


def text(result: CallToolResult) -> str:
    from mcp.types import TextContent

    return "".join(c.text for c in result.content if isinstance(c, TextContent))


async def test_lists_the_four_tools_with_descriptions(client_a: Client) -> None:
    tools = {t.name: t for t in (await client_a.list_tools()).tools}
    assert set(tools) == {"search_workflows", "get_workflow", "record_trajectory", "report_outcome"}
    assert all(t.description and len(t.description) > 80 for t in tools.values())
    assert all("\n " not in (t.description or "") for t in tools.values())
    k = tools["search_workflows"].input_schema["properties"]["k"]
    assert (k["minimum"], k["maximum"], k["default"]) == (1, 20, 3)
    assert tools["search_workflows"].annotations is not None
    assert tools["search_workflows"].annotations.read_only_hint is True
    assert tools["record_trajectory"].input_schema["required"] == ["trajectory"]


async def test_search_serves_the_fitting_workflow_first(client_a: Client) -> None:
    hits = (await call(client_a, "search_workflows", task=FORWARD_TASK))["workflows"]
    # k is a maximum: the cancelling workflow scores far below the first and is left out.
    assert [h["id"] for h in hits] == ["forward_latest"]
    best = hits[0]
    assert best["version"] == 2 and best["name"] == "forward_latest"
    assert [s["action"] for s in best["steps"]] == ["mail.search", "contacts.lookup", "mail.forward"]
    assert best["score"] > 0 and "mail.forward" in best["text"]
    assert len((await call(client_a, "search_workflows", task=FORWARD_TASK, k=1))["workflows"]) == 1
    assert (await call(client_a, "search_workflows", task=FORWARD_TASK, agent="nobody"))["workflows"] == []


async def test_search_refuses_k_out_of_range(client_a: Client) -> None:
    for k in (0, 21):
        assert "k" in await fail(client_a, "search_workflows", task=FORWARD_TASK, k=k)
    assert "task" in await fail(client_a, "search_workflows", task="")


async def test_get_workflow_returns_a_version_and_the_history(client_a: Client) -> None:
    latest = await call(client_a, "get_workflow", workflow_id="forward_latest")
    assert (latest["id"], latest["version"], len(latest["steps"])) == ("forward_latest", 2, 3)
    assert [v["version"] for v in latest["versions"]] == [1, 2]
    first = await call(client_a, "get_workflow", workflow_id="forward_latest", version=1)
    assert (first["version"], len(first["steps"])) == (1, 2)
    assert "no workflow 'nope'" in await fail(client_a, "get_workflow", workflow_id="nope")
    assert "no version 7" in await fail(client_a, "get_workflow", workflow_id="forward_latest", version=7)


async def test_record_then_report_outcome(client_a: Client, db: Path) -> None:
    run = {
        "id": "mcp-run-1",
        "task": FORWARD_TASK,
        "steps": [
            {"thought": "find it", "action": "mail.search", "args": {"query": "roadmap"}, "observation": "1"},
            {"action": "mail.forward", "args": {"email_id": "1", "to": "zed@x.org"}},
        ],
        "workflows_used": [{"id": "forward_latest", "version": 2}],
        "tool": "claude",
    }
    assert await call(client_a, "record_trajectory", trajectory=run) == {"id": "mcp-run-1", "stored": True}
    assert await call(client_a, "record_trajectory", trajectory=run) == {"id": "mcp-run-1", "stored": False}
    stored = store_of(db, "a").get_trajectory("mcp-run-1")
    assert stored.actions == ["mail.search", "mail.forward"] and stored.success is None
    assert stored.meta == {"tool": "claude"} and stored.workflows_used[0].version == 2

    reported = await call(client_a, "report_outcome", run_id="mcp-run-1", success=True, feedback="sent")
    assert reported == {"id": "mcp-run-1", "success": True}
    stored = store_of(db, "a").get_trajectory("mcp-run-1")
    assert (stored.success, stored.feedback) == (True, "sent")
    assert "no-such-run" in await fail(client_a, "report_outcome", run_id="no-such-run", success=False)


async def test_record_rejects_an_invalid_trajectory_with_the_reason(client_a: Client, db: Path) -> None:
    bad = {"id": "bad-run", "task": "x", "steps": [{"args": {}}]}
    assert "steps.0.action: missing" in await fail(client_a, "record_trajectory", trajectory=bad)
    no_task = {"id": "no-task", "steps": []}
    assert "task" in await fail(client_a, "record_trajectory", trajectory=no_task)
    assert "trajectory" in await fail(client_a, "record_trajectory", trajectory="not an object")
    assert [t.id for t in store_of(db, "a").list_trajectories()].count("bad-run") == 0
    assert Path(f"{db}.quarantine.jsonl").exists()


async def test_a_server_never_crosses_its_namespace(client_b: Client, db: Path) -> None:
    hits = (await call(client_b, "search_workflows", task=FORWARD_TASK, k=20))["workflows"]
    assert [h["id"] for h in hits] == ["forward_b"]
    missing = await fail(client_b, "get_workflow", workflow_id="forward_latest")
    assert "no workflow 'forward_latest'" in missing
    assert "run-a" in await fail(client_b, "report_outcome", run_id="run-a", success=True)
    assert store_of(db, "a").get_trajectory("run-a").success is None

    foreign = {"id": "from-b", "task": FORWARD_TASK, "steps": [], "namespace": "a"}
    assert "namespace 'a'" in await fail(client_b, "record_trajectory", trajectory=foreign)
    own = {"id": "from-b", "task": FORWARD_TASK, "steps": []}
    assert await call(client_b, "record_trajectory", trajectory=own) == {"id": "from-b", "stored": True}
    assert store_of(db, "b").get_trajectory("from-b").namespace == "b"
    assert "from-b" not in [t.id for t in store_of(db, "a").list_trajectories()]
