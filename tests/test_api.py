"""The HTTP API: every route, the bearer token, tenants, and a thousand malformed records."""

from __future__ import annotations

import json
import logging
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from flowmem.flows.local import free_port
from flowmem.interchange import RecordError, loads, parse_line
from flowmem.jobs.factories import store_from
from flowmem.jobs.ingest import store_trajectories
from flowmem.models import InductionRun
from flowmem.server.api import create_app
from flowmem.server.service import Service
from flowmem.settings import Settings
from tests.factories import cancel, forward, induced, make_workflow
from tests.malformed import BAD_TEMPLATES, LIMITS, encode, generated_malformed
from tests.processes import READY_LIMIT

TOKEN = "s3cret-Token-do-not-echo-7f3a"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FORWARD = "Forward the latest email about 'roadmap' to zed"


def with_(settings: Settings, **kw: Any) -> Settings:
    return Settings.model_validate({**settings.model_dump(), **kw})


def client(settings: Settings, **kw: Any) -> TestClient:
    return TestClient(create_app(with_(settings, api_token=TOKEN, **kw)))


def record(i: int, **kw: Any) -> dict[str, Any]:
    return {"id": f"api-{i}", "task": f"Forward the latest email about 'topic {i}' to zed", "steps": [], **kw}


def test_docs_and_openapi_describe_every_route(settings: Settings) -> None:
    api = client(settings)
    assert api.get("/docs").status_code == 200
    spec = api.get("/openapi.json").json()
    assert set(spec["paths"]) == {
        "/health",
        "/v1/workflows",
        "/v1/workflows/search",
        "/v1/workflows/{workflow_id}",
        "/v1/trajectories",
        "/v1/runs/{run_id}/outcome",
        "/v1/workflows/{workflow_id}/history",
        "/v1/workflows/{workflow_id}/diff",
        "/v1/workflows/{workflow_id}/status",
        "/v1/induction/runs",
        "/v1/induction/runs/{run_id}/rollback",
    }
    assert "application/x-ndjson" in spec["paths"]["/v1/trajectories"]["post"]["requestBody"]["content"]
    assert api.get("/health").json()["namespace"] == "default"


def test_every_response_of_every_route_names_a_model(settings: Settings) -> None:
    """Each 2xx answer (and each error answer a route documents with a body of its own, such
    as the 502 of an induction where every cluster failed) is a component schema, or an array
    of one: never a bare object a client has to guess the keys of."""
    spec = create_app(settings).openapi()
    components = spec["components"]["schemas"]
    checked = 0
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if not code.startswith("2") and code not in ("409", "422", "502"):
                    continue
                if code == "422" and path != "/v1/trajectories":  # FastAPI's own validation error
                    continue
                schema = response["content"]["application/json"]["schema"]
                ref = schema["items"]["$ref"] if schema.get("type") == "array" else schema.get("$ref")
                assert ref is not None, f"{method.upper()} {path} {code}: {schema}"
                name = ref.removeprefix("#/components/schemas/")
                assert components[name].get("properties"), f"{path} {code}: {name} has no fields"
                checked += code.startswith("2")
    assert checked == 12  # one 2xx answer per route


def test_read_routes_serve_the_namespaces_workflows(settings: Settings) -> None:
    induced(settings)
    api = client(settings)
    hits = api.get("/v1/workflows/search", params={"task": FORWARD}).json()
    assert 1 <= len(hits) <= 3
    top = hits[0]
    assert [s["action"] for s in top["steps"]] == ["mail.search", "contacts.lookup", "mail.forward"]
    assert {"id", "version", "name", "score", "similarity", "text", "pitfalls", "status"} <= set(top)
    assert "zed" not in json.dumps(hits) and "roadmap" not in json.dumps(hits)
    assert len(api.get("/v1/workflows/search", params={"task": FORWARD, "k": 1}).json()) == 1
    assert api.get("/v1/workflows/search", params={"task": FORWARD, "k": 0}).status_code == 422
    assert api.get("/v1/workflows/search", params={"task": FORWARD, "agent": "nobody"}).json() == []

    got = api.get(f"/v1/workflows/{top['id']}").json()
    assert (got["id"], got["version"], got["versions"][0]["version"]) == (top["id"], 1, 1)
    assert api.get(f"/v1/workflows/{top['id']}", params={"version": 1}).json()["steps"] == top["steps"]
    missing = api.get(f"/v1/workflows/{top['id']}", params={"version": 9})
    assert missing.status_code == 404 and "no version 9" in missing.json()["detail"]
    assert api.get("/v1/workflows/nope").status_code == 404

    listed = api.get("/v1/workflows").json()
    assert top["id"] in {w["id"] for w in listed} and len(listed) == 2
    assert api.get("/v1/workflows", params={"status": "deprecated"}).json() == []


def test_writes_need_the_token_which_is_never_echoed(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    api = client(settings)
    for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": f"Basic {TOKEN}"}):
        r = api.post("/v1/trajectories", json=[record(1)], headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json() == {"detail": "missing or invalid bearer token"}
        r = api.post("/v1/runs/api-1/outcome", json={"success": True}, headers=headers)
        assert r.status_code == 401
    assert store_from(settings).count_trajectories() == 0
    # A token with the right prefix is still wrong (the comparison is over the whole token).
    assert (
        api.post("/v1/trajectories", json=[], headers={"Authorization": f"Bearer {TOKEN[:-1]}"}).status_code
        == 401
    )
    ok = api.post("/v1/trajectories", json=[record(1)], headers=AUTH)
    assert ok.status_code == 200 and ok.json()["stored"] == 1
    assert TOKEN not in caplog.text and "wrong-token" not in caplog.text

    no_token = TestClient(create_app(settings))  # no token configured: no writes at all
    r = no_token.post("/v1/trajectories", json=[record(2)], headers=AUTH)
    assert r.status_code == 403 and "FLOWMEM_API_TOKEN" in r.json()["detail"]
    assert no_token.get("/v1/workflows").status_code == 200  # reads stay open by default

    closed = client(settings, api_read_token=True)
    assert closed.get("/v1/workflows").status_code == 401
    assert closed.get("/v1/workflows/search", params={"task": "x"}).status_code == 401
    assert closed.get("/v1/workflows", headers=AUTH).status_code == 200


def test_posting_trajectories_in_each_format(settings: Settings) -> None:
    api = client(settings)
    batch = [record(0), record(1, success=True), {"task": 5}, record(2, namespace="other"), "nope"]
    r = api.post("/v1/trajectories", json={"trajectories": batch}, headers=AUTH).json()
    assert (r["received"], r["stored"], r["duplicates"]) == (5, 2, 0)
    assert [x["index"] for x in r["rejected"]] == [2, 3, 4]
    reasons = [x["reason"] for x in r["rejected"]]
    assert "task" in reasons[0] and "not this server's" in reasons[1] and "JSON object" in reasons[2]

    again = api.post("/v1/trajectories", json=[record(0), record(3)], headers=AUTH).json()
    assert (again["stored"], again["duplicates"]) == (1, 1)

    lines = b"\n".join([encode(record(4)), b"{broken", encode(record(5)), b""])
    nd = api.post(
        "/v1/trajectories", content=lines, headers={**AUTH, "Content-Type": "application/x-ndjson"}
    ).json()
    assert (nd["stored"], [x["index"] for x in nd["rejected"]]) == (2, [1])
    assert nd["rejected"][0]["reason"].startswith("malformed JSON")

    assert api.post("/v1/trajectories", content=b"{nope", headers=AUTH).status_code == 400
    assert api.post("/v1/trajectories", json={"task": "t"}, headers=AUTH).status_code == 400
    too_many = api.post("/v1/trajectories", json=[record(i) for i in range(1_001)], headers=AUTH)
    assert too_many.status_code == 413
    store = store_from(settings)
    assert store.count_trajectories() == 5 and store.count_trajectories(namespace="other") == 0
    quarantined = settings.quarantine_path.read_text().splitlines()
    assert len(quarantined) == 4 and all(json.loads(q)["source"] == "api" for q in quarantined)


def test_reporting_an_outcome(settings: Settings) -> None:
    api = client(settings)
    api.post("/v1/trajectories", json=[record(1)], headers=AUTH)
    r = api.post("/v1/runs/api-1/outcome", json={"success": False, "feedback": "wrong email"}, headers=AUTH)
    assert r.json() == {"id": "api-1", "success": False}
    stored = store_from(settings).get_trajectory("api-1")
    assert (stored.success, stored.feedback) == (False, "wrong email")
    assert api.post("/v1/runs/nope/outcome", json={"success": True}, headers=AUTH).status_code == 404
    bad = api.post("/v1/runs/api-1/outcome", json={"success": "maybe", "x": TOKEN}, headers=AUTH)
    assert bad.status_code == 422 and TOKEN not in bad.text and "maybe" not in bad.text


def test_a_namespace_never_sees_another_ones_workflows(settings: Settings) -> None:
    store = induced(settings)  # namespace "default"
    store_trajectories(
        store,
        [forward(i).model_copy(update={"namespace": "b", "id": f"b{i}"}) for i in range(2)],
        settings.scrub,
    )
    api_b = client(with_(settings, namespace="b"))
    assert api_b.get("/health").json()["namespace"] == "b"
    assert api_b.get("/v1/workflows/search", params={"task": FORWARD}).json() == []
    assert api_b.get("/v1/workflows").json() == []
    [wid] = [w.id for w in store.list_workflows() if "forward" in w.name or "mail" in w.name][:1]
    assert api_b.get(f"/v1/workflows/{wid}").status_code == 404
    response = api_b.post("/v1/trajectories", json=[record(9, namespace="default")], headers=AUTH)
    r = response.json()  # every record rejected: 422, with the reasons
    assert (
        response.status_code == 422 and r["stored"] == 0 and "not this server's" in r["rejected"][0]["reason"]
    )
    assert (
        api_b.post("/v1/runs/fwd-0-False/outcome", json={"success": False}, headers=AUTH).status_code == 404
    )
    assert store.get_trajectory("fwd-0-False").success is True  # namespace "default"'s run untouched


def test_a_thousand_malformed_records_through_the_api(settings: Settings) -> None:
    """The generated malformed lines of tests/test_bad_input.py, through POST /v1/trajectories
    as JSON Lines among valid ones: every malformed record is rejected with exactly the reason
    `flowmem ingest` gives, every valid one is stored, the server never fails."""
    limited = with_(settings, **LIMITS)
    api = client(limited)
    rng = random.Random(7)
    generated = [line for lines in generated_malformed().values() for line in lines]
    generated += [BAD_TEMPLATES[i % len(BAD_TEMPLATES)](rng) for i in range(200)]
    # JSON Lines cannot carry a line break inside a record, nor a blank record.
    lines = [line for line in generated if line.strip() and not (set(line) & {10, 13})]
    assert len(lines) >= 1_100  # 1,172 here (hypothesis shapes vary a little between versions)
    reasons = [_reason(line, limited) for line in lines]

    good = [encode(record(i)) for i in range(200)]
    body_lines: list[tuple[bytes, str | None]] = [
        (line, reason) for line, reason in zip(lines, reasons, strict=True)
    ]
    body_lines += [(line, None) for line in good]
    rng.shuffle(body_lines)
    stored = 0
    for start in range(0, len(body_lines), 400):
        chunk = body_lines[start : start + 400]
        r = api.post(
            "/v1/trajectories",
            content=b"\n".join(line for line, _ in chunk),
            headers={**AUTH, "Content-Type": "application/x-ndjson"},
        )
        assert r.status_code == 200, r.text[:300]
        got = r.json()
        expected = [(i, reason) for i, (_, reason) in enumerate(chunk) if reason is not None]
        assert [(x["index"], x["reason"]) for x in got["rejected"]] == expected
        stored += got["stored"]
    assert stored == len(good) == store_from(limited).count_trajectories()

    # The decodable ones, as records of a JSON array, are rejected one by one too.
    objects = [line for line in lines if isinstance(_decoded(line), dict)][:999]
    body = b"[" + b",".join([*objects, encode(record(10_000))]) + b"]"
    r = api.post("/v1/trajectories", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 200, r.text[:300]
    assert r.json()["stored"] == 1 and len(r.json()["rejected"]) == len(objects) > 300


def _reason(line: bytes, settings: Settings) -> str:
    try:
        parse_line(line, settings)
    except RecordError as err:
        return str(err)
    raise AssertionError(f"a generator made a valid line: {line[:100]!r}")


def _decoded(line: bytes) -> Any:
    try:
        return loads(line)
    except RecordError:
        return None


def test_flowmem_api_serves_over_http_and_never_logs_the_token(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "FLOWMEM_DB": str(tmp_path / "db"),
        "FLOWMEM_API_TOKEN": TOKEN,
        "LANCEDB_LOG": "error",
        "PYTHONIOENCODING": "utf-8",
    }
    log = tmp_path / "api.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "flowmem.cli", "api", "--port", str(port), "--access-log"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + READY_LIMIT  # a bound: it waits while it starts
            while True:
                try:
                    if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            with httpx.Client(base_url=base, timeout=READY_LIMIT) as http:  # a loaded machine is slow
                assert "Swagger UI" in http.get("/docs").text
                r = http.post("/v1/trajectories", json=[record(1)], headers=AUTH)
                assert r.json()["stored"] == 1
                assert http.post("/v1/trajectories", json=[record(2)]).status_code == 401
                bad = http.post("/v1/trajectories", json=[], headers={"Authorization": "Bearer guess"})
            assert bad.status_code == 401 and "guess" not in bad.text
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text(encoding="utf-8")
    assert "POST /v1/trajectories" in text and TOKEN not in text and "guess" not in text
    assert store_from(Settings(db=str(tmp_path / "db"))).count_trajectories() == 1


def _local_assets(html: str) -> list[str]:
    """Every URL a docs page loads (scripts, styles, icons, the spec); none may leave the server."""
    found = re.findall(
        r"""(?:src|href)=["']([^"']+)["']|url:\s*["']([^"']+)["']|spec-url=["']([^"']+)["']""", html
    )
    urls = [u for groups in found for u in groups if u]
    outside = [u for u in urls if re.match(r"(https?:)?//", u) and not u.startswith("http://127.0.0.1")]
    assert not outside, outside
    return urls


def test_docs_pages_load_every_asset_from_the_server(settings: Settings) -> None:
    api = client(settings)
    for page, needed in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        r = api.get(page)
        assert r.status_code == 200 and "cdn." not in r.text and "fonts.googleapis" not in r.text
        urls = _local_assets(r.text)
        assert any(u.endswith(needed) for u in urls) and "/openapi.json" in urls
        for url in urls:
            got = api.get(url)
            assert got.status_code == 200, url
            if url.endswith(".js"):
                assert len(got.content) > 100_000  # the real bundle, not a stub
    assert '"validatorUrl": null' in api.get("/docs").text  # nothing sends the spec away


def _two_versions(settings: Settings) -> Any:
    store = store_from(settings)
    store.commit_run(InductionRun(id="r1"), [make_workflow(version=1)])
    store.commit_run(InductionRun(id="r2"), [make_workflow(version=2, steps=3, pitfalls=["check the date"])])
    return store


def test_history_diff_and_runs(settings: Settings) -> None:
    _two_versions(settings)
    api = client(settings)
    h = api.get("/v1/workflows/forward_latest/history").json()
    assert [(v["version"], v["parent_version"], v["status"]) for v in h["versions"]] == [
        (1, None, "candidate"),
        (2, 1, "candidate"),
    ]
    assert h["versions"][1]["provenance"]["inducer"] == "manual" and h["transitions"] == []
    assert h["versions"][0]["content_hash"] != h["versions"][1]["content_hash"]
    assert api.get("/v1/workflows/nope/history").status_code == 404

    d = api.get("/v1/workflows/forward_latest/diff", params={"old": 1, "new": 2}).json()
    assert (d["old_version"], d["new_version"], d["unchanged"]) == (1, 2, False)
    assert [(s["op"], s["new"]["action"]) for s in d["steps"] if s["op"] != "equal"] == [
        ("added", "mail.forward")
    ]
    assert "pitfalls" in {f["field"] for f in d["fields"]}
    same = api.get("/v1/workflows/forward_latest/diff", params={"old": 2, "new": 2}).json()
    assert same["unchanged"] is True
    assert api.get("/v1/workflows/forward_latest/diff", params={"old": 1, "new": 9}).status_code == 404
    assert api.get("/v1/workflows/forward_latest/diff", params={"old": 1}).status_code == 422

    runs = api.get("/v1/induction/runs").json()
    assert [(r["id"], r["kind"], r["tag"], r["retired"]) for r in runs] == [
        ("r1", "induce", "r1", []),
        ("r2", "induce", "r2", []),
    ]
    assert "state" not in runs[0] and runs[1]["base_version"] is not None


def test_rollback_through_the_api(settings: Settings) -> None:
    _two_versions(settings)
    api = client(settings)
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        assert api.post("/v1/induction/runs/r2/rollback", headers=headers).status_code == 401
    assert TestClient(create_app(settings)).post("/v1/induction/runs/r2/rollback").status_code == 403
    assert [w["version"] for w in api.get("/v1/workflows").json()] == [2]  # nothing rolled back

    r = api.post("/v1/induction/runs/r2/rollback", json={"note": "bad pitfalls"}, headers=AUTH)
    assert r.status_code == 200
    undo = r.json()
    assert (undo["kind"], undo["rolled_back_run"], undo["note"]) == ("rollback", "r2", "bad pitfalls")
    assert undo["id"].startswith("rollback") and undo["tag"] == undo["id"]
    assert [w["version"] for w in api.get("/v1/workflows").json()] == [1]
    assert [x["id"] for x in api.get("/v1/induction/runs").json()] == ["r1", "r2", undo["id"]]
    again = api.post("/v1/induction/runs/r2/rollback", headers=AUTH)
    assert again.status_code == 409 and "already rolled back" in again.json()["detail"]
    assert api.post("/v1/induction/runs/nope/rollback", headers=AUTH).status_code == 404


def test_status_changes_are_logged_with_who_and_why(settings: Settings) -> None:
    _two_versions(settings)
    api = client(settings)
    url = "/v1/workflows/forward_latest/status"
    assert api.post(url, json={"action": "promote", "why": "x"}).status_code == 401
    assert (
        TestClient(create_app(settings)).post(url, json={"action": "promote", "why": "x"}).status_code == 403
    )
    for bad in ({"action": "promote"}, {"action": "promote", "why": "  "}, {"action": "bless", "why": "x"}):
        assert api.post(url, json=bad, headers=AUTH).status_code == 422, bad

    r = api.post(url, json={"action": "promote", "why": "reviewed", "version": 1}, headers=AUTH).json()
    assert [(t["version"], t["old"], t["new"]) for t in r["transitions"]] == [(1, "candidate", "active")]
    assert r["transitions"][0]["reason"] == "reviewed (by api)"
    r = api.post(url, json={"action": "promote", "why": "better", "by": "ana"}, headers=AUTH).json()
    assert [(t["version"], t["new"]) for t in r["transitions"]] == [(2, "active"), (1, "deprecated")]
    assert api.post(url, json={"action": "promote", "why": "again"}, headers=AUTH).json()["transitions"] == []

    retired = api.post(url, json={"action": "retire", "why": "obsolete", "by": "ana"}, headers=AUTH).json()
    assert [(t["version"], t["new"]) for t in retired["transitions"]] == [(2, "retired")]
    assert api.get("/v1/workflows/search", params={"task": FORWARD}).json() == []  # never served
    assert [w["id"] for w in api.get("/v1/workflows", params={"status": "retired"}).json()] == [
        "forward_latest"
    ]
    log = api.get("/v1/workflows/forward_latest/history").json()["transitions"]
    assert [(t["version"], t["new"], t["cause"], t["reason"]) for t in log] == [
        (1, "active", "manual", "reviewed (by api)"),
        (1, "deprecated", "manual", "superseded by v2: better (by ana)"),  # one commit: by version
        (2, "active", "manual", "better (by ana)"),
        (2, "retired", "manual", "obsolete (by ana)"),
    ]
    assert all(t["at"] for t in log)
    missing = api.post(url, json={"action": "retire", "why": "x", "version": 9}, headers=AUTH)
    assert missing.status_code == 404
    assert (
        api.post("/v1/workflows/nope/status", json={"action": "retire", "why": "x"}, headers=AUTH).status_code
        == 404
    )


def test_induction_on_demand_one_at_a_time(settings: Settings) -> None:
    store = store_from(settings)
    store_trajectories(store, [forward(i) for i in range(8)] + [cancel(i) for i in range(8)], settings.scrub)
    api = client(settings)
    assert api.post("/v1/induction/runs").status_code == 401
    assert TestClient(create_app(settings)).post("/v1/induction/runs").status_code == 403
    assert (
        api.post("/v1/induction/runs", json={"inducer": "llm"}, headers=AUTH).status_code == 400
    )  # no model

    r = api.post("/v1/induction/runs", headers=AUTH)
    assert r.status_code == 200
    s = r.json()
    assert (s["inducer"], s["skipped"], s["trajectories"], s["new_workflows"]) == ("rule", False, 16, 2)
    assert [x["id"] for x in api.get("/v1/induction/runs").json()] == [s["run"]]
    hits = api.get("/v1/workflows/search", params={"task": FORWARD}).json()
    assert hits and hits[0]["steps"][-1]["action"] == "mail.forward"  # served at once
    nothing = api.post("/v1/induction/runs", json={}, headers=AUTH).json()
    assert nothing["skipped"] is True and nothing["run"] is None

    # A second one while one runs is refused, not queued.
    svc = Service(with_(settings, api_token=TOKEN))
    busy = TestClient(create_app(svc.settings, service=svc))
    started, release = threading.Event(), threading.Event()
    real = svc.store.list_runs

    def slow_list_runs(**kw: Any) -> Any:
        started.set()
        release.wait(READY_LIMIT)
        return real(**kw)

    svc.store.list_runs = slow_list_runs  # type: ignore[method-assign]
    first: dict[str, int] = {}
    worker = threading.Thread(
        target=lambda: first.__setitem__("status", busy.post("/v1/induction/runs", headers=AUTH).status_code)
    )
    worker.start()
    assert started.wait(READY_LIMIT)
    refused = busy.post("/v1/induction/runs", json={"all": True}, headers=AUTH)
    assert refused.status_code == 409 and "already running" in refused.json()["detail"]
    release.set()
    worker.join(READY_LIMIT)
    svc.store.list_runs = real  # type: ignore[method-assign]
    assert first["status"] == 200
    assert busy.post("/v1/induction/runs", json={"all": True}, headers=AUTH).json()["skipped"] is False


def test_an_id_sent_again_with_other_content_is_a_409(settings: Settings) -> None:
    api = client(settings)
    assert api.post("/v1/trajectories", json=[record(1), record(2)], headers=AUTH).json()["stored"] == 2
    stored_hash = store_from(settings).get_trajectory("api-1").content_hash()
    # The same content again — with an outcome reported since — is a plain duplicate.
    api.post("/v1/runs/api-1/outcome", json={"success": True}, headers=AUTH)
    same = api.post("/v1/trajectories", json=[record(1)], headers=AUTH)
    assert same.status_code == 200 and same.json()["conflicts"] == [] and same.json()["duplicates"] == 1

    changed = record(1, task="Forward the budget email to olga")
    r = api.post("/v1/trajectories", json=[record(3), changed, record(2)], headers=AUTH)
    assert r.status_code == 409
    body = r.json()
    assert (body["stored"], body["duplicates"]) == (1, 1)  # the others are handled as usual
    [conflict] = body["conflicts"]
    assert (conflict["index"], conflict["id"], conflict["stored_hash"]) == (1, "api-1", stored_hash)
    assert conflict["sent_hash"] != stored_hash
    kept = store_from(settings).get_trajectory("api-1")
    assert kept.task == record(1)["task"] and kept.content_hash() == stored_hash  # never overwritten

    # Two different contents under one new id in one batch: the first is stored, the second is a conflict.
    twice = api.post("/v1/trajectories", json=[record(7), record(7, task="Cancel the offsite")], headers=AUTH)
    assert twice.status_code == 409 and twice.json()["stored"] == 1
    assert [c["index"] for c in twice.json()["conflicts"]] == [1]
    # JSON Lines too.
    nd = api.post(
        "/v1/trajectories",
        content=encode(changed),
        headers={**AUTH, "Content-Type": "application/x-ndjson"},
    )
    assert nd.status_code == 409 and nd.json()["conflicts"][0]["stored_hash"] == stored_hash


def test_a_batch_of_only_rejected_records_is_a_422(settings: Settings) -> None:
    api = client(settings)
    r = api.post("/v1/trajectories", json=[{"task": 5}, "nope"], headers=AUTH)
    assert r.status_code == 422 and r.json()["stored"] == 0 and len(r.json()["rejected"]) == 2
    assert api.post("/v1/trajectories", json=[], headers=AUTH).status_code == 200  # nothing to reject
