"""A plain chat-completions tool loop that records its runs into flowmem and follows its workflows.

The loop puts `memory.context(task)` — the workflows that worked for similar tasks — in the
system prompt, records each tool call with `run.step` and the outcome with `run.finish`. No
framework: the same three calls fit any agent loop.

Run it (a key, or any OpenAI-compatible server):

    OPENAI_API_KEY=sk-... python examples/openai_function_calling.py "Forward the roadmap email to olga"
    FLOWMEM_LLM_BASE_URL=http://localhost:11434/v1 FLOWMEM_LLM_MODEL=llama3.1 \
        python examples/openai_function_calling.py

It first sends the model one tiny request; without a model configured, or when that request
fails, it says in one line what to set and exits with status 1, before recording anything.

The runs land in the store at FLOWMEM_DB (default ./.flowmem/db); after a few, `flowmem induce`
turns them into workflows that the next runs get in their prompt (`flowmem search "<task>"`
shows which).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import openai
from openai.types.chat import ChatCompletionFunctionToolParam

from flowmem.agents import WorkflowMemory
from flowmem.settings import Settings

NAME = "openai_function_calling"
DEFAULT_MODEL = "gpt-4o-mini"
SYSTEM = "You are an email assistant. Use the tools to do the user's task, then say in one line what you did."

# A tiny mailbox, so the example runs without any account.
INBOX = [
    {"id": "e3", "subject": "Roadmap v2", "sender": "zed@example.com", "date": "2024-05-09"},
    {"id": "e2", "subject": "Lunch on Friday?", "sender": "ana@example.com", "date": "2024-05-06"},
    {"id": "e1", "subject": "Roadmap draft", "sender": "zed@example.com", "date": "2024-05-02"},
]
CONTACTS = {"olga": "olga@example.com", "zed": "zed@example.com", "ana": "ana@example.com"}


def search_emails(query: str) -> list[dict[str, str]]:
    """Emails whose subject contains `query`, newest first."""
    return [e for e in INBOX if query.lower() in e["subject"].lower()]


def lookup_contact(name: str) -> str:
    """The email address of a contact."""
    return CONTACTS[name.lower()]  # an unknown name raises, and the run records the error


def forward_email(email_id: str, to: str) -> str:
    """Forward an email to an address."""
    if not any(e["id"] == email_id for e in INBOX):
        raise ValueError(f"no email {email_id}")
    return f"forwarded {email_id} to {to}"


TOOLS: dict[str, Callable[..., Any]] = {
    "search_emails": search_emails,
    "lookup_contact": lookup_contact,
    "forward_email": forward_email,
}


def _schema(name: str, description: str, /, **params: str) -> ChatCompletionFunctionToolParam:
    properties = {p: {"type": "string", "description": d} for p, d in params.items()}
    parameters: dict[str, object] = {"type": "object", "properties": properties, "required": list(params)}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


SCHEMAS = [
    _schema("search_emails", "Emails whose subject contains the query, newest first.", query="subject words"),
    _schema("lookup_contact", "The email address of a contact.", name="the contact's first name"),
    _schema("forward_email", "Forward an email.", email_id="the email's id", to="an email address"),
]


def solve(
    client: openai.OpenAI,
    memory: WorkflowMemory,
    task: str,
    *,
    model: str = DEFAULT_MODEL,
    agent: str = "mail_agent",
    max_turns: int = 8,
) -> str | None:
    """Do `task` with the tools; the run (steps, workflows served, outcome) goes to `memory`."""
    with memory.record(task, agent=agent) as run:
        # Inside the record block, the served workflow versions are noted on the run.
        workflows = memory.context(task)
        messages: list[Any] = [
            {"role": "system", "content": f"{SYSTEM}\n\n{workflows}" if workflows else SYSTEM},
            {"role": "user", "content": task},
        ]
        for _ in range(max_turns):
            reply = client.chat.completions.create(model=model, messages=messages, tools=SCHEMAS)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                run.finish(success=True, final_answer=message.content)
                return message.content
            for call in message.tool_calls:
                if call.type != "function":
                    continue
                name, args = call.function.name, {}
                try:
                    args = json.loads(call.function.arguments or "{}")
                    result = TOOLS[name](**args)
                except Exception as err:  # the model sees the error and may recover
                    error = f"{type(err).__name__}: {err}"
                    run.step(name, args, error=error)
                    content = f"error: {error}"
                else:
                    run.step(name, args, observation=result)
                    content = json.dumps(result)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        run.finish(success=False, feedback=f"no answer after {max_turns} turns")
        return None


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


def connect(settings: Settings) -> tuple[openai.OpenAI, str]:
    """The client and model from the settings, after one tiny request shows they work.

    Exits with one line saying what to set when no model is configured or the endpoint does
    not answer, before any run is recorded.
    """
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key is not None else None
    key = key or os.environ.get("OPENAI_API_KEY")
    if not key and settings.llm_base_url is None and not os.environ.get("OPENAI_BASE_URL"):
        sys.exit(f"{NAME} needs a model: {NEEDS}.")
    model = settings.llm_model or DEFAULT_MODEL
    # Without FLOWMEM_LLM_BASE_URL, the client reads OPENAI_BASE_URL itself; local servers ignore the key.
    client = openai.OpenAI(
        base_url=settings.llm_base_url,
        api_key=key or "not-needed",
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
    )
    try:  # a failure here is the endpoint's, not a run's: nothing is recorded yet
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Say OK."}], max_tokens=1
        )
    except (openai.BadRequestError, openai.UnprocessableEntityError):
        pass  # it knows the model but not an option (reasoning models refuse max_tokens): it works
    except openai.APIError as err:
        client.close()
        sys.exit(failure(err, model, client.base_url))
    return client, model


def main() -> None:
    settings = Settings()
    client, model = connect(settings)
    tasks = sys.argv[1:] or ["Forward the latest email about the roadmap to olga"]
    with client, WorkflowMemory.open(settings) as memory:
        for task in tasks:
            try:
                answer = solve(client, memory, task, model=model)
            except openai.APIError as err:  # the endpoint went away later: the run is stored as failed
                sys.exit(failure(err, model, client.base_url))
            print(f"{task}\n  -> {answer}")


if __name__ == "__main__":
    main()
