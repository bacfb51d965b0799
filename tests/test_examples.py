"""The examples. examples/llm_office_loop.py against a scripted chat-completions endpoint on
httpx.MockTransport (no network, no key): the loop records the memory arm's runs, learns between
rounds and serves what it learned to the next round. Then each example run as a new user runs it:
against a local stub (a subprocess, `python examples/<name>.py`), and without a model, against an
endpoint that is down or refuses, without the Agents SDK (one line saying what to set, a
non-zero exit, no run stored), those in this process with the environment, directory and
arguments of a new user's run (`run_here`)."""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import re
import runpy
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from examples import llm_office_loop
from examples.llm_office_loop import SYSTEM, run_rounds, solve
from flowmem.agents import WorkflowMemory
from flowmem.demo import World, make_tasks
from flowmem.models import Trajectory
from flowmem.settings import Settings
from tests.llm_stub import LLMStub
from tests.processes import READY_LIMIT

pytestmark = pytest.mark.xdist_group("examples")  # the example runs they check, launched once

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
    # The loop's mechanics: every task of round 2 is served. With the default relevance floor,
    # a round-2 task worded another way than round 1's three ("Find the newest ... and forward
    # it to ..." against "Send ... the most recent email about ...", 0.12-0.33 similar with the
    # hashing embedder) gets nothing until runs worded like it are stored (docs/induction.md).
    settings = settings.model_copy(update={"relevance_floor": 0.0})
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
        assert memory.flush(timeout=READY_LIMIT)
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
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "FLOWMEM_LLM_API_KEY", "FLOWMEM_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit, match="OPENAI_API_KEY.*FLOWMEM_LLM_BASE_URL"):
        llm_office_loop.main(["--rounds", "1"])
    assert not (tmp_path / ".flowmem").exists()


def test_only_single_agent_families() -> None:
    with pytest.raises(ValueError, match="single-agent"):
        run_rounds(None, "m", Settings(db="memory://unused"), families=["onboard_customer"])  # type: ignore[arg-type]


# -- every example run as a new user runs it: without a model, or with one that is down ----------

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NAMES = ["openai_function_calling", "openai_agents_sdk", "llm_office_loop"]
RUN_TIMEOUT = READY_LIMIT
"""Seconds an example run may take (a hang fails the test): a bound, not a budget. Most take
1-3 s; started together (`launch_examples`), one can wait a long while for a core on a loaded
machine."""


def user_environment(base: Mapping[str, str], tmp_path: Path, **env: str) -> dict[str, str]:
    """A new user's environment for an example run in `tmp_path`: `base` without any OPENAI_* or
    FLOWMEM_* variable, then `FLOWMEM_DB=<tmp_path>/db` and `env`."""
    clean = {k: v for k, v in base.items() if not k.startswith(("OPENAI_", "FLOWMEM_"))}
    return clean | {"FLOWMEM_DB": str(tmp_path / "db"), **env}


def user_arguments(name: str, tmp_path: Path, args: tuple[str, ...]) -> list[str]:
    """The example's arguments: `args`, and for the office loop its store (emptied first, not
    FLOWMEM_DB) in `tmp_path`."""
    return ["--db", str(tmp_path / "db"), *args] if name == "llm_office_loop" else list(args)


def run_example(
    name: str,
    tmp_path: Path,
    *args: str,
    environ: dict[str, str] | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """`python examples/<name>.py ARGS` in `tmp_path`, in `user_environment` of `environ`
    (os.environ when the call is made by default)."""
    argv = [sys.executable, str(EXAMPLES / f"{name}.py"), *user_arguments(name, tmp_path, args)]
    clean = user_environment(os.environ if environ is None else environ, tmp_path, **env)
    with subprocess.Popen(
        argv, cwd=tmp_path, env=clean, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        try:  # what subprocess.run(..., capture_output=True, timeout=RUN_TIMEOUT) does
            stdout, stderr = process.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


@dataclass
class Here:
    """Runs an example in this process as `run_example` runs it in a new one (its test's
    monkeypatch and capfd)."""

    monkeypatch: pytest.MonkeyPatch
    capfd: pytest.CaptureFixture[str]

    def run(self, name: str, tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`python examples/<name>.py ARGS` run here: the environment, working directory and
        argv of `run_example`'s, what it writes to stdout and stderr, and the exit status and
        message the interpreter would give (`sys.exit("...")` prints it to stderr and exits 1;
        an uncaught exception prints its traceback and exits 1). The collection afterwards
        makes a file or a socket it left open a ResourceWarning now, which fails this test
        (pyproject.toml's filterwarnings), where a process would exit without a word."""
        script = EXAMPLES / f"{name}.py"
        argv = [str(script), *user_arguments(name, tmp_path, args)]
        patch, environ = self.monkeypatch, user_environment(os.environ, tmp_path, **env)
        for variable in set(os.environ) - set(environ):
            patch.delenv(variable)
        for variable, value in environ.items():
            patch.setenv(variable, value)
        patch.chdir(tmp_path)
        patch.setattr(sys, "argv", argv)
        self.capfd.readouterr()
        code, message = 0, ""
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as exit:
            code, message = _exit_status(exit.code)
        except Exception:
            code, message = 1, traceback.format_exc()
        gc.collect()
        out, err = self.capfd.readouterr()
        return subprocess.CompletedProcess(argv, code, out, err + message)


def _exit_status(code: object) -> tuple[int, str]:
    """The exit status and the message on stderr of `sys.exit(code)` at an interpreter's top."""
    if code is None:
        return 0, ""
    if isinstance(code, int):
        return code, ""
    return 1, f"{code}\n"


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The only line the run printed, on stdout and stderr together, after a non-zero exit."""
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output
    lines = output.splitlines()
    assert len(lines) == 1, output
    return lines[0]


class Refusing:
    """An endpoint on 127.0.0.1 that answers every request with one error status; use it as a
    context manager, which gives its base URL."""

    def __init__(self, status: int) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.dumps({"error": {"message": f"refused with {status}", "type": "error"}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


REFUSED = [  # the three examples share this code: each is checked once, each status at least once
    ("openai_function_calling", 401, "refused the API key", "FLOWMEM_LLM_API_KEY"),
    ("openai_agents_sdk", 404, "has no model 'm'", "FLOWMEM_LLM_MODEL"),
    ("llm_office_loop", 401, "refused the API key", "OPENAI_API_KEY"),
]


@pytest.fixture
def here(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> Here:
    """Example runs in this test's process (`Here.run`)."""
    return Here(monkeypatch, capfd)


@pytest.mark.parametrize("name", NAMES)
def test_without_a_model_each_example_says_what_to_set_in_one_line(
    name: str, here: Here, tmp_path: Path
) -> None:
    line = one_line(here.run(name, tmp_path))
    assert line.startswith(f"{name} needs a model")
    for variable in ("OPENAI_API_KEY", "FLOWMEM_LLM_API_KEY", "FLOWMEM_LLM_BASE_URL", "FLOWMEM_LLM_MODEL"):
        assert variable in line
    assert "OpenAI-compatible" in line
    assert stored(Settings(db=str(tmp_path / "db"))) == []


@pytest.mark.parametrize("name", NAMES)
def test_an_unreachable_endpoint_is_one_line_and_stores_no_run(name: str, here: Here, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: it refuses connections
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        line = one_line(here.run(name, tmp_path, FLOWMEM_LLM_BASE_URL=url, FLOWMEM_LLM_MODEL="m"))
    assert line.startswith(f"{name}: no answer from {url}")
    assert "FLOWMEM_LLM_BASE_URL" in line and "OpenAI-compatible" in line
    assert stored(Settings(db=str(tmp_path / "db"))) == []


@pytest.mark.parametrize(("name", "status", "phrase", "variable"), REFUSED)
def test_a_refused_key_or_an_unknown_model_is_one_line_and_stores_no_run(
    name: str, status: int, phrase: str, variable: str, here: Here, tmp_path: Path
) -> None:
    with Refusing(status) as url:
        line = one_line(here.run(name, tmp_path, FLOWMEM_LLM_BASE_URL=url, FLOWMEM_LLM_MODEL="m"))
    assert line.startswith(f"{name}: {url}") and phrase in line and variable in line
    assert stored(Settings(db=str(tmp_path / "db"))) == []


def test_without_the_agents_sdk_its_example_says_what_to_install(
    here: Here, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)  # `import agents` fails as if not installed
    line = one_line(here.run("openai_agents_sdk", tmp_path))
    assert "OpenAI Agents SDK" in line and "pip install" in line and "openai-agents" in line
    assert not (tmp_path / "db").exists()


# -- and against a working endpoint, as `python examples/<name>.py` ---------------------------


@dataclass
class Launched:
    """An example run started by `launch_examples`: its directory, the stub behind its
    endpoint, and the run (`done.result()` waits for it)."""

    cwd: Path
    stub: LLMStub
    done: Future[subprocess.CompletedProcess[str]]

    def result(self) -> subprocess.CompletedProcess[str]:
        """Wait for the run."""
        return self.done.result()


@contextlib.contextmanager
def launch_examples(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Launched]]:
    """Each example run against a local stub, started at once, two at a time. Each is a fresh
    interpreter that spends most of its time importing; each test waits for its own run and
    checks it. The stubs live as long as the runs' results are used."""
    with contextlib.ExitStack() as stack:
        stubs = {name: stack.enter_context(LLMStub(default={"done": True})) for name in NAMES}
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=2))  # exits first: every run ended
        environ = dict(os.environ)  # as it is now, not as another test may have set it meanwhile
        runs: dict[str, Launched] = {}
        for name in NAMES:
            cwd = tmp_path_factory.mktemp(f"working-{name}")
            done = pool.submit(
                run_example,
                name,
                cwd,
                *(["--rounds", "1", "--tasks", "1"] if name == "llm_office_loop" else []),
                environ=environ,
                FLOWMEM_LLM_BASE_URL=stubs[name].url,
                FLOWMEM_LLM_MODEL="m",
            )
            runs[name] = Launched(cwd, stubs[name], done)
        yield runs


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Launched]]:
    """The example runs of `launch_examples`, started as the first test that needs one begins."""
    with launch_examples(tmp_path_factory) as runs:
        yield runs


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_with_a_working_endpoint_each_example_runs_and_records(
    name: str, launched: dict[str, Launched]
) -> None:
    run = launched[name]
    done = run.result()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert {r.body["model"] for r in run.stub.requests} == {"m"}
    [recorded] = stored(Settings(db=str(run.cwd / "db")))
    assert recorded.final_answer == '{"done": true}'
