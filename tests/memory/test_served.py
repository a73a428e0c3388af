"""Memory across conversations on a served agent: recall in a new conversation, after a
real restart, and isolation between principals on every memory endpoint and in recall."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentkeel.server import create_app
from e2e import ServerProcess, serve_in_thread, write_framework

pytestmark = pytest.mark.anyio

TOOLS = [
    "agentkeel.tools:remember",
    "agentkeel.tools:recall",
    "agentkeel.tools:forget",
    "agentkeel.tools:read_state",
    "agentkeel.tools:write_state",
]
ASSISTANT = {"model": {"provider": "demo"}, "tools": TOOLS}
TELL = "Remember for next time that my favourite colour is blue"
ASK = "What is my favourite colour?"
ALICE, BOB = {"X-API-Key": "alice-key-0123456789"}, {"X-API-Key": "bob-key-9876543210"}


def framework(**memory: object) -> dict[str, object]:
    return {
        "agents": {"assistant": ASSISTANT},
        "sessionDir": "./sessions",
        "memory": {"store": "file", "embeddings": "offline", **memory},
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 5},
    }


def send(
    url: str, message: str, headers: dict[str, str] | None = None, **extra: object
) -> dict[str, object]:
    response = httpx.post(
        f"{url}/agents/assistant/send",
        json={"message": message, **extra},
        headers=headers,
        timeout=60,
    )
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


@pytest.fixture
def process(tmp_path: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(write_framework(tmp_path, framework()))
    try:
        yield server
    finally:
        server.stop()


def test_recall_in_a_new_conversation_and_after_a_restart(
    process: ServerProcess, tmp_path: Path
) -> None:
    url = process.start()
    told = send(url, TELL)
    assert told["toolCalls"] == ["remember"], told
    again = send(url, ASK)  # no contextId: a new conversation
    assert again["contextId"] != told["contextId"]
    assert again["toolCalls"] == ["recall"]
    assert "blue" in str(again["text"]), again

    process.stop()
    url = process.start()
    after = send(url, ASK)
    assert after["toolCalls"] == ["recall"] and "blue" in str(after["text"]), after
    listed = httpx.get(f"{url}/agents/assistant/memory").json()
    assert [i["key"] for i in listed["items"]] == ["favourite colour"]
    assert listed["items"][0]["source"]["contextId"] == told["contextId"]
    assert "vector" not in listed["items"][0]
    assert list((tmp_path / "sessions" / ".memory").rglob("memory.jsonl")), "not under sessionDir"


@pytest.fixture
def authed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    monkeypatch.setenv("ALICE_KEY", ALICE["X-API-Key"])
    monkeypatch.setenv("BOB_KEY", BOB["X-API-Key"])
    document = framework()
    document["sessionDir"] = str(tmp_path / "sessions")
    document["server"] = {
        "auth": {"apiKeys": {"alice": {"env": "ALICE_KEY"}, "bob": {"env": "BOB_KEY"}}},
        "heartbeatSeconds": 1,
    }
    with serve_in_thread(create_app(document)) as url:
        yield url


def test_principals_never_share_memory(authed: str) -> None:
    url = authed
    memory = f"{url}/agents/assistant/memory"
    assert send(url, TELL, ALICE)["toolCalls"] == ["remember"]

    bob_asks = send(url, ASK, BOB)
    assert bob_asks["toolCalls"] == ["recall"] and "blue" not in str(bob_asks["text"])
    assert httpx.get(memory, headers=BOB).json() == {"items": [], "nextCursor": None}
    assert httpx.get(memory, params={"q": "colour"}, headers=BOB).json()["items"] == []
    refused = httpx.delete(f"{memory}/favourite colour", headers=BOB)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "memory_not_found"
    assert httpx.delete(memory, headers=BOB).json() == {"deleted": 0}
    assert httpx.get(memory).status_code == 401

    found = httpx.get(memory, params={"q": "which colour do I like"}, headers=ALICE).json()
    assert found["items"][0]["key"] == "favourite colour" and found["items"][0]["score"] > 0.3
    assert httpx.delete(f"{memory}/favourite colour", headers=ALICE).status_code == 204
    assert httpx.get(memory, headers=ALICE).json()["items"] == []
    send(url, TELL, ALICE)
    assert httpx.delete(memory, headers=ALICE).json() == {"deleted": 1}
    forgotten = send(url, ASK, ALICE)
    assert "blue" not in str(forgotten["text"]), forgotten


def test_memory_endpoints_answer_json_errors(authed: str) -> None:
    url = authed
    unknown = httpx.get(f"{url}/agents/nobody/memory", headers=ALICE)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "agent_not_found"
    bad = httpx.get(f"{url}/agents/assistant/memory", params={"limit": "0"}, headers=ALICE)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_memory_key"
    cursor = httpx.get(f"{url}/agents/assistant/memory", params={"cursor": "x"}, headers=ALICE)
    assert cursor.status_code == 400 and cursor.json()["error"]["code"] == "invalid_memory_key"


def test_memory_off_when_not_configured(tmp_path: Path) -> None:
    document = {"agents": {"assistant": ASSISTANT}}
    with serve_in_thread(create_app(document)) as url:
        response = httpx.get(f"{url}/agents/assistant/memory")
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "memory_not_configured"
        result = send(url, TELL)
        assert result["toolCalls"] == ["remember"]
        assert "could not" in str(result["text"]) or "no memory" in str(result["text"])


def test_python_client_lists_searches_and_forgets(authed: str) -> None:
    from agentkeel.client import AgentClient, ServerError

    with AgentClient(authed, agent="assistant", api_key=ALICE["X-API-Key"]) as client:
        client.send(TELL)
        page = client.memory()
        assert [i.key for i in page.items] == ["favourite colour"] and page.next_cursor is None
        assert page.items[0].context_id == client.context_id
        matches = client.memory("what colour do I like")
        assert matches.items[0].score is not None and matches.items[0].score > 0.3
        assert client.forget_memory("favourite colour") == 1
        with pytest.raises(ServerError) as caught:
            client.forget_memory("favourite colour")
        assert caught.value.code == "memory_not_found"
        client.send(TELL)
        assert client.forget_memory() == 1
        assert client.memory().items == ()
