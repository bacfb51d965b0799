"""Framework integrations with the real packages: the OpenAI Agents SDK and the openai client
on httpx.MockTransport (no network, no key), and LangChain tools with our callback handler.

The Agents SDK and LangChain are imported in the tests that use them, not at the module's
top: every pytest-xdist process imports every test module to collect it, and these two cost
~1.5 s of CPU a process that only the process running these tests needs (`xdist_group`)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import openai
import pytest

from examples import openai_function_calling
from flowmem.agents import WorkflowMemory
from flowmem.models import InductionRun, Trajectory, WorkflowRef
from flowmem.settings import Settings
from tests.factories import make_workflow
from tests.processes import READY_LIMIT

if TYPE_CHECKING:
    from agents import Agent, RunContextWrapper
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
    from langchain_core.tools import BaseTool

pytestmark = pytest.mark.xdist_group("integrations")  # one process imports the SDKs

TASK = "Forward the latest email about the roadmap to olga"
SERVED = [WorkflowRef(id="forward_latest", version=1)]


class Endpoint:
    """A chat-completions endpoint answering from a queue of scripted replies; keeps every request."""

    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies, self.requests = list(replies), list[dict[str, Any]]()
        self.transport = httpx.MockTransport(self.handle)

    def client(self) -> openai.OpenAI:
        # openai 3.x types http_client as an httpx2 client but accepts a legacy httpx one at runtime.
        http: Any = httpx.Client(transport=self.transport)
        return openai.OpenAI(api_key="test", base_url="http://stub.local/v1", http_client=http, max_retries=0)

    def async_client(self) -> openai.AsyncOpenAI:
        http: Any = httpx.AsyncClient(transport=self.transport)
        return openai.AsyncOpenAI(api_key="test", base_url="http://stub", http_client=http, max_retries=0)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        return httpx.Response(200, json=self.replies.pop(0))

    def system_prompt(self, i: int = 0) -> str:
        first = self.requests[i]["messages"][0]
        assert first["role"] == "system"
        return str(first["content"])


_ids = itertools.count()
T = TypeVar("T")


def reply(content: str | None = None, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A chat completion with text `content` or the given tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"c{next(_ids)}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for n, a in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


@pytest.fixture(autouse=True)
def no_tracing() -> Iterator[None]:
    from agents import set_tracing_disabled

    set_tracing_disabled(True)  # nothing may try to export traces
    yield


@pytest.fixture
def memory(settings: Settings) -> Iterator[WorkflowMemory]:
    """A memory whose store serves one active workflow for forwarding emails."""
    with WorkflowMemory(settings) as m:
        m.store.commit_run(InductionRun(id="seed"), [make_workflow(steps=3, status="active")])
        yield m


def stored(memory: WorkflowMemory) -> list[Trajectory]:
    assert memory.flush(timeout=READY_LIMIT)
    return list(reversed(memory.store.list_trajectories(limit=None)))


def run_sdk(endpoint: Endpoint, go: Callable[[OpenAIChatCompletionsModel], Awaitable[T]]) -> T:
    """`go(model)` on a model of the Agents SDK that talks to the endpoint."""
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel

    async def main() -> T:
        async with endpoint.async_client() as client:
            return await go(OpenAIChatCompletionsModel(model="gpt-test", openai_client=client))

    return asyncio.run(main())


# -- plain function calling with the openai client -----------------------------------------


def test_function_calling_loop_serves_workflows_and_records_each_call(memory: WorkflowMemory) -> None:
    endpoint = Endpoint(
        reply(None, ("search_emails", {"query": "roadmap"}), ("lookup_contact", {"name": "nobody"})),
        reply(None, ("lookup_contact", {"name": "olga"})),
        reply(None, ("forward_email", {"email_id": "e3", "to": "olga@example.com"})),
        reply("Forwarded 'Roadmap v2' to olga."),
    )
    with endpoint.client() as client:
        answer = openai_function_calling.solve(client, memory, TASK, model="gpt-test")

    assert answer == "Forwarded 'Roadmap v2' to olga."
    system = endpoint.system_prompt()
    assert "Workflows that worked" in system and "mail.forward(email_id={email_id}" in system
    [t] = stored(memory)
    assert (t.task, t.agent, t.success, t.final_answer) == (TASK, "mail_agent", True, answer)
    assert t.workflows_used == SERVED
    assert [(s.action, s.args) for s in t.steps] == [
        ("search_emails", {"query": "roadmap"}),
        ("lookup_contact", {"name": "nobody"}),
        ("lookup_contact", {"name": "olga"}),
        ("forward_email", {"email_id": "e3", "to": "olga@example.com"}),
    ]
    assert json.loads(t.steps[0].observation or "")[0]["id"] == "e3"
    assert t.steps[1].error == "KeyError: 'nobody'" and t.steps[1].observation is None
    assert t.steps[3].observation == "forwarded e3 to olga@example.com"
    # The model saw each result, the error included, answering the call it made.
    tool_messages = [m for m in endpoint.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages][1] == "error: KeyError: 'nobody'"


def test_function_calling_loop_out_of_turns_is_a_failure(memory: WorkflowMemory) -> None:
    endpoint = Endpoint(reply(None, ("search_emails", {"query": "roadmap"})))
    with endpoint.client() as client:
        assert openai_function_calling.solve(client, memory, TASK, max_turns=1) is None
    [t] = stored(memory)
    assert t.success is False and t.feedback == "no answer after 1 turns" and len(t.steps) == 1


# -- OpenAI Agents SDK ----------------------------------------------------------------------


def test_agents_sdk_run_is_one_trajectory_with_tool_steps_context_and_served_versions(
    memory: WorkflowMemory,
) -> None:
    from examples import openai_agents_sdk

    endpoint = Endpoint(
        reply(None, ("search_emails", {"query": "roadmap"})),
        reply(None, ("lookup_contact", {"name": "nobody"})),
        reply(None, ("lookup_contact", {"name": "olga"})),
        reply(None, ("forward_email", {"email_id": "e3", "to": "olga@example.com"})),
        reply("Forwarded it."),
    )
    answer = run_sdk(
        endpoint, lambda model: openai_agents_sdk.solve(openai_agents_sdk.build_agent(model), memory, TASK)
    )

    assert answer == "Forwarded it."
    system = endpoint.system_prompt()
    assert system.startswith("You are an email assistant.")
    assert "Workflows that worked" in system and "mail.forward(email_id={email_id}" in system
    [t] = stored(memory)
    assert (t.task, t.agent, t.success, t.final_answer) == (TASK, "mail_agent", True, "Forwarded it.")
    assert t.workflows_used == SERVED
    assert [(s.action, s.args) for s in t.steps] == [
        ("search_emails", {"query": "roadmap"}),
        ("lookup_contact", {"name": "nobody"}),
        ("lookup_contact", {"name": "olga"}),
        ("forward_email", {"email_id": "e3", "to": "olga@example.com"}),
    ]
    assert json.loads(t.steps[0].observation or "")[0]["subject"] == "Roadmap v2"
    # The exception itself, through tool_error_formatter; the model got the SDK's fixed message.
    assert t.steps[1].error == "KeyError: 'nobody'" and t.steps[1].observation is None
    assert t.steps[2].observation == "olga@example.com" and t.steps[2].duration_ms is not None
    assert "An error occurred" in endpoint.requests[2]["messages"][-1]["content"]


def test_agents_sdk_exception_stores_the_run_as_failed(memory: WorkflowMemory) -> None:
    from agents import Agent, MaxTurnsExceeded, Runner

    from examples import openai_agents_sdk
    from flowmem.agents.integrations.openai_agents import FlowmemHooks, with_memory

    endpoint = Endpoint(reply(None, ("search_emails", {"query": "roadmap"})))
    agent = Agent(name="mailer", instructions="Mail.", tools=[openai_agents_sdk.search_emails])

    async def go(model: Any) -> None:
        with FlowmemHooks(memory, TASK, id="failed") as hooks:
            await Runner.run(with_memory(agent.clone(model=model), memory), TASK, hooks=hooks, max_turns=1)

    with pytest.raises(MaxTurnsExceeded):
        run_sdk(endpoint, go)
    [t] = stored(memory)
    assert (t.id, t.agent, t.success) == ("failed", "mailer", False)
    assert t.feedback is not None and t.feedback.startswith("MaxTurnsExceeded")
    assert [s.action for s in t.steps] == ["search_emails"] and t.workflows_used == SERVED


def test_agents_sdk_hooks_without_with_record_one_run_per_runner_run(memory: WorkflowMemory) -> None:
    from agents import Agent, Runner, function_tool

    from flowmem.agents.integrations.openai_agents import FlowmemHooks, with_memory

    @function_tool
    def broken(x: int) -> str:
        """Always fails."""
        raise RuntimeError("boom")

    async def instructions(context: RunContextWrapper[None], agent: Agent[None]) -> str:
        return f"You are {agent.name}."

    endpoint = Endpoint(
        reply(None, ("transfer_to_helper", {})),
        reply(None, ("broken", {"x": 1})),
        reply("first done"),
        reply("second done"),
    )
    helper = Agent(name="helper", instructions=instructions, tools=[broken])
    triage = Agent(name="triage", instructions="Route.", handoffs=[helper])
    hooks = FlowmemHooks(memory, TASK, agent_name="desk")

    async def go(model: Any) -> list[str]:
        helper.model = triage.model = model
        agent = with_memory(triage, memory)
        first = await Runner.run(agent, TASK, hooks=hooks)
        second = await Runner.run(agent, TASK, hooks=hooks)  # the same hooks: a new run
        return [first.final_output, second.final_output]

    assert run_sdk(endpoint, go) == ["first done", "second done"]
    # No run was open: the task came from the user message; the callable instructions stay first.
    assert endpoint.system_prompt(0).startswith("Route.\n\nWorkflows that worked")
    assert endpoint.system_prompt(1) == "You are helper."  # helper has no memory
    first, second = stored(memory)
    assert (first.task, first.agent, first.success, first.final_answer) == (TASK, "desk", True, "first done")
    assert [(s.action, s.args) for s in first.steps] == [
        ("handoff", {"from": "triage", "to": "helper"}),
        ("broken", {"x": 1}),
    ]
    assert first.steps[1].error is not None and first.steps[1].error.startswith("An error occurred")
    assert first.workflows_used == []  # served outside a run: nothing to note it on
    assert (second.task, second.final_answer, second.steps) == (TASK, "second done", [])


# -- LangChain ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tools:
    """The LangChain tools the handler's tests call."""

    search_emails: BaseTool
    lookup_contact: BaseTool
    forward_email: BaseTool
    read_email: BaseTool


@pytest.fixture(scope="module")
def tools() -> Tools:
    """`Tools`, made with LangChain's `@tool`."""
    from langchain_core.tools import ToolException, tool

    @tool
    def search_emails(query: str) -> list[str]:
        """Emails whose subject contains the query."""
        return [f"e3: {query} v2"]

    @tool
    def lookup_contact(name: str) -> str:
        """The email address of a contact."""
        raise KeyError(name)

    @tool
    def forward_email(email_id: str, to: str) -> str:
        """Forward an email."""
        raise ToolException(f"{to} is not a valid address")

    forward_email.handle_tool_error = True  # the tool returns the error as its output

    @tool
    async def read_email(email_id: str) -> str:
        """The body of an email."""
        return f"body of {email_id}"

    return Tools(search_emails, lookup_contact, forward_email, read_email)


def test_langchain_handler_records_tool_calls_and_errors(memory: WorkflowMemory, tools: Tools) -> None:
    from flowmem.agents.integrations.langchain import FlowmemCallbackHandler

    search_emails, lookup_contact, forward_email = (
        tools.search_emails,
        tools.lookup_contact,
        tools.forward_email,
    )
    with memory.record(TASK, agent="lc_agent", id="lc") as run:
        handler = FlowmemCallbackHandler(run)
        config: Any = {"callbacks": [handler]}
        assert search_emails.invoke({"query": "roadmap"}, config=config) == ["e3: roadmap v2"]
        with pytest.raises(KeyError):
            lookup_contact.invoke({"name": "nobody"}, config=config)
        call = {
            "type": "tool_call",
            "id": "c1",
            "name": "forward_email",
            "args": {"email_id": "e3", "to": "x"},
        }
        assert forward_email.invoke(call, config=config).status == "error"  # a ToolMessage
        run.finish(success=True)
    [t] = stored(memory)
    assert t.id == "lc" and t.success is True
    assert [(s.action, s.args) for s in t.steps] == [
        ("search_emails", {"query": "roadmap"}),
        ("lookup_contact", {"name": "nobody"}),
        ("forward_email", {"email_id": "e3", "to": "x"}),
    ]
    assert json.loads(t.steps[0].observation or "") == ["e3: roadmap v2"]
    assert t.steps[1].error == "KeyError: 'nobody'"
    assert t.steps[2].error == "x is not a valid address"


def test_langchain_handler_follows_the_current_run_sync_and_async(
    memory: WorkflowMemory, tools: Tools
) -> None:
    from flowmem.agents.integrations.langchain import FlowmemCallbackHandler

    search_emails, read_email = tools.search_emails, tools.read_email
    handler = FlowmemCallbackHandler()  # no run: tool calls go to whichever run is current
    config: Any = {"callbacks": [handler]}
    search_emails.invoke({"query": "outside"}, config=config)  # no run: not recorded

    async def agent() -> None:
        with memory.record(TASK, id="async"):
            assert await read_email.ainvoke({"email_id": "e3"}, config=config) == "body of e3"
            await search_emails.ainvoke({"query": "roadmap"}, config=config)

    asyncio.run(agent())
    with memory.record("Find the lunch email", id="sync"):
        search_emails.invoke({"query": "lunch"}, config=config)
    by_id = {t.id: t for t in stored(memory)}
    assert [(s.action, s.observation) for s in by_id["async"].steps] == [
        ("read_email", "body of e3"),
        ("search_emails", '["e3: roadmap v2"]'),
    ]
    assert [(s.action, s.args) for s in by_id["sync"].steps] == [("search_emails", {"query": "lunch"})]
    assert len(by_id) == 2
