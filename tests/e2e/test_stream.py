"""The native wire over real HTTP: frames, results, memory per context, reconnects."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import httpx
import pytest

from agentkeel.framework import Retention, ServerSettings
from e2e import (
    SECRET_INPUT,
    SECRET_OUTPUT,
    Frame,
    frames_of,
    reconnect,
    stream_turn,
    text_of,
    tool_runs,
)
from e2e.conftest import StartServer

pytestmark = pytest.mark.anyio
CONTEXT_ID = re.compile(r"^ctx-[0-9a-f]{36}$")
DONE_KEYS = {"contextId", "runId", "done", "status", "text", "toolCalls", "usage"}


def assert_well_formed(frames: list[Frame]) -> None:
    """Ids 1.. per run, contextId and runId on every frame, one done frame at the end."""
    assert frames, "no frames"
    context_ids = {frame.data["contextId"] for frame in frames}
    run_ids = {frame.data["runId"] for frame in frames}
    assert len(context_ids) == 1 and len(run_ids) == 1
    ids = [frame.id for frame in frames]
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    assert [frame.done for frame in frames] == [False] * (len(frames) - 1) + [True]


async def test_stream_frames_follow_the_spec(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        frames = await stream_turn(client, "scripted", {"message": "hello there"})
    assert_well_formed(frames)
    assert frames[0].id == 1
    context_id = frames[0].data["contextId"]
    assert isinstance(context_id, str) and CONTEXT_ID.fullmatch(context_id)
    assert str(frames[0].data["runId"]).startswith("run-")
    assert frames[0].event == {"type": "status", "status": "running"}
    assert frames[1].event == {"type": "step", "step": 1}
    assert all(set(f.data) == {"contextId", "runId", "event"} for f in frames[:-1])
    done = frames[-1].data
    assert set(done) == DONE_KEYS
    assert done["status"] == "completed"
    assert done["text"] == "echo: hello there" == text_of(frames)
    assert done["toolCalls"] == []


async def test_send_returns_the_send_result(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        response = await client.post("/agents/scripted/send", json={"message": "hi"})
        structured = await client.post(
            "/agents/scripted/send",
            json={
                "message": {"role": "user", "parts": [{"kind": "text", "text": "parts"}]},
                "contextId": response.json()["contextId"],
            },
        )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"contextId", "runId", "status", "text", "toolCalls", "usage"}
    assert body["status"] == "completed" and body["text"] == "echo: hi"
    assert CONTEXT_ID.fullmatch(body["contextId"])
    assert structured.json()["text"] == "echo: parts"
    assert structured.json()["runId"] != body["runId"]


async def test_tool_inputs_and_outputs_never_reach_the_wire(
    server_url: str, tool_log: Path
) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        async with client.stream(
            "POST", "/agents/scripted/stream", json={"message": "secret"}
        ) as r:
            raw = (await r.aread()).decode()
        sent = await client.post("/agents/scripted/send", json={"message": "secret"})
    assert tool_runs(tool_log) == [f"lookup {SECRET_INPUT}"] * 2
    for text in (raw, sent.text):
        assert SECRET_INPUT not in text and SECRET_OUTPUT not in text
    assert '"type":"tool_call","id":' in raw and '"name":"lookup"' in raw
    assert sent.json()["toolCalls"] == ["lookup"]


async def test_a_context_remembers_and_contexts_are_isolated(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:

        async def send(message: str, context_id: str | None) -> dict[str, object]:
            body: dict[str, object] = {"message": message}
            if context_id is not None:
                body["contextId"] = context_id
            response = await client.post("/agents/scripted/send", json=body)
            assert response.status_code == 200, response.text
            result: dict[str, object] = response.json()
            return result

        first = await send("alpha one", None)
        other = await send("beta one", "ctx-user@example.com")
        await send("alpha two", str(first["contextId"]))
        await send("beta two", "ctx-user@example.com")
        alpha = await send("history", str(first["contextId"]))
        beta = await send("history", "ctx-user@example.com")
    assert other["contextId"] == "ctx-user@example.com"
    assert alpha["text"] == "alpha one|alpha two|history"
    assert beta["text"] == "beta one|beta two|history"


async def test_disconnect_does_not_cancel_and_reconnect_replays_what_was_missed(
    server_url: str,
) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        seen: list[Frame] = []
        body = {"message": "slow 0.6", "contextId": "ctx-disconnect"}
        async with client.stream("POST", "/agents/scripted/stream", json=body) as response:
            async for frame in frames_of(response):
                seen.append(frame)
                if len(seen) == 3:
                    break  # leaving the block closes the connection mid-run
        assert [f.id for f in seen] == [1, 2, 3]
        rest = await reconnect(client, "scripted", "ctx-disconnect", 3)
        assert_well_formed(seen + rest)
        assert rest[0].id == 4 and rest[-1].done
        assert text_of(seen + rest) == rest[-1].data["text"] == " ".join(["slowly"] * 10)
        again = await reconnect(client, "scripted", "ctx-disconnect", 3)
        assert [f.raw for f in again] == [f.raw for f in rest]
        whole = await reconnect(client, "scripted", "ctx-disconnect", None)
        assert [f.id for f in whole] == list(range(1, rest[-1].id + 1))
        assert await reconnect(client, "scripted", "ctx-disconnect", rest[-1].id) == []
        saved = await client.post(
            "/agents/scripted/send", json={"message": "history", "contextId": "ctx-disconnect"}
        )
    assert saved.json()["text"] == "slow 0.6|history"


async def test_a_run_goes_on_after_its_client_left(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        body = {"message": "slow 0.3", "contextId": "ctx-left"}
        async with client.stream("POST", "/agents/scripted/stream", json=body) as response:
            async for _ in frames_of(response):
                break
        rest = await reconnect(client, "scripted", "ctx-left", 1)  # waits for the end
        metrics = (await client.get("/metrics")).text
        history = await client.post(
            "/agents/scripted/send", json={"message": "history", "contextId": "ctx-left"}
        )
    assert rest[-1].done and rest[-1].data["status"] == "completed"
    assert 'agentkeel_runs_total{agent="scripted",status="completed"} 1' in metrics
    assert history.json()["text"] == "slow 0.3|history"


async def test_listing_health_readiness_and_metrics(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        agents = await client.get("/agents")
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
        await client.post("/agents/scripted/send", json={"message": "secret"})
        metrics = await client.get("/metrics")
    assert agents.json() == {
        "agents": [
            {
                "name": "scripted",
                "description": "A scripted test agent",
                "skills": ["delete_file", "lookup", "pause"],
                "a2a": f"{server_url}/agents/scripted/a2a/.well-known/agent-card.json",
            }
        ]
    }
    assert health.json() == {"status": "ok"} and ready.json() == {"status": "ok"}
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    for line in (
        'agentkeel_runs_total{agent="scripted",status="completed"} 1',
        'agentkeel_tool_calls_total{agent="scripted",tool="lookup",status="success"} 1',
        'agentkeel_turn_duration_seconds_count{agent="scripted"} 1',
        "agentkeel_cached_contexts 1",
        "agentkeel_queued_turns 0",
        "agentkeel_context_evictions_total",
    ):
        assert line in text, line


async def test_idle_streams_get_heartbeats(start_server: StartServer) -> None:
    settings = ServerSettings(heartbeat_seconds=0.15)
    with start_server(settings=settings) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = {"message": "pause 0.5"}
            async with client.stream("POST", "/agents/scripted/stream", json=body) as response:
                raw = (await response.aread()).decode()
    assert raw.count(": keep-alive\n\n") >= 2
    assert raw.rstrip().endswith("}") and '"toolCalls":["pause"],"usage":' in raw


async def test_retained_frames_expire(start_server: StartServer) -> None:
    with start_server(retention=Retention(events=1.0)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = {"message": "hi", "contextId": "ctx-expire"}
            await client.post("/agents/scripted/send", json=body)
            fresh = await client.get("/agents/scripted/contexts/ctx-expire/stream")
            await anyio.sleep(1.2)
            expired = await client.get("/agents/scripted/contexts/ctx-expire/stream")
    assert fresh.status_code == 200 and '"done":true' in fresh.text
    assert expired.status_code == 404
    assert expired.json()["error"]["code"] == "run_not_found"


async def test_cors_preflight_allows_configured_origins(start_server: StartServer) -> None:
    settings = ServerSettings(cors=("http://localhost:5173",))
    with start_server(settings=settings) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            headers = {
                "Origin": "http://localhost:5173",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, last-event-id, idempotency-key",
            }
            allowed = await client.options("/agents/scripted/stream", headers=headers)
            refused = await client.options(
                "/agents/scripted/stream", headers={**headers, "Origin": "https://evil.example"}
            )
            error = await client.post(
                "/agents/nope/send", json={}, headers={"Origin": "http://localhost:5173"}
            )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert refused.status_code == 400
    assert error.headers["access-control-allow-origin"] == "http://localhost:5173"
