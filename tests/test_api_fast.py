"""The API's search hot path (`server.fast_search`, `server.hits_json`): the same answers as the
route for every query, byte for byte; the induction lock across worker processes; workers."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from flowmem.flows.local import free_port
from flowmem.models import Pitfall, Repeat, WorkflowStep
from flowmem.retrieval.search import Hit
from flowmem.server import service as service_module
from flowmem.server.api import create_app, listener, run
from flowmem.server.fast_search import SearchFastPath, plain_search
from flowmem.server.hits_json import HitsJson
from flowmem.server.payloads import SearchHit
from flowmem.server.service import Busy
from flowmem.settings import Settings
from tests.factories import induced, make_workflow
from tests.processes import READY_LIMIT

TOKEN = "fast-Token-7e1"
FORWARD = "Forward the latest email about 'roadmap' to zed"
MODELS = TypeAdapter(list[SearchHit])


def test_hits_json_is_what_the_models_write() -> None:
    odd = make_workflow(
        "odd",
        3,
        steps=3,
        description='Quotes " and \\ and ünïcödé, a tab\t and </script>',
        status="active",
        pitfalls=[Pitfall(text="don't forward to the wrong «person»")],
    )
    looped = odd.model_copy(
        update={
            "steps": [
                WorkflowStep(action="a.b", note="why", agent="mailer", repeat=Repeat(over="x")),
                WorkflowStep(action="c.d", args={"n": 1.5, "deep": {"k": [1, None]}}, subroutine="s1"),
            ]
        }
    )
    plain = make_workflow("plain")
    writer = HitsJson(size=2)
    for score, similarity in [(1.0, 1.0), (0.0, -0.0), (0.123456789, 0.98765), (1e-05, 3.0), (-0.5, 2 / 3)]:
        hits = [Hit(w, score, similarity) for w in (odd, looped, plain)]
        assert writer.dump(hits) == MODELS.dump_json([SearchHit.of_hit(h) for h in hits])
    assert writer.dump([]) == MODELS.dump_json([]) == b"[]"
    assert writer.misses > 3  # a cache of 2 over 3 versions: rewritten, and still the same bytes


def test_a_version_is_written_once_while_it_is_served() -> None:
    w, writer = make_workflow(), HitsJson()
    for _ in range(5):
        writer.dump([Hit(w, 0.5, 0.5)])
    assert writer.misses == 1
    other = make_workflow()  # equal, but another object (a reload): written again
    writer.dump([Hit(other, 0.5, 0.5)])
    assert writer.misses == 2


@pytest.mark.parametrize(
    ("query", "plain"),
    [
        ({"task": "x"}, ("x", 3, None)),
        ({"task": "x", "k": "20", "agent": ""}, ("x", 20, "")),
        ({"task": "a b&c=d é", "k": "1", "agent": "mailer", "other": "1"}, ("a b&c=d é", 1, "mailer")),
        ({"task": "x" * 10_000}, ("x" * 10_000, 3, None)),
    ],
)
def test_plain_searches(query: dict[str, str], plain: tuple[str, int, str | None]) -> None:
    assert plain_search(urllib.parse.urlencode(query).encode()) == plain


@pytest.mark.parametrize(
    "query",
    [
        "",
        "task=",
        "k=3",
        "task=" + "x" * 10_001,
        "task=x&k=0",
        "task=x&k=21",
        "task=x&k=+3",
        "task=x&k=3.0",
        "task=x&k=%203",
        "task=x&k=",
        "task=x&k=%D9%A3",  # an Arabic-Indic 3: a digit to str.isdigit, not to the route
        "task=x&task=y",
        "task=x&k=2&k=3",
        "task=x&agent=a&agent=b",
    ],
)
def test_anything_else_is_left_to_the_route(query: str) -> None:
    assert plain_search(query.encode()) is None


def _route_only(settings: Settings) -> TestClient:
    """The app without its hot path: what the route alone answers."""
    app = create_app(settings)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not SearchFastPath]  # type: ignore[comparison-overlap]
    return TestClient(app)


QUERIES = [
    f"task={urllib.parse.quote(FORWARD)}",
    f"task={urllib.parse.quote(FORWARD)}&k=1",
    f"task={urllib.parse.quote(FORWARD)}&k=20&agent=",
    f"task={urllib.parse.quote(FORWARD)}&agent=nobody",
    "task=cancel%20the%20meeting&k=2",
    "task=zzz",
    "task=x&k=0",
    "task=x&k=03",
    "task=x&k=2&k=3",
    "task=&k=2",
    "k=2",
    "task=" + "y" * 10_001,
]


def _answers(api: TestClient, headers: dict[str, str] | None = None) -> list[tuple[int, bytes, str, str]]:
    out = []
    for query in QUERIES:
        r = api.get(f"/v1/workflows/search?{query}", headers=headers)
        out.append((r.status_code, r.content, r.headers["content-type"], r.headers["content-length"]))
    return out


def test_the_hot_path_answers_as_the_route(settings: Settings) -> None:
    induced(settings)
    both = _answers(TestClient(create_app(settings)))
    assert both == _answers(_route_only(settings))
    assert {status for status, *_ in both} == {200, 422}
    assert both[0][1].startswith(b'[{"id":')


@pytest.mark.parametrize(
    "headers",
    [
        None,
        {"Authorization": f"Bearer {TOKEN}"},
        {"Authorization": f"bearer {TOKEN}"},
        {"Authorization": f"Bearer  {TOKEN} "},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
        {"Authorization": f"Basic {TOKEN}"},
    ],
)
def test_with_read_tokens_too(settings: Settings, headers: dict[str, str] | None) -> None:
    induced(settings)
    closed = Settings.model_validate({**settings.model_dump(), "api_token": TOKEN, "api_read_token": True})
    answers = _answers(TestClient(create_app(closed)), headers)
    assert answers == _answers(_route_only(closed), headers)
    # No token configured: reads that need one are refused (403) either way.
    nothing = Settings.model_validate({**settings.model_dump(), "api_read_token": True})
    refused = _answers(TestClient(create_app(nothing)), headers)
    assert refused == _answers(_route_only(nothing), headers) and refused[0][0] == 403


def test_openapi_is_the_routes(settings: Settings) -> None:
    app: FastAPI = create_app(settings)
    route_only = create_app(settings)
    route_only.user_middleware = []
    assert app.openapi() == route_only.openapi()


def test_one_induction_at_a_time_across_processes(tmp_path: Path) -> None:
    """Worker processes hold the same lock file: a second holder, even in another process
    (here another open file, which `flock` tells apart the same way), is refused."""
    name = f"{tmp_path}/db\0default"
    with service_module._file_lock(name):
        with pytest.raises(Busy), service_module._file_lock(name):
            pass
        with service_module._file_lock(f"{tmp_path}/db\0other"):  # another namespace: its own lock
            pass
    with service_module._file_lock(name):  # released
        pass


def test_workers_read_the_environments_settings(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="environment"):
        run(Settings(db=str(tmp_path / "elsewhere")), host="127.0.0.1", port=free_port(), workers=2)


def _nodelay_of_a_connection(listening: socket.socket) -> int:
    """TCP_NODELAY of a connection asyncio accepts on a listening socket, as a worker's does."""

    async def accept() -> int:
        found: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Report(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                found.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Report, sock=listening)
        with socket.create_connection(listening.getsockname()[:2]):
            result = await asyncio.wait_for(found, READY_LIMIT)
        server.close()
        return result

    return asyncio.run(accept())


def test_a_workers_connections_turn_nagle_off() -> None:
    """uvicorn binds its workers' socket with `proto` 0, so asyncio left Nagle on for their
    connections and each keep-alive answer after the first waited for a delayed ACK (~40 ms);
    `listener` says the same socket is TCP."""
    import uvicorn

    def bound() -> socket.socket:
        return uvicorn.Config(create_app, host="127.0.0.1", port=free_port(), workers=2).bind_socket()

    fixed = listener(bound())
    assert fixed.proto == socket.IPPROTO_TCP
    assert _nodelay_of_a_connection(fixed) != 0


def test_flowmem_api_with_two_workers(settings: Settings, tmp_path: Path) -> None:
    induced(settings)
    port = free_port()
    env: dict[str, Any] = {
        **os.environ,
        "FLOWMEM_DB": settings.db,
        "FLOWMEM_API_TOKEN": TOKEN,
        "LANCEDB_LOG": "error",
    }
    log = tmp_path / "api.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "flowmem.cli", "api", "--port", str(port), "--workers", "2"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 2 * READY_LIMIT  # two processes start
            with httpx.Client(base_url=base, timeout=READY_LIMIT) as http:
                while True:
                    try:
                        if http.get("/health").status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)
                for _ in range(20):  # whichever worker answers
                    hits = http.get("/v1/workflows/search", params={"task": FORWARD}).json()
                    assert hits and hits[0]["steps"][-1]["action"] == "mail.forward"
                auth = {"Authorization": f"Bearer {TOKEN}"}
                sent = [{"id": f"w2-{i}", "task": f"forward mail {i}", "steps": []} for i in range(4)]
                assert http.post("/v1/trajectories", json=sent, headers=auth).json()["stored"] == 4
                assert http.post("/v1/trajectories", json=sent, headers=auth).json()["duplicates"] == 4
        finally:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=60)
    assert "Started parent process" in log.read_text()
