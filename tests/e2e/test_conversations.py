"""The conversation endpoints of SPEC 3 against a real server: list, summary, transcript, fork.

Edit and regenerate through the turn body are checked against the requests a fake
OpenAI-compatible provider receives (`test_conversation_edits`).
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from agentkeel.framework import ServerSettings
from agentkeel.keys import SessionKey
from agentkeel.messages import MESSAGE_ID_PATTERN
from agentkeel.storage import InMemoryStorage
from e2e import ServerProcess, write_framework
from e2e.conftest import StartServer

pytestmark = pytest.mark.anyio
BASE = "/agents/scripted"
SEND = BASE + "/send"
SETTINGS = ServerSettings(heartbeat_seconds=1.0, shutdown_timeout_seconds=5)


async def send(client: httpx.AsyncClient, message: str, context_id: str | None = None) -> str:
    body: dict[str, object] = {"message": message}
    if context_id is not None:
        body["contextId"] = context_id
    response = await client.post(SEND, json=body)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "completed"
    return str(response.json()["contextId"])


async def transcript(client: httpx.AsyncClient, context_id: str) -> list[dict[str, object]]:
    response = await client.get(f"{BASE}/contexts/{context_id}/messages")
    assert response.status_code == 200, response.text
    messages: list[dict[str, object]] = response.json()["messages"]
    return messages


def code_of(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, str(response.json()["error"]["code"])


async def test_the_transcript_is_a_view_of_the_committed_turns(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=20) as client:
        context_id = await send(client, "hello there")
        await send(client, "secret", context_id)
        messages = await transcript(client, context_id)
        summary = (await client.get(f"{BASE}/contexts/{context_id}")).json()
    assert [(m["role"], m["text"]) for m in messages] == [
        ("user", "hello there"),
        ("assistant", "echo: hello there"),
        ("user", "secret"),
        ("assistant", ""),  # the tool call; its input and output stay on the server
        ("assistant", "tools said lookup success"),
    ]
    assert [m["toolCalls"] for m in messages] == [[], [], [], ["lookup"], []]
    runs = [m["runId"] for m in messages]  # the run that wrote each message
    assert runs[0] == runs[1] != runs[2] == runs[3] == runs[4]
    assert all(re.fullmatch(r"run-[0-9a-f]{24}", str(run)) for run in runs)
    assert all(MESSAGE_ID_PATTERN.fullmatch(str(m["id"])) for m in messages)
    assert len({m["id"] for m in messages}) == 5
    assert "SECRET" not in str(messages)
    assert summary["contextId"] == context_id
    assert summary["title"] == "hello there"
    assert summary["messageCount"] == 5
    assert summary["status"] == "idle" and "interrupt" not in summary
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", summary["createdAt"])


async def test_pages_and_the_context_list(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=20) as client:
        first = await send(client, "one " + "x" * 100)
        for word in ("two", "three"):
            await send(client, word, first)
        second = await send(client, "other")
        page = (await client.get(f"{BASE}/contexts/{first}/messages", params={"limit": 4})).json()
        after = page["messages"][-1]["id"]
        rest = await client.get(f"{BASE}/contexts/{first}/messages", params={"after": after})
        listed = (await client.get(f"{BASE}/contexts")).json()
        small = (await client.get(f"{BASE}/contexts", params={"limit": 1})).json()
        more = await client.get(f"{BASE}/contexts", params={"cursor": small["nextCursor"]})
        errors = [
            await client.get(f"{BASE}/contexts", params={"limit": 0}),
            await client.get(f"{BASE}/contexts", params={"limit": 201}),
            await client.get(f"{BASE}/contexts", params={"cursor": "nonsense"}),
            await client.get(f"{BASE}/contexts/{first}/messages", params={"limit": 501}),
            await client.get(f"{BASE}/contexts/{first}/messages", params={"after": "x"}),
        ]
        unknown_message = await client.get(
            f"{BASE}/contexts/{first}/messages", params={"after": "msg-" + "0" * 23 + "9"}
        )
        unknown = [
            await client.get(f"{BASE}/contexts/ctx-nobody"),
            await client.get(f"{BASE}/contexts/ctx-nobody/messages"),
            await client.post(f"{BASE}/contexts/ctx-nobody/fork", json={}),
        ]
    assert len(page["messages"]) == 4 and page["nextCursor"] is not None
    assert rest.status_code == 200
    assert [m["text"] for m in rest.json()["messages"]] == ["three", "echo: three"]
    assert rest.json()["nextCursor"] is None
    assert [c["contextId"] for c in listed["contexts"]] == [second, first]
    assert listed["nextCursor"] is None
    assert listed["contexts"][1]["title"] == ("one " + "x" * 100)[:80]
    assert listed["contexts"][1]["messageCount"] == 6
    assert [c["contextId"] for c in small["contexts"]] == [second]
    assert [c["contextId"] for c in more.json()["contexts"]] == [first]
    assert [code_of(r) for r in errors] == [(400, "invalid_request")] * 5
    assert code_of(unknown_message) == (404, "message_not_found")
    assert [code_of(r) for r in unknown] == [(404, "context_not_found")] * 3


async def test_fork_copies_history_and_state(start_server: StartServer) -> None:
    storage = InMemoryStorage()
    with start_server(storage=storage) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            source = await send(client, "first")
            await send(client, "second", source)
            key = SessionKey(definition="scripted", context_id=source)
            await storage.append(key, [], {"remembered": "tea"})
            messages = await transcript(client, source)
            fork_url = f"{BASE}/contexts/{source}/fork"
            forked = await client.post(fork_url, json={"messageId": messages[1]["id"]})
            named = await client.post(fork_url, json={"contextId": "ctx-named"})
            taken = await client.post(fork_url, json={"contextId": "ctx-named"})
            missing = await client.post(fork_url, json={"messageId": "msg-" + "a" * 24})
            bad = await client.post(fork_url, json={"messageId": 3})
            copy = str(forked.json()["contextId"])
            copied = await transcript(client, copy)
            answer = await client.post(SEND, json={"message": "history", "contextId": copy})
            whole = await transcript(client, "ctx-named")
            unchanged = await transcript(client, source)
    assert forked.status_code == 201 and copy != source
    assert [m["id"] for m in copied[:2]] == [m["id"] for m in messages[:2]]
    assert answer.json()["text"] == "first|history"  # the fork goes on from the copy
    assert [m["text"] for m in whole] == [m["text"] for m in messages]
    assert named.status_code == 201 and named.json() == {"contextId": "ctx-named"}
    assert code_of(taken) == (409, "context_exists")
    assert code_of(missing) == (404, "message_not_found")
    assert code_of(bad) == (400, "invalid_request")
    assert unchanged == messages
    state = await storage.load(SessionKey(definition="scripted", context_id=copy))
    assert state is not None and state.state == {"remembered": "tea"}


async def test_ids_survive_eviction(start_server: StartServer) -> None:
    with start_server(max_contexts=1) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            first = await send(client, "one")
            before = await transcript(client, first)
            await send(client, "elsewhere")  # evicts the first context's Agent
            after = await transcript(client, first)
            await send(client, "two", first)  # restored from storage
            later = await transcript(client, first)
    assert after == before
    assert later[:2] == before and len(later) == 4


async def test_transcript_off(start_server: StartServer) -> None:
    settings = ServerSettings(heartbeat_seconds=1.0, shutdown_timeout_seconds=5, transcript=False)
    with start_server(settings=settings) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            context_id = await send(client, "private words")
            messages = await client.get(f"{BASE}/contexts/{context_id}/messages")
            summary = (await client.get(f"{BASE}/contexts/{context_id}")).json()
            listed = (await client.get(f"{BASE}/contexts")).json()
    assert code_of(messages) == (404, "not_found")
    assert summary["title"] == "" and summary["messageCount"] == 2
    assert listed["contexts"][0]["title"] == ""
    assert "private" not in str(summary) + str(listed)


async def test_the_transcript_survives_a_restart(tmp_path: Path, tool_log: Path) -> None:
    del tool_log
    document: dict[str, object] = {
        "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
        "sessionDir": "./sessions",
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 5},
    }
    server = ServerProcess(write_framework(tmp_path, document))
    try:
        url = server.start()
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            context_id = await send(client, "remember me")
            before = await transcript(client, context_id)
        server.stop()
        url = server.start()
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            after = await transcript(client, context_id)
            listed = (await client.get(f"{BASE}/contexts")).json()
    finally:
        server.stop()
    assert after == before and len(after) == 2
    assert [c["contextId"] for c in listed["contexts"]] == [context_id]
