"""End to end through the real openai client, on httpx.MockTransport: no network, no key."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from pydantic import SecretStr

from flowmem.induction.base import LLMError, Usage
from flowmem.induction.inducers.llm import LLMInducer
from flowmem.induction.inducers.validate import InducedSet
from flowmem.induction.plan.orchestrate import induce_cluster
from flowmem.providers.openai import (
    SYSTEM_PROMPT,
    LLMSetupError,
    OpenAIEmbedder,
    OpenAILLM,
    check_llm,
    llm_from_settings,
    model_problem,
)
from flowmem.settings import Settings
from tests.factories import induced_step as step
from tests.factories import induced_workflow as workflow
from tests.factories import make_cluster

Reply = httpx.Response | Callable[[httpx.Request], httpx.Response]


class Stub:
    """An OpenAI-compatible endpoint: answers requests from a queue and records them."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[httpx.Request] = []
        self.http = httpx.Client(transport=httpx.MockTransport(self.handle))
        # openai 3.x types http_client as an httpx2.Client but accepts a legacy httpx one at runtime.
        http: Any = self.http
        self.client = openai.OpenAI(api_key="test", base_url="http://stub.local/v1", http_client=http)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        return reply if isinstance(reply, httpx.Response) else reply(request)

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.http.close()


def chat(content: str | None, *, refusal: str | None = None, finish: str = "stop") -> httpx.Response:
    """A chat completion whose message carries `content`."""
    message = {"role": "assistant", "content": content, "refusal": refusal}
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    return httpx.Response(200, json=body)


def induced(*workflows: Any) -> httpx.Response:
    return chat(InducedSet(workflows=list(workflows)).model_dump_json())


def test_llm_inducer_end_to_end(stub: Stub) -> None:
    stub.replies.append(induced(workflow()))
    llm = OpenAILLM("gpt-test", client=stub.client, temperature=0.3)
    result = LLMInducer(llm).induce(make_cluster())
    [w] = result.workflows
    assert w.id == "emailer-c7" and w.placeholders == [
        "topic",
        "recipient_name",
        "email_id",
        "recipient_email",
    ]
    assert w.provenance.model == "gpt-test"
    [request] = stub.requests
    assert request.url == "http://stub.local/v1/chat/completions"
    [body] = stub.bodies()
    assert body["model"] == "gpt-test" and body["temperature"] == 0.3
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"] == SYSTEM_PROMPT and "<runs>" in body["messages"][1]["content"]
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "InducedSet"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert all(d["additionalProperties"] is False for d in schema["$defs"].values())
    usage = result.usage
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.tokens) == (1, 100, 20, 120)


def test_leak_then_clean_reply_gives_one_workflow_after_one_retry(stub: Stub) -> None:
    leaky = workflow(
        steps=[
            step("email.search_emails", query="budget", folder="inbox"),
            step("contacts.find", name="{recipient_name}"),
        ]
    )
    stub.replies += [induced(leaky), induced(workflow())]
    inducer = LLMInducer(OpenAILLM("gpt-test", client=stub.client))
    result = inducer.induce(make_cluster())
    [w] = result.workflows
    assert w.steps[0].args["query"] == "{topic}"
    usage = result.usage
    assert (usage.calls, usage.retries, len(usage.dropped)) == (2, 1, 0) and len(stub.requests) == 2
    assert usage.tokens == 2 * 120  # both calls' tokens
    assert "example-specific values ('budget')" in stub.bodies()[1]["messages"][1]["content"]


def test_reply_inventing_a_tool_twice_is_rejected(stub: Stub) -> None:
    invented = workflow(
        steps=[
            step("email.search_emails", query="{topic}", folder="inbox"),
            step("email.bulk_export", to="{x}"),
        ]
    )
    stub.replies += [induced(invented), induced(invented)]
    inducer = LLMInducer(OpenAILLM("gpt-test", client=stub.client))
    with pytest.raises(LLMError, match="no valid workflow after a retry") as raised:
        inducer.induce(make_cluster())
    usage = raised.value.usage
    assert (usage.retries, len(usage.dropped)) == (1, 1) and len(stub.requests) == 2
    assert usage.rejected == {"invented_tool": 2} and usage.tokens == 2 * 120


def test_unusable_replies_raise_llm_error_with_their_reason(stub: Stub) -> None:
    good = InducedSet(workflows=[workflow()]).model_dump_json()
    stub.replies += [
        chat(good[: len(good) // 2]),  # cut off, though the server said "stop"
        chat("Sure! Here are the workflows: " + good),
        chat('{"workflows": [{"name": "x", "steps": "none"}]}'),
        chat(good[:40], finish="length"),
        chat(None, finish="content_filter"),
    ]
    llm = OpenAILLM("gpt-test", client=stub.client, max_retries=0)
    reasons, usages = [], []
    for _ in range(5):
        with pytest.raises(LLMError) as raised:
            llm.parse("prompt", InducedSet)
        reasons.append(raised.value.reason)
        usages.append(raised.value.usage)
    assert reasons == ["truncated", "malformed", "schema", "truncated", "refusal"]
    assert len(stub.requests) == 5 and sum(u.calls for u in usages) == 5
    # The SDK hands over the response of a reply cut by its length or content filter only.
    assert [u.tokens for u in usages] == [0, 0, 0, 120, 120]


def test_a_malformed_first_reply_is_asked_for_again(stub: Stub) -> None:
    stub.replies += [chat("{'workflows': []}"), induced(workflow())]
    inducer = LLMInducer(OpenAILLM("gpt-test", client=stub.client, max_retries=0))
    result = inducer.induce(make_cluster())
    [w] = result.workflows
    assert w.name == "forward_latest_email" and result.usage.rejected == {"malformed": 1}
    follow_up = stub.bodies()[1]["messages"][1]["content"]
    assert "could not be used: gpt-test returned invalid JSON" in follow_up


def test_rate_limit_is_retried_by_the_client(stub: Stub) -> None:
    limited = httpx.Response(429, headers={"retry-after-ms": "1"}, json={"error": {"message": "slow down"}})
    stub.replies += [limited, induced(workflow())]
    llm = OpenAILLM("gpt-test", client=stub.client, max_retries=1)
    parsed = llm.parse("prompt", InducedSet)
    assert len(parsed.output.workflows) == 1 and parsed.usage.calls == 1  # one call, two requests
    assert len(stub.requests) == 2

    stub.replies += [limited, limited]
    with pytest.raises(openai.RateLimitError):
        llm.parse("prompt", InducedSet)
    assert len(stub.requests) == 4


def test_refusal_and_empty_replies_raise_a_clear_error(stub: Stub) -> None:
    stub.replies += [chat(None, refusal="I can't help with that"), chat(None)]
    llm = OpenAILLM("gpt-test", client=stub.client, max_retries=0)
    with pytest.raises(LLMError, match="refused: I can't help") as refused:
        llm.parse("prompt", InducedSet)
    with pytest.raises(LLMError, match="returned no InducedSet") as empty:
        llm.parse("prompt", InducedSet)
    assert (refused.value.reason, empty.value.reason) == ("refusal", "empty")
    assert refused.value.usage == empty.value.usage == Usage(calls=1, prompt_tokens=100, completion_tokens=20)


def test_a_failed_request_fails_the_cluster_with_the_calls_it_made(stub: Stub) -> None:
    limited = httpx.Response(429, headers={"retry-after-ms": "1"}, json={"error": {"message": "slow down"}})
    stub.replies += [induced(workflow(steps=[step("email.bulk_export", to="{x}")])), limited]
    inducer = LLMInducer(OpenAILLM("gpt-test", client=stub.client, max_retries=0))
    with pytest.raises(LLMError) as raised:
        inducer.induce(make_cluster())
    assert raised.value.reason == "unavailable" and isinstance(raised.value.__cause__, openai.RateLimitError)
    usage = raised.value.usage  # the answer, its retry, and the retry's failed request
    assert (usage.calls, usage.retries, usage.tokens, usage.rejected) == (2, 1, 120, {"invented_tool": 1})
    stub.replies.append(limited)
    outcome = induce_cluster(make_cluster(), inducer)
    assert outcome.error is not None and outcome.error.startswith("RateLimitError: Error code: 429")
    assert outcome.usage == Usage(calls=1)


VECTORS = {"alpha": [3.0, 4.0, 0.0], "beta": [0.0, 0.0, 2.0], "gamma": [1.0, 1.0, 1.0]}


def embeddings(request: httpx.Request) -> httpx.Response:
    """Vectors for the request's texts, listed in reverse order (the client must sort by index)."""
    texts = json.loads(request.content)["input"]
    data = [{"object": "embedding", "index": i, "embedding": VECTORS[t]} for i, t in enumerate(texts)]
    usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
    return httpx.Response(200, json={"object": "list", "data": data[::-1], "model": "emb", "usage": usage})


def test_embedder_batches_normalises_and_keeps_input_order(stub: Stub) -> None:
    stub.replies += [embeddings, embeddings]
    e = OpenAIEmbedder("emb", client=stub.client, batch_size=2)
    v = e.embed(["gamma", "alpha", "", "beta"])
    assert v.dtype == np.float32 and v.shape == (4, 3) and e.dim == 3 and e.name == "openai-emb"
    assert np.allclose(v[0], np.full(3, 1 / np.sqrt(3))) and np.allclose(v[1], [0.6, 0.8, 0.0])
    assert np.allclose(v[3], [0.0, 0.0, 1.0]) and not v[2].any()  # an empty text is not sent
    assert [b["input"] for b in stub.bodies()] == [["gamma", "alpha"], ["beta"]]
    assert all(b["model"] == "emb" and b["encoding_format"] == "float" for b in stub.bodies())
    assert e.embed([]).shape == (0, 3) and len(stub.requests) == 2


def test_embedder_learns_its_dim_with_one_probe_and_checks_sizes(stub: Stub) -> None:
    stub.replies.append(lambda r: httpx.Response(200, json=_vectors([[1.0, 0.0]])))
    assert OpenAIEmbedder("emb", client=stub.client).dim == 2 and len(stub.requests) == 1
    stub.replies.append(lambda r: httpx.Response(200, json=_vectors([[1.0, 0.0]])))
    with pytest.raises(ValueError, match="expected 3"):
        OpenAIEmbedder("emb", client=stub.client, dim=3).embed(["alpha"])


def _vectors(rows: list[list[float]]) -> dict[str, Any]:
    data = [{"object": "embedding", "index": i, "embedding": r} for i, r in enumerate(rows)]
    return {"object": "list", "data": data, "model": "emb", "usage": {"prompt_tokens": 1, "total_tokens": 1}}


def test_llm_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="FLOWMEM_LLM_MODEL"):
        llm_from_settings(Settings(llm_model=None))
    llm = llm_from_settings(
        Settings(llm_model="qwen", llm_base_url="http://127.0.0.1:9/v1", llm_temperature=0.5)
    )
    try:
        assert (llm.model, llm.temperature) == ("qwen", 0.5)
        assert str(llm.client.base_url) == "http://127.0.0.1:9/v1/" and llm.client.api_key == "not-needed"
    finally:
        llm.close()
    keyed = llm_from_settings(Settings(llm_model="gpt-test", llm_api_key=SecretStr("sk-secret")))
    try:
        assert keyed.client.api_key == "sk-secret"
    finally:
        keyed.close()


# -- the check before an LLM inducer's first call (issue 39) -------------------------------------


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "stub"}


def _error(status: int, message: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {"message": message, "type": "invalid_request_error"}})


@pytest.mark.parametrize(
    ("replies", "keyless", "expected"),
    [
        ([httpx.Response(200, json=_model("m"))], False, None),
        ([_error(401, "Incorrect API key provided")], False, "refused the API key (HTTP 401: Incorrect API"),
        (
            [_error(401, "Missing bearer")],
            True,
            "no API key: the LLM endpoint http://stub.local/v1 asks for one",
        ),
        ([_error(403, "not allowed")], False, "refused the API key (HTTP 403"),
        (
            [
                _error(404, "no such model"),
                httpx.Response(200, json={"object": "list", "data": [_model("a")]}),
            ],
            False,
            "does not serve model 'm' (FLOWMEM_LLM_MODEL): set it to one the endpoint serves (a)",
        ),
        # The model is listed though its description's route is missing: served.
        (
            [_error(404, "no route"), httpx.Response(200, json={"object": "list", "data": [_model("m")]})],
            False,
            None,
        ),
        ([_error(404, "no route"), _error(404, "no route")], False, None),  # cannot tell: the calls will
        ([_error(500, "internal")], False, None),
    ],
    ids=["served", "bad-key", "keyless", "forbidden", "unknown-model", "listed", "no-routes", "server-error"],
)
def test_the_check_names_what_the_endpoint_refuses(
    stub: Stub, replies: list[Reply], keyless: bool, expected: str | None
) -> None:
    stub.replies.extend(replies)
    found = model_problem(stub.client, "m", keyless=keyless, timeout=1)
    assert (found is None) if expected is None else (found is not None and expected in found), found
    assert [r.method for r in stub.requests] == ["GET"] * len(replies)  # one try each, no completion
    assert stub.requests[0].url.path == "/v1/models/m"


def test_the_check_says_no_api_key_for_openais_endpoint_without_a_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(
        LLMSetupError,
        match=r"^no API key for the LLM endpoint https://api.openai.com/v1: set FLOWMEM_LLM_API_KEY",
    ):
        check_llm(Settings(llm_model="gpt-4o-mini"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    with pytest.raises(LLMSetupError, match="does not answer"):  # a key: the endpoint is asked (offline here)
        check_llm(
            Settings(llm_model="gpt-4o-mini", llm_base_url="http://127.0.0.1:9/v1", llm_check_timeout=1)
        )
