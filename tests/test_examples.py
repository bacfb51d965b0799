"""examples/llm_office_loop.py against a scripted chat-completions endpoint on httpx.MockTransport
(no network, no key): the loop records the memory arm's runs, learns between rounds and serves
what it learned to the next round."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from examples import llm_office_loop
from examples.llm_office_loop import SYSTEM, run_rounds, solve
from flowmem.agents import WorkflowMemory
from flowmem.models import Trajectory
from flowmem.settings import Settings
from flowmem.sim import World, make_tasks

SERVED_BLOCK = "Workflows that worked for similar tasks"
CONTACTS = [c.name for c in World.generate(0).contacts]
_ids = itertools.count()

Handler = Callable[[dict[str, Any]], dict[str, Any]]
"""A scripted model: the request body -> the assistant message."""


def completion(message: dict[str, Any]) -> dict[str, Any]:
    calls = bool(message.get("tool_calls"))
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def tool_call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": f"c{next(_ids)}", "type": "function", "function": {"name": name, "arguments": arguments}}


def ask(*calls: dict[str, Any]) -> dict[str, Any]:
    """An assistant message with these tool calls."""
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def call(name: str, /, **args: Any) -> dict[str, Any]:
    """An assistant message with one tool call."""
    return ask(tool_call(name, json.dumps(args)))


def forwarder(body: dict[str, Any]) -> dict[str, Any]:
    """A model that forwards the newest email on the task's subject: search, look up, forward.

    It reads the subject (quoted) and the person (a contact's name) off the task, and the email
    id and the address off the tool results so far."""
    messages = body["messages"]
    task = messages[1]["content"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if len(results) == 0:
        subject = re.search(r"'(.+?)'", task)
        assert subject is not None
        return call("mail__search", query=subject.group(1))
    if len(results) == 1:
        return call("contacts__lookup", name=next(n for n in CONTACTS if n in task))
    if len(results) == 2:
        email_id, to = json.loads(results[0])[0]["id"], json.loads(results[1])[0]["email"]
        return call("mail__forward", email_id=email_id, to=to)
    return {"role": "assistant", "content": "Forwarded it."}


class Endpoint:
    """A chat-completions endpoint answered by a scripted model; keeps every request body."""

    def __init__(self, model: Handler) -> None:
        self.model, self.requests = model, list[dict[str, Any]]()

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        return httpx.Response(200, json=completion(self.model(body)))

    def client(self) -> openai.OpenAI:
        # openai types http_client as its own httpx client type but accepts this one at runtime.
        http: Any = httpx.Client(transport=httpx.MockTransport(self.handle))
        return openai.OpenAI(http_client=http, api_key="test", base_url="http://llm.test/v1", max_retries=0)

    def first_turns(self) -> list[str]:
        """The system prompt of each task's first request, in order."""
        return [r["messages"][0]["content"] for r in self.requests if len(r["messages"]) == 2]


def stored(settings: Settings) -> list[Trajectory]:
    with WorkflowMemory(settings) as memory:
        return sorted(memory.store.list_trajectories(limit=None), key=lambda t: t.id)


def test_loop_records_the_memory_arm_learns_and_serves_the_next_round(settings: Settings) -> None:
    endpoint = Endpoint(forwarder)
    seen: list[dict[str, Any]] = []
    with endpoint.client() as client:
        rounds = run_rounds(
            client,
            "gpt-test",
            settings,
            rounds=2,
            tasks=3,
            compare=True,
            families=["forward_latest"],
            progress=seen.append,
        )

    assert seen == rounds
    assert [set(r) for r in rounds] == [{"round", "workflows", "with_memory", "without_memory"}] * 2
    assert [r["round"] for r in rounds] == [1, 2]
    for r in rounds:  # the scripted model does it right, in three calls, with memory or without
        assert r["with_memory"] == r["without_memory"] == {"success_rate": 1.0, "mean_steps": 3.0}
    assert rounds[0]["workflows"] == 0 and rounds[1]["workflows"] >= 1

    # Only the memory arm is recorded: one run per task, no run of the compare arm.
    runs = stored(settings)
    assert [t.id for t in runs] == [f"llm-0-r{r}-{i:03d}" for r in (1, 2) for i in range(3)]
    tasks = make_tasks(World.generate(0), 3, seed=1, families=["forward_latest"])
    assert [t.task for t in runs[:3]] == [t.text for t in tasks]
    for t in runs:
        assert t.agent == "email_agent" and t.group == "forward_latest"
        assert t.success is True and t.final_answer == "Forwarded it."
        assert [s.action for s in t.steps] == ["mail.search", "contacts.lookup", "mail.forward"]
        assert all(s.error is None and s.observation for s in t.steps)
        assert t.steps[1].args == {"name": next(n for n in CONTACTS if n in t.task)}
        assert json.loads(t.steps[0].observation or "")[0]["id"] == t.steps[2].args["email_id"]

    # Round 1 was served nothing; round 2's memory arm got the workflows in its system prompt
    # and its runs name the versions they were served. The compare arm never gets any.
    assert all(not t.workflows_used for t in runs[:3]) and all(t.workflows_used for t in runs[3:])
    firsts = endpoint.first_turns()  # per task: with memory, then without
    assert firsts[:6] == [SYSTEM] * 6
    assert all(SERVED_BLOCK in s for s in firsts[6::2]) and firsts[7::2] == [SYSTEM] * 3
    assert "mail.forward(" in firsts[6]


def test_errors_go_to_the_model_and_the_run_and_the_world_decides(settings: Settings) -> None:
    def careless(body: dict[str, Any]) -> dict[str, Any]:
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if not results:  # a name where an address is needed, then a tool that does not exist
            return ask(
                tool_call("mail__forward", json.dumps({"email_id": "em-001", "to": "olga"})),
                tool_call("mail__archive", json.dumps({"email_id": "em-001"})),
            )
        if len(results) == 2:  # arguments that are not JSON
            return ask(tool_call("mail__read", "{oops"))
        return {"role": "assistant", "content": "Done!"}

    endpoint = Endpoint(careless)
    [task] = make_tasks(World.generate(0), 1, seed=5, families=["forward_latest"])
    world = World.generate(0)
    with endpoint.client() as client, WorkflowMemory(settings) as memory:
        outcome = solve(client, "gpt-test", task, world, memory, run_id="careless")
        assert memory.flush(timeout=10)
        [t] = memory.store.list_trajectories(limit=None)

    assert (outcome.success, outcome.tool_calls, outcome.answer) == (False, 3, "Done!")
    assert (t.success, t.final_answer, t.feedback) == (False, "Done!", "nothing was forwarded")
    assert [(s.action, s.args, s.observation) for s in t.steps] == [
        ("mail.forward", {"email_id": "em-001", "to": "olga"}, None),
        ("mail__archive", {"email_id": "em-001"}, None),
        ("mail.read", {}, None),
    ]
    assert t.steps[0].error == "Invalid recipient 'olga': expected an email address."
    assert t.steps[1].error is not None and t.steps[1].error.startswith("Unknown action 'mail__archive'")
    assert t.steps[2].error is not None and "not valid JSON" in t.steps[2].error
    tool_messages = [m["content"] for m in endpoint.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_messages[0] == f"error: {t.steps[0].error}"


def test_without_a_key_or_a_server_main_says_what_to_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env either
    for name in ("OPENAI_API_KEY", "FLOWMEM_LLM_API_KEY", "FLOWMEM_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit, match="OPENAI_API_KEY.*FLOWMEM_LLM_BASE_URL"):
        llm_office_loop.main(["--rounds", "1"])
    assert not (tmp_path / ".flowmem").exists()


def test_only_single_agent_families() -> None:
    with pytest.raises(ValueError, match="single-agent"):
        run_rounds(None, "m", Settings(db="memory://unused"), families=["onboard_customer"])  # type: ignore[arg-type]
