"""An OpenAI Agents SDK agent that records its runs into flowmem and follows its workflows.

`with_memory` gives the agent instructions that end with the workflows fitting the task;
`FlowmemHooks` records each `Runner.run` as one flowmem run: a step per tool call (with the
exception text, through `tool_error_formatter`), the final output as a success, an exception
as a failure.

Run it (a key, or any OpenAI-compatible chat-completions server):

    OPENAI_API_KEY=sk-... python examples/openai_agents_sdk.py "Forward the roadmap email to olga"
    FLOWMEM_LLM_BASE_URL=http://localhost:11434/v1 FLOWMEM_LLM_MODEL=llama3.1 \\
        python examples/openai_agents_sdk.py

It first sends the model one tiny request; without a model configured, or when that request
fails, it says in one line what to set and exits with status 1, before recording anything.

After a few runs, `flowmem induce` turns them into workflows the next runs get.
"""

from __future__ import annotations

import asyncio
import os
import sys

import openai

from flowmem.agents import WorkflowMemory
from flowmem.settings import Settings

try:
    from agents import (
        Agent,
        Model,
        RunConfig,
        Runner,
        function_tool,
        set_default_openai_client,
        set_tracing_disabled,
    )
    from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel

    from flowmem.agents.integrations.openai_agents import FlowmemHooks, with_memory
except ModuleNotFoundError as err:  # an optional extra
    if err.name != "agents":
        raise
    sys.exit(
        "openai_agents_sdk needs the OpenAI Agents SDK: pip install -e '.[openai-agents]' "
        "(or pip install openai-agents)."
    )

NAME = "openai_agents_sdk"
DEFAULT_MODEL = "gpt-4o-mini"

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


NEEDS = (
    "set OPENAI_API_KEY (or FLOWMEM_LLM_API_KEY) for OpenAI, or FLOWMEM_LLM_BASE_URL for any "
    "OpenAI-compatible server (e.g. http://localhost:11434/v1); FLOWMEM_LLM_MODEL names the model "
    f"(default {DEFAULT_MODEL})"
)
"""What to set, said whenever the model cannot be used."""


def failure(err: openai.APIError, model: str, url: object) -> str:
    """One line for a request the endpoint at `url` did not answer: what happened, what to set."""
    detail = " ".join(err.message.split())
    if isinstance(err, openai.APIConnectionError):  # timeouts too
        return f"{NAME}: no answer from {url} ({detail}); check that it is up, or {NEEDS}."
    if isinstance(err, openai.AuthenticationError):
        what, fix = "refused the API key", "set OPENAI_API_KEY or FLOWMEM_LLM_API_KEY to a key it accepts"
    elif isinstance(err, openai.NotFoundError):  # or a base URL without its API path (/v1)
        what, fix = f"has no model {model!r}", "set FLOWMEM_LLM_MODEL to one it serves (and check the URL)"
    else:
        what, fix = f"failed with {type(err).__name__}", "try again, or check the FLOWMEM_LLM_* settings"
    return f"{NAME}: {url} {what} ({detail}); {fix}."


async def connect(settings: Settings) -> tuple[openai.AsyncOpenAI, str]:
    """The client and model name from the settings, after one tiny request shows they work.

    Exits with one line saying what to set when no model is configured or the endpoint does
    not answer, before any run is recorded.
    """
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key is not None else None
    key = key or os.environ.get("OPENAI_API_KEY")
    if not key and settings.llm_base_url is None and not os.environ.get("OPENAI_BASE_URL"):
        sys.exit(f"{NAME} needs a model: {NEEDS}.")
    name = settings.llm_model or DEFAULT_MODEL
    # Without FLOWMEM_LLM_BASE_URL, the client reads OPENAI_BASE_URL itself; local servers ignore the key.
    client = openai.AsyncOpenAI(
        base_url=settings.llm_base_url,
        api_key=key or "not-needed",
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )
    try:  # a failure here is the endpoint's, not a run's: nothing is recorded yet
        await client.chat.completions.create(
            model=name, messages=[{"role": "user", "content": "Say OK."}], max_tokens=1
        )
    except (openai.BadRequestError, openai.UnprocessableEntityError):
        pass  # it knows the model but not an option (reasoning models refuse max_tokens): it works
    except openai.APIError as err:
        await client.close()
        sys.exit(failure(err, name, client.base_url))
    return client, name


async def main() -> None:
    settings = Settings()
    client, name = await connect(settings)
    model: str | Model = name
    if client.base_url.host == "api.openai.com":
        set_default_openai_client(client)  # the SDK's default: the Responses API, traces to OpenAI
    else:  # any other server (FLOWMEM_LLM_BASE_URL or OPENAI_BASE_URL): chat completions
        model = OpenAIChatCompletionsModel(model=name, openai_client=client)
        set_tracing_disabled(True)  # traces go to OpenAI's platform; not for a local server
    agent = build_agent(model)
    async with client:
        with WorkflowMemory.open(settings) as memory:
            for task in sys.argv[1:] or ["Forward the latest email about the roadmap to olga"]:
                try:
                    answer = await solve(agent, memory, task)
                except openai.APIError as err:  # the endpoint went away later: the run is stored as failed
                    sys.exit(failure(err, name, client.base_url))
                print(f"{task}\n  -> {answer}")


if __name__ == "__main__":
    asyncio.run(main())
