"""A real ``agentkeel serve`` process over a session folder: restarts, shutdowns, SIGKILL."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from agentkeel.messages import open_tool_calls
from agentkeel.storage.base import RunEventStorage, SessionKey
from agentkeel.storage.file import LocalFileStorage
from e2e import Frame, ServerProcess, frames_of, reconnect, stream_turn, tool_runs, write_framework

pytestmark = pytest.mark.anyio
SEND = "/agents/scripted/send"
PERSISTENT_EVENTS = isinstance(LocalFileStorage("unused"), RunEventStorage)
needs_persistent_events = pytest.mark.skipif(
    not PERSISTENT_EVENTS, reason="LocalFileStorage does not implement RunEventStorage yet"
)


@pytest.fixture
def server(tmp_path: Path, tool_log: Path) -> Iterator[ServerProcess]:
    del tool_log  # its environment variable reaches the subprocess
    document: dict[str, object] = {
        "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
        "sessionDir": "./sessions",
        "checkpointer": {"dir": "./checkpoints"},
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 10},
    }
    process = ServerProcess(write_framework(tmp_path, document))
    try:
        yield process
    finally:
        process.stop()


async def send(url: str, body: dict[str, object]) -> dict[str, object]:
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        response = await client.post(SEND, json=body)
    assert response.status_code == 200, response.text
    result: dict[str, object] = response.json()
    return result


def test_binding_beyond_loopback_warns(server: ServerProcess) -> None:
    url = server.start("--host", "0.0.0.0")
    assert url.startswith("http://0.0.0.0:")
    assert "warning: listening on 0.0.0.0 without authentication" in server.stderr.read_text()
    port = url.rsplit(":", 1)[1]
    assert httpx.get(f"http://127.0.0.1:{port}/healthz").json() == {"status": "ok"}


async def test_a_restart_continues_the_conversation(server: ServerProcess) -> None:
    url = server.start()
    await send(url, {"message": "before the restart", "contextId": "ctx-restart"})
    assert server.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
    url = server.start()
    history = await send(url, {"message": "history", "contextId": "ctx-restart"})
    assert history["text"] == "before the restart|history"


async def test_an_approval_survives_a_restart_and_runs_the_tool_once(
    server: ServerProcess, tool_log: Path
) -> None:
    url = server.start()
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        first = await stream_turn(
            client, "scripted", {"message": "delete r.txt", "contextId": "ctx-h"}
        )
    interrupt = first[-1].data["interrupt"]
    assert isinstance(interrupt, dict)
    server.stop()
    url = server.start()
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        pending = await client.post(SEND, json={"message": "hello", "contextId": "ctx-h"})
        resume = {"interruptId": interrupt["id"], "decision": {"approved": True}}
        second = await stream_turn(client, "scripted", {"contextId": "ctx-h", "resume": resume})
        again = await client.post(SEND, json={"contextId": "ctx-h", "resume": resume})
    assert pending.status_code == 409
    assert pending.json()["error"]["interruptId"] == interrupt["id"]
    assert second[-1].data["status"] == "completed"
    assert second[-1].data["runId"] == first[-1].data["runId"]
    assert second[-1].data["toolCalls"] == ["delete_file"]
    assert again.json()["error"]["code"] == "interrupt_not_found"
    assert tool_runs(tool_log) == ["delete_file r.txt"]
    if PERSISTENT_EVENTS:
        assert second[0].id == first[-1].id + 1


async def test_shutdown_lets_running_turns_finish(server: ServerProcess) -> None:
    url = server.start()
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        left = {"message": "slow 1", "contextId": "ctx-left"}
        async with client.stream("POST", "/agents/scripted/stream", json=left) as response:
            async for _ in frames_of(response):
                break
        stayed: list[Frame] = []
        body = {"message": "slow 1", "contextId": "ctx-stayed"}
        async with client.stream("POST", "/agents/scripted/stream", json=body) as response:
            async for frame in frames_of(response):
                stayed.append(frame)
                if len(stayed) == 2:
                    assert server.process is not None
                    server.process.send_signal(signal.SIGTERM)
    assert stayed[-1].done and stayed[-1].data["status"] == "completed"
    assert server.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
    url = server.start()
    for context_id in ("ctx-left", "ctx-stayed"):
        history = await send(url, {"message": "history", "contextId": context_id})
        assert history["text"] == "slow 1|history"


async def test_turns_left_at_the_shutdown_deadline_are_cancelled_and_saved(
    tmp_path: Path, tool_log: Path
) -> None:
    document: dict[str, object] = {
        "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
        "sessionDir": "./sessions",
        "server": {"shutdownTimeoutSeconds": 0.5},
    }
    server = ServerProcess(write_framework(tmp_path, document))
    try:
        url = server.start()
        async with httpx.AsyncClient(base_url=url, timeout=20) as client:
            body = {"message": "pause 30", "contextId": "ctx-late"}
            async with client.stream("POST", "/agents/scripted/stream", json=body) as response:
                async for frame in frames_of(response):
                    if not frame.done and frame.event["type"] == "tool_call":
                        break
        started = time.monotonic()
        assert server.stop() in (0, -signal.SIGTERM)
        assert time.monotonic() - started < 15
        url = server.start()
        history = await send(url, {"message": "history", "contextId": "ctx-late"})
    finally:
        server.stop()
    assert history["text"] == "pause 30|history"
    assert tool_runs(tool_log) == []
    storage = LocalFileStorage(tmp_path / "sessions")
    key = SessionKey(definition="scripted", context_id="ctx-late")
    snapshot = await storage.load(key)
    assert snapshot is not None and open_tool_calls(snapshot.messages) == []
    assert [run.status for run in await storage.list_runs(key)] == ["cancelled", "completed"]


async def test_sigkill_during_a_turn_leaves_a_valid_history(
    server: ServerProcess, tmp_path: Path
) -> None:
    url = server.start()
    await send(url, {"message": "kept", "contextId": "ctx-kill"})
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        body = {"message": "pause 5", "contextId": "ctx-kill"}
        async with client.stream("POST", "/agents/scripted/stream", json=body) as response:
            async for frame in frames_of(response):
                if not frame.done and frame.event["type"] == "tool_call":
                    assert server.kill() == -signal.SIGKILL
                    break
    storage = LocalFileStorage(tmp_path / "sessions")
    snapshot = await storage.load(SessionKey(definition="scripted", context_id="ctx-kill"))
    assert snapshot is not None
    assert open_tool_calls(snapshot.messages) == []
    assert [m.role for m in snapshot.messages] == ["user", "assistant"]
    url = server.start()
    history = await send(url, {"message": "history", "contextId": "ctx-kill"})
    assert history["status"] == "completed"
    assert history["text"] == "kept|history"


@needs_persistent_events
async def test_reconnect_after_a_restart_replays_the_missing_frames(
    server: ServerProcess,
) -> None:
    url = server.start()
    seen: list[Frame] = []
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        body = {"message": "slow 0.4", "contextId": "ctx-replay"}
        async with client.stream("POST", "/agents/scripted/stream", json=body) as response:
            async for frame in frames_of(response):
                seen.append(frame)
                if len(seen) == 3:
                    break
        whole = await reconnect(client, "scripted", "ctx-replay", 0)
    await anyio.sleep(0)
    server.stop()
    url = server.start()
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        rest = await reconnect(client, "scripted", "ctx-replay", 3)
    assert [f.raw for f in seen + rest] == [f.raw for f in whole]
    assert rest[-1].done and rest[-1].data["status"] == "completed"
