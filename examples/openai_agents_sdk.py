"""An OpenAI Agents SDK agent that records its runs into flowmem and follows its workflows.

`with_memory` gives the agent instructions that end with the workflows fitting the task;
`FlowmemHooks` records each `Runner.run` as one flowmem run: a step per tool call (with the
exception text, through `tool_error_formatter`), the final output as a success, an exception
as a failure.

Run it (a key, or any OpenAI-compatible chat-completions server):

    OPENAI_API_KEY=sk-... python examples/openai_agents_sdk.py "Forward the roadmap email to olga"
    FLOWMEM_LLM_BASE_URL=http://localhost:11434/v1 FLOWMEM_LLM_MODEL=llama3.1 \\
        python examples/openai_agents_sdk.py

After a few runs, `flowmem induce` turns them into workflows the next runs get.
"""

from __future__ import annotations

import asyncio
import os
import sys

from agents import Agent, Model, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from openai import AsyncOpenAI

from flowmem.agents import WorkflowMemory
from flowmem.agents.integrations.openai_agents import FlowmemHooks, with_memory
from flowmem.settings import Settings

# A tiny mailbox, so the example runs without any account.
INBOX = [
    {"id": "e3", "subject": "Roadmap v2", "sender": "zed@example.com", "date": "2024-05-09"},
    {"id": "e2", "subject": "Lunch on Friday?", "sender": "ana@example.com", "date": "2024-05-06"},
    {"id": "e1", "subject": "Roadmap draft", "sender": "zed@example.com", "date": "2024-05-02"},
]
CONTACTS = {"olga": "olga@example.com", "zed": "zed@example.com", "ana": "ana@example.com"}


@function_tool
def search_emails(query: str) -> list[dict[str, str]]:
    """Emails whose subject contains the query, newest first.

    Args:
        query: Words of the subject.
    """
    return [e for e in INBOX if query.lower() in e["subject"].lower()]


@function_tool
def lookup_contact(name: str) -> str:
    """The email address of a contact.

    Args:
        name: The contact's first name.
    """
    return CONTACTS[name.lower()]  # an unknown name raises; the run records the error


@function_tool
def forward_email(email_id: str, to: str) -> str:
    """Forward an email.

    Args:
        email_id: The email's id.
        to: An email address.
    """
    if not any(e["id"] == email_id for e in INBOX):
        raise ValueError(f"no email {email_id}")
    return f"forwarded {email_id} to {to}"


def build_agent(model: str | Model) -> Agent[None]:
    """The email agent (without memory)."""
    return Agent(
        name="mail_agent",
        instructions="You are an email assistant. Use the tools, then say in one line what you did.",
        tools=[search_emails, lookup_contact, forward_email],
        model=model,
    )


async def solve(agent: Agent[None], memory: WorkflowMemory, task: str, *, max_turns: int = 8) -> str:
    """Do `task`; the run (steps, workflows served, outcome) goes to `memory`."""
    with FlowmemHooks(memory, task) as hooks:
        result = await Runner.run(
            with_memory(agent, memory),
            task,
            hooks=hooks,
            run_config=RunConfig(tool_error_formatter=hooks.tool_error_formatter),
            max_turns=max_turns,
        )
    return str(result.final_output)


async def main() -> None:
    settings = Settings()
    name = settings.llm_model or "gpt-4o-mini"
    model: str | Model = name  # the SDK's default: the Responses API with OPENAI_API_KEY
    if settings.llm_base_url is not None:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key is not None else None
        key = key or os.environ.get("OPENAI_API_KEY", "not-needed")  # local servers ignore it
        client = AsyncOpenAI(base_url=settings.llm_base_url, api_key=key)
        model = OpenAIChatCompletionsModel(model=name, openai_client=client)
        set_tracing_disabled(True)  # traces go to OpenAI's platform; not for a local server
    agent = build_agent(model)
    with WorkflowMemory.open(settings) as memory:
        for task in sys.argv[1:] or ["Forward the latest email about the roadmap to olga"]:
            print(f"{task}\n  -> {await solve(agent, memory, task)}")


if __name__ == "__main__":
    asyncio.run(main())
