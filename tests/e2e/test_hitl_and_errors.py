"""Human-in-the-loop over the wire, and every error code with its status."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agentkeel.framework import ServerSettings
from agentkeel.storage.memory import InMemoryStorage
from e2e import stream_turn, tool_runs
from e2e.conftest import StartServer

pytestmark = pytest.mark.anyio


async def test_approval_resume_continues_the_same_run_and_frame_ids(
    server_url: str, tool_log: Path
) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        first = await stream_turn(client, "scripted", {"message": "delete a.txt"})
        interrupt = [f.event for f in first if not f.done and f.event["type"] == "interrupt"]
        done = first[-1].data
        assert done["status"] == "suspended" and done["toolCalls"] == []
        assert done["interrupt"] == {
            "id": interrupt[0]["id"],
            "kind": "approval",
            "tool": "delete_file",
            "prompt": interrupt[0]["prompt"],
        }
        assert tool_runs(tool_log) == []
        context_id = done["contextId"]
        resume = {"interruptId": interrupt[0]["id"], "decision": {"approved": True}}
        second = await stream_turn(client, "scripted", {"contextId": context_id, "resume": resume})
        replayed = await client.post(
            "/agents/scripted/send", json={"contextId": context_id, "resume": resume}
        )
    assert second[0].id == first[-1].id + 1
    assert {f.data["runId"] for f in second} == {done["runId"]}
    assert second[-1].data["status"] == "completed"
    assert second[-1].data["toolCalls"] == ["delete_file"]
    assert tool_runs(tool_log) == ["delete_file a.txt"]
    assert replayed.status_code == 404
    assert replayed.json()["error"]["code"] == "interrupt_not_found"


async def test_rejection_and_cancellation(server_url: str, tool_log: Path) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:

        async def suspend(context_id: str) -> str:
            body = {"message": "delete b.txt", "contextId": context_id}
            result = (await client.post("/agents/scripted/send", json=body)).json()
            assert result["status"] == "suspended"
            return str(result["interrupt"]["id"])

        rejected_id = await suspend("ctx-reject")
        rejected = await client.post(
            "/agents/scripted/send",
            json={
                "contextId": "ctx-reject",
                "resume": {
                    "interruptId": rejected_id,
                    "decision": {"approved": False, "reason": "keep it"},
                },
            },
        )
        cancelled_id = await suspend("ctx-cancel")
        cancelled = await client.post(
            "/agents/scripted/send",
            json={
                "contextId": "ctx-cancel",
                "resume": {"interruptId": cancelled_id, "cancel": True},
            },
        )
        after = await client.post(
            "/agents/scripted/send", json={"message": "history", "contextId": "ctx-cancel"}
        )
    assert rejected.json()["status"] == "completed"
    assert rejected.json()["toolCalls"] == []
    assert rejected.json()["text"] == "tools said delete_file error"
    assert cancelled.json()["status"] == "cancelled"
    assert after.json()["status"] == "completed"
    assert tool_runs(tool_log) == []


async def error_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"}
    assert {"code", "message"} <= set(body["error"])
    assert "Traceback" not in response.text
    return response.status_code, str(body["error"]["code"])


async def test_every_error_code(start_server: StartServer) -> None:
    storage = InMemoryStorage()
    settings = ServerSettings(max_body_bytes=2048, heartbeat_seconds=1.0)
    with start_server(storage=storage, settings=settings) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            post = client.post
            send = "/agents/scripted/send"
            cases = [
                (await post(send, content=b'{"message": "x"'), (400, "invalid_json")),
                (await post(send, content=b"\xff\xfe"), (400, "invalid_json")),
                (await post(send, content=b""), (400, "invalid_request")),
                (await post(send, json=["message"]), (400, "invalid_request")),
                (await post(send, json={"message": "x", "extra": 1}), (400, "invalid_request")),
                (await post(send, json={}), (400, "invalid_request")),
                (
                    await post(send, json={"message": {"role": "agent", "parts": [{"text": "x"}]}}),
                    (400, "invalid_request"),
                ),
                (
                    await post(send, json={"message": "x", "contextId": "../etc"}),
                    (400, "invalid_context_id"),
                ),
                (
                    await post(send, json={"message": "x", "contextId": "a/b"}),
                    (400, "invalid_context_id"),
                ),
                (
                    await post(send, json={"message": "x", "contextId": 7}),
                    (400, "invalid_context_id"),
                ),
                (
                    await post("/agents/missing/send", json={"message": "x"}),
                    (404, "agent_not_found"),
                ),
                (
                    await client.delete("/agents/scripted/contexts/ctx-never"),
                    (404, "context_not_found"),
                ),
                (
                    await client.get("/agents/scripted/contexts/ctx-never/stream"),
                    (404, "context_not_found"),
                ),
                (await post(send, content=b"x" * 4096), (413, "payload_too_large")),
                (
                    await post(send, json={"message": "y" * 4000}),
                    (413, "payload_too_large"),
                ),
                (await client.get("/nowhere"), (404, "not_found")),
                (await client.put("/agents"), (405, "method_not_allowed")),
            ]
            for response, expected in cases:
                assert await error_of(response) == expected, response.text
            suspended = (
                await post(send, json={"message": "delete z", "contextId": "ctx-z"})
            ).json()
            interrupt_id = suspended["interrupt"]["id"]
            pending = await post(send, json={"message": "hello", "contextId": "ctx-z"})
            unknown = await post(
                send,
                json={"contextId": "ctx-z", "resume": {"interruptId": "int-nope", "decision": {}}},
            )
            bad_decision = await post(
                send,
                json={"contextId": "ctx-z", "resume": {"interruptId": interrupt_id, "decision": 1}},
            )
            no_context = await post(
                send, json={"resume": {"interruptId": interrupt_id, "decision": {"approved": True}}}
            )
            stream_error = await post(
                "/agents/scripted/stream", json={"message": "hello", "contextId": "ctx-z"}
            )
    assert await error_of(pending) == (409, "interrupt_pending")
    assert pending.json()["error"]["interruptId"] == interrupt_id
    assert interrupt_id in pending.json()["error"]["message"]
    assert await error_of(stream_error) == (409, "interrupt_pending")
    assert await error_of(unknown) == (404, "interrupt_not_found")
    assert await error_of(bad_decision) == (400, "invalid_request")
    assert await error_of(no_context) == (400, "invalid_request")


async def test_an_invalid_context_id_creates_nothing(start_server: StartServer) -> None:
    storage = InMemoryStorage()
    with start_server(storage=storage) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            response = await client.post(
                "/agents/scripted/send", json={"message": "x", "contextId": "-bad"}
            )
            metrics = (await client.get("/metrics")).text
    assert response.status_code == 400
    assert "agentkeel_cached_contexts 0" in metrics
    assert "agentkeel_runs_total" in metrics and 'status="completed"' not in metrics


async def test_delete_forgets_a_context(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        send = "/agents/scripted/send"
        await client.post(send, json={"message": "remember me", "contextId": "ctx-del"})
        deleted = await client.delete("/agents/scripted/contexts/ctx-del")
        replay = await client.get("/agents/scripted/contexts/ctx-del/stream")
        again = await client.delete("/agents/scripted/contexts/ctx-del")
        fresh = await client.post(send, json={"message": "history", "contextId": "ctx-del"})
    assert deleted.status_code == 204 and deleted.content == b""
    assert replay.status_code == 404 and again.status_code == 404
    assert fresh.json()["text"] == "history"
