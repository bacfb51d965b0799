"""A plain chat-completions tool loop that records its runs into flowmem and follows its workflows.

The loop puts `memory.context(task)` — the workflows that worked for similar tasks — in the
system prompt, records each tool call with `run.step` and the outcome with `run.finish`. No
framework: the same three calls fit any agent loop.

Run it (a key, or any OpenAI-compatible server):

    OPENAI_API_KEY=sk-... python examples/openai_function_calling.py "Forward the roadmap email to olga"
    FLOWMEM_LLM_BASE_URL=http://localhost:11434/v1 FLOWMEM_LLM_MODEL=llama3.1 \
        python examples/openai_function_calling.py

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
    model: str = "gpt-4o-mini",
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


def main() -> None:
    settings = Settings()
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key is not None else None
    if key is None and settings.llm_base_url is not None:
        key = os.environ.get("OPENAI_API_KEY", "not-needed")  # local servers ignore it
    # Without FLOWMEM_LLM_*, the client reads OPENAI_API_KEY and OPENAI_BASE_URL itself.
    client = openai.OpenAI(base_url=settings.llm_base_url, api_key=key)
    tasks = sys.argv[1:] or ["Forward the latest email about the roadmap to olga"]
    with WorkflowMemory.open(settings) as memory:
        for task in tasks:
            print(f"{task}\n  -> {solve(client, memory, task, model=settings.llm_model or 'gpt-4o-mini')}")


if __name__ == "__main__":
    main()
