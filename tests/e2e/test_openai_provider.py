"""A declared agent on provider "openai" against the fake OpenAI-compatible server."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agentkeel.server import create_app
from e2e import serve_in_thread, stream_turn, text_of
from fakes.openai_server import FakeOpenAI, echo_responder, openai_error

pytestmark = pytest.mark.anyio
KEY = "sk-e2e-very-secret-value"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key=KEY, responder=echo_responder)
    with fake.serve():
        yield fake


def framework(base_url: str) -> dict[str, object]:
    return {
        "agents": {
            "gpt": {
                "description": "Talks to an OpenAI-compatible server",
                "model": {
                    "provider": "openai",
                    "model": "gpt-e2e",
                    "baseUrl": base_url,
                    "apiKeyEnv": "E2E_OPENAI_KEY",
                    "maxRetries": 0,
                },
                "systemPrompt": "Be brief.",
            }
        },
        "server": {"heartbeatSeconds": 1},
    }


async def test_openai_agent_streams_and_remembers(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("E2E_OPENAI_KEY", KEY)
    app = create_app(framework(fake_openai.base_url))
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            frames = await stream_turn(client, "gpt", {"message": "hello"})
            context_id = frames[-1].data["contextId"]
            second = await client.post(
                "/agents/gpt/send", json={"message": "again", "contextId": context_id}
            )
            other = await client.post("/agents/gpt/send", json={"message": "elsewhere"})
            agents = await client.get("/agents")
    assert frames[-1].data["status"] == "completed"
    assert frames[-1].data["text"] == "echo: hello" == text_of(frames)
    assert all(frame.data["contextId"] == context_id for frame in frames)
    assert second.json()["text"] == "echo: again"
    assert other.json()["text"] == "echo: elsewhere"
    requests = fake_openai.requests
    assert [r.headers["authorization"] for r in requests] == [f"Bearer {KEY}"] * 3
    messages = requests[1].json["messages"]
    assert isinstance(messages, list)
    assert [m["content"] for m in messages if isinstance(m, dict)] == [
        "Be brief.",
        "hello",
        "echo: hello",
        "again",
    ]
    assert len(requests[2].json["messages"]) == 2  # type: ignore[arg-type]
    assert KEY not in agents.text and "E2E_OPENAI_KEY" not in agents.text


async def test_provider_failures_reach_the_client_without_secrets(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-wrong-secret-do-not-leak"
    monkeypatch.setenv("E2E_OPENAI_KEY", wrong)
    app = create_app(framework(fake_openai.base_url))
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with client.stream("POST", "/agents/gpt/stream", json={"message": "hi"}) as r:
                raw = (await r.aread()).decode()
            sent = await client.post("/agents/gpt/send", json={"message": "hi"})
    assert '"type":"error","code":"model_auth_failed"' in raw
    assert sent.json()["status"] == "failed"
    assert sent.json()["error"]["code"] == "model_auth_failed"
    assert wrong not in raw and wrong not in sent.text


async def test_a_provider_error_body_never_reaches_the_wire(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    body = f"internal failure at db-7.internal:5432 (key {KEY})"
    failure = openai_error(500, body, type="server_error", headers={"Retry-After": "3"})
    fake_openai.enqueue(failure, failure)
    monkeypatch.setenv("E2E_OPENAI_KEY", KEY)
    app = create_app(framework(fake_openai.base_url))
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with client.stream("POST", "/agents/gpt/stream", json={"message": "hi"}) as r:
                raw = (await r.aread()).decode()
            sent = await client.post("/agents/gpt/send", json={"message": "hi"})
    ours = "openai answered HTTP 500: it failed on its side; try again in 3 s"
    assert sent.json()["error"] == {"code": "model_unavailable", "message": ours}
    assert f'"type":"error","code":"model_unavailable","message":"{ours}"' in raw
    for wire in (raw, sent.text):
        assert "db-7" not in wire and "internal failure" not in wire and KEY not in wire
    logged = [r.getMessage() for r in caplog.records if "db-7.internal:5432" in r.getMessage()]
    assert len(logged) == 2 and all(KEY not in line for line in logged)
