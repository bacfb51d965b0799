"""The demo's learning loop with a real LLM agent in flowmem's simulated office.

`flowmem demo` runs the loop with a scripted agent; here a chat-completions model does the
tasks with the office's tools (`flowmem.demo.TOOLS`: mail, contacts, calendar, CRM, board).
Each round, new tasks are solved on fresh copies of one world. The memory arm gets
`memory.context(task)` in its system prompt and is recorded (`memory.record`, one `run.step`
per tool call); the world's goal check, not the model, says whether a task succeeded. Between
rounds `flowmem.jobs.cycle.cycle` collects, induces workflows from the recorded runs and folds the
outcomes into the versions' stats, so later rounds are served what earlier rounds learned.
With --compare each task is also solved without memory (no context, not recorded).

Only single-agent tasks are used (one agent, its tools); the multi-agent families, which need
an orchestrator delegating subtasks, are left out.

Run it (a key, or any OpenAI-compatible server; every task is a few model calls):

    OPENAI_API_KEY=sk-... python examples/llm_office_loop.py --rounds 3 --tasks 10 --compare
    FLOWMEM_LLM_BASE_URL=http://localhost:11434/v1 FLOWMEM_LLM_MODEL=llama3.1 \
        python examples/llm_office_loop.py --family forward_latest --family cancel_next

(--family narrows the tasks, so fewer tasks per round are enough for workflows to form: a
workflow needs a few similar runs.)

It first sends the model one tiny request; without a model configured, or when that request
fails, it says in one line what to set and exits with status 1, before touching the store.

The store (default .flowmem/llm-demo/db, emptied first) keeps the runs and the workflows:
`FLOWMEM_DB=.flowmem/llm-demo/db flowmem workflows list`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletionFunctionToolParam

from flowmem.agents import WorkflowMemory
from flowmem.demo import SINGLE_FAMILIES, TOOLS, Task, ToolError, World, make_tasks
from flowmem.jobs.cycle import cycle
from flowmem.settings import Settings

__all__ = ["SCHEMAS", "Outcome", "main", "run_rounds", "solve"]

SYSTEM = (
    "You are an office assistant with tools for mail, contacts, calendar, CRM and a task board. "
    "Do the user's task with the tools: look up what you need (ids, email addresses) before acting, "
    "and act only as the task asks. When it is done, say in one line what you did."
)
NAME = "llm_office_loop"
DEFAULT_MODEL = "gpt-4o-mini"

_JSON_TYPES = {str: "string", int: "integer"}


def function_name(action: str) -> str:
    """The OpenAI function name of an action: dots are not allowed (`mail.search` -> `mail__search`)."""
    return action.replace(".", "__")


ACTIONS = {function_name(action): action for action in TOOLS}
"""OpenAI function name -> the office's action name."""

SCHEMAS: list[ChatCompletionFunctionToolParam] = [
    {
        "type": "function",
        "function": {
            "name": function_name(action),
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": _JSON_TYPES[kind]} for p, kind in params.items()},
                "required": list(params),
            },
        },
    }
    for action, (params, description) in TOOLS.items()
]
"""Every office tool as a function tool."""


@dataclass(frozen=True)
class Outcome:
    """How one task went."""

    success: bool
    """Whether the world after the run passes the task's goal check."""
    tool_calls: int
    """Tool calls the model made."""
    answer: str | None
    """The model's last text, None when it ran out of turns."""


OnCall = Callable[..., object]
"""Records one tool call: `step(action, args, observation=..., error=...)` (like `run.step`)."""


def _call(
    world: World, name: str, arguments: str | None
) -> tuple[str, dict[str, Any], str | None, str | None]:
    """Run one function call on the world: (action, args, observation, error)."""
    action = ACTIONS.get(name, name)  # an unknown name reaches the world, which refuses it
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as err:
        return action, {}, None, f"arguments are not valid JSON: {err}"
    if not isinstance(args, dict):
        return action, {}, None, "arguments must be a JSON object"
    try:
        return action, args, world.call(action, args), None
    except ToolError as err:  # the model sees the error and may recover
        return action, args, None, str(err)


def _chat(
    client: openai.OpenAI, model: str, task: Task, world: World, system: str, step: OnCall, max_turns: int
) -> tuple[str | None, int]:
    """The tool loop: (the model's final text or None, tool calls made)."""
    messages: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": task.text}]
    calls = 0
    for _ in range(max_turns):
        reply = client.chat.completions.create(model=model, messages=messages, tools=SCHEMAS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content, calls
        for call in message.tool_calls:
            if call.type != "function":
                continue
            calls += 1
            action, args, observation, error = _call(world, call.function.name, call.function.arguments)
            step(action, args, observation=observation, error=error)
            content = observation if error is None else f"error: {error}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
    return None, calls


def _ignore(*_: Any, **__: Any) -> None:
    pass


def solve(
    client: openai.OpenAI,
    model: str,
    task: Task,
    world: World,
    memory: WorkflowMemory | None = None,
    *,
    run_id: str | None = None,
    max_turns: int = 10,
) -> Outcome:
    """Do `task` on `world` (changed in place); with `memory`, serve workflows and record the run."""
    if memory is None:
        answer, calls = _chat(client, model, task, world, SYSTEM, _ignore, max_turns)
        return Outcome(task.check(world), calls, answer)
    with memory.record(task.text, agent=task.agent, id=run_id, group=task.family) as run:
        # Inside the record block, the served workflow versions are noted on the run.
        context = memory.context(task.text, agent=task.agent)
        system = f"{SYSTEM}\n\n{context}" if context else SYSTEM
        answer, calls = _chat(client, model, task, world, system, run.step, max_turns)
        reason = task.diagnose(world)  # the world decides, not the model
        run.finish(success=reason is None, final_answer=answer, feedback=reason)
    return Outcome(reason is None, calls, answer)


def _arm(outcomes: Sequence[Outcome]) -> dict[str, float]:
    n = max(len(outcomes), 1)
    return {
        "success_rate": round(sum(o.success for o in outcomes) / n, 3),
        "mean_steps": round(sum(o.tool_calls for o in outcomes) / n, 2),
    }


def run_rounds(
    client: openai.OpenAI,
    model: str,
    settings: Settings,
    *,
    rounds: int = 3,
    tasks: int = 10,
    seed: int = 0,
    compare: bool = False,
    families: Sequence[str] | None = None,
    max_turns: int = 10,
    fresh: bool = True,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the learning loop with the model as the agent, on the settings' store.

    Args:
        client: The chat-completions client.
        model: The model name.
        settings: Where the memory arm's runs and the workflows live.
        rounds: How many rounds.
        tasks: Single-agent tasks per round (new tasks every round, from the same families).
        seed: Seed of the world and the tasks.
        compare: Also solve every task without memory (not recorded).
        families: Single-agent family names to draw tasks from; all of them by default.
        max_turns: Model calls per task, at most.
        fresh: Delete the store directory first (only a local directory).
        progress: Called with each round's summary when it is done.

    Returns:
        One summary per round: `round`, `workflows` (served at its start), `with_memory` and
        `without_memory` (None without `compare`), each `{"success_rate", "mean_steps"}`.
    """
    single = [f.name for f in SINGLE_FAMILIES]
    families = list(families) if families is not None else single
    if not families or any(f not in single for f in families):
        raise ValueError(f"not single-agent families: {families}; choose from {single}")
    if fresh and "://" not in settings.db:
        shutil.rmtree(settings.db, ignore_errors=True)
    world = World.generate(seed)
    summaries: list[dict[str, Any]] = []
    with WorkflowMemory(settings) as memory:
        for r in range(1, rounds + 1):
            served = len({w.id for w in memory.store.workflow_index()[0]})
            mine, base = [], []
            for i, task in enumerate(make_tasks(world, tasks, seed=seed * 1_000 + r, families=families)):
                run_id = f"llm-{seed}-r{r}-{i:03d}"
                mine.append(
                    solve(client, model, task, world.copy(), memory, run_id=run_id, max_turns=max_turns)
                )
                if compare:
                    base.append(solve(client, model, task, world.copy(), max_turns=max_turns))
            memory.flush()
            summary = {
                "round": r,
                "workflows": served,
                "with_memory": _arm(mine),
                "without_memory": _arm(base) if compare else None,
            }
            summaries.append(summary)
            if progress is not None:
                progress(summary)
            if r < rounds:
                cycle(memory.store, settings)
    return summaries


def _line(s: dict[str, Any]) -> str:
    w, wo = s["with_memory"], s["without_memory"]
    line = f"round {s['round']}: with memory {w['success_rate']:.0%} in {w['mean_steps']:.1f} calls"
    if wo is not None:
        line += f", without {wo['success_rate']:.0%} in {wo['mean_steps']:.1f}"
    return f"{line}; workflows served: {s['workflows']}"


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


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
    not answer, before the store is touched.
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
    try:  # a failure here is the endpoint's, not a run's: nothing is recorded (or emptied) yet
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Say OK."}], max_tokens=1
        )
    except (openai.BadRequestError, openai.UnprocessableEntityError):
        pass  # it knows the model but not an option (reasoning models refuse max_tokens): it works
    except openai.APIError as err:
        client.close()
        sys.exit(failure(err, model, client.base_url))
    return client, model


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=_positive, default=3, help="rounds of tasks (default 3)")
    parser.add_argument(
        "--tasks", type=_positive, default=10, help="single-agent tasks per round (default 10)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the world and the tasks (default 0)")
    parser.add_argument("--compare", action="store_true", help="also solve each task without memory")
    parser.add_argument(
        "--family",
        action="append",
        choices=[f.name for f in SINGLE_FAMILIES],
        metavar="FAMILY",
        help="draw tasks only from this single-agent family (repeatable; default: all of them): "
        + ", ".join(f.name for f in SINGLE_FAMILIES),
    )
    parser.add_argument(
        "--max-turns", type=_positive, default=10, help="model calls per task, at most (default 10)"
    )
    parser.add_argument("--db", default=".flowmem/llm-demo/db", help="the loop's store (emptied first)")
    args = parser.parse_args(argv)

    settings = Settings(db=args.db)
    client, model = connect(settings)
    print(f"model {model}; {args.rounds} rounds of {args.tasks} single-agent tasks", flush=True)
    with client:
        try:
            run_rounds(
                client,
                model,
                settings,
                rounds=args.rounds,
                tasks=args.tasks,
                seed=args.seed,
                compare=args.compare,
                families=args.family,
                max_turns=args.max_turns,
                progress=lambda s: print(_line(s), flush=True),
            )
        except openai.APIError as err:  # the endpoint went away later: that run is stored as failed
            sys.exit(failure(err, model, client.base_url))
    print(f"store: {settings.db} (try FLOWMEM_DB={settings.db} flowmem workflows list)")


if __name__ == "__main__":
    main()
