"""A turn whose conversation another process moved on ends `failed` with `concurrent_write`.

The served agent's tool runs a second Agent, a replica of another process, on the same
session over the same storage: it commits a turn between the server's load and its
commit, so the server's save is refused. The client is told plainly on every binding,
nothing of the refused turn is stored, and the next turn reloads what the other saved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest
from a2a.types import TaskState

from a2a_binding import a2a_client, send, user_message
from agentkeel import Agent, ScriptedModel, ScriptedToolCall, ScriptedTurn, SessionManager, tool
from agentkeel.framework import ServerSettings
from agentkeel.keys import SessionKey
from agentkeel.models.base import ModelRequest
from agentkeel.server import A2AServer
from agentkeel.storage import InMemoryStorage
from e2e import serve_in_thread, stream_turn

pytestmark = pytest.mark.anyio

AGENT = "rival"


def _brain(request: ModelRequest) -> ScriptedTurn:
    last = request.messages[-1]
    if last.tool_results:
        return ScriptedTurn(text="the other process wrote")
    if last.text == "collide":
        return ScriptedTurn(tool_calls=[ScriptedToolCall("write_elsewhere", {})])
    if last.text == "history":
        prompts = [m.text for m in request.messages if m.role == "user" and not m.tool_results]
        return ScriptedTurn(text="|".join(prompts))
    return ScriptedTurn(text=f"echo: {last.text}")


def rival_factory(storage: InMemoryStorage) -> Callable[[str], Agent]:
    def build(context_id: str) -> Agent:
        @tool
        async def write_elsewhere() -> str:
            """Let another process commit a turn on this very conversation."""
            other = Agent(
                ScriptedModel(["answered elsewhere"]),
                session_manager=SessionManager(f"{AGENT}:{context_id}", storage),
            )
            await other.invoke_async("elsewhere")
            return "written"

        return Agent(ScriptedModel([_brain], repeat=True), tools=[write_elsewhere], name=AGENT)

    return build


@pytest.fixture
def served() -> Iterator[tuple[str, InMemoryStorage]]:
    storage = InMemoryStorage()
    server = A2AServer(
        rival_factory(storage),
        name=AGENT,
        storage=storage,
        settings=ServerSettings(heartbeat_seconds=1.0, shutdown_timeout_seconds=5),
    )
    with serve_in_thread(server.app) as url:
        yield url, storage


async def _stored_prompts(storage: InMemoryStorage, context_id: str) -> list[str]:
    snapshot = await storage.load(SessionKey.parse(f"{AGENT}:{context_id}"))
    assert snapshot is not None
    return [m.text for m in snapshot.messages if m.role == "user" and not m.tool_results]


async def test_send_answers_failed_with_concurrent_write_and_the_next_turn_reloads(
    served: tuple[str, InMemoryStorage],
) -> None:
    url, storage = served
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        body = {"message": "hello", "contextId": "ctx-race"}
        first = await client.post(f"/agents/{AGENT}/send", json=body)
        assert first.json()["status"] == "completed"
        lost = await client.post(
            f"/agents/{AGENT}/send", json={"message": "collide", "contextId": "ctx-race"}
        )
        assert lost.status_code == 200
        result = lost.json()
        assert result["status"] == "failed"
        assert result["error"]["code"] == "concurrent_write"
        assert "not saved" in result["error"]["message"]
        assert "ctx-race" not in result["error"]["message"]  # no session ids or paths leak
        assert await _stored_prompts(storage, "ctx-race") == ["hello", "elsewhere"]
        record = await storage.latest_run(SessionKey.parse(f"{AGENT}:ctx-race"))
        assert record is not None and record.run_id == result["runId"]
        assert record.status == "failed" and record.error is not None
        assert record.error.code == "concurrent_write"
        after = await client.post(
            f"/agents/{AGENT}/send", json={"message": "history", "contextId": "ctx-race"}
        )
    assert after.json()["status"] == "completed"
    assert after.json()["text"] == "hello|elsewhere|history"  # reloaded, not forked


async def test_stream_sends_an_error_frame_then_done_failed(
    served: tuple[str, InMemoryStorage],
) -> None:
    url, storage = served
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        await client.post(f"/agents/{AGENT}/send", json={"message": "hi", "contextId": "ctx-s"})
        frames = await stream_turn(client, AGENT, {"message": "collide", "contextId": "ctx-s"})
    events = [f.data["event"] for f in frames if not f.done]
    errors = [e for e in events if isinstance(e, dict) and e.get("type") == "error"]
    assert [e["code"] for e in errors] == ["concurrent_write"]
    assert "not saved" in str(errors[0]["message"])
    done = frames[-1].data
    assert frames[-1].done and done["status"] == "failed"
    assert isinstance(done["error"], dict) and done["error"]["code"] == "concurrent_write"
    assert await _stored_prompts(storage, "ctx-s") == ["hi", "elsewhere"]


async def test_a2a_task_fails_with_the_reason(served: tuple[str, InMemoryStorage]) -> None:
    url, storage = served
    async with a2a_client(url, agent=AGENT) as (client, _):
        first = await send(client, user_message("hi"))
        lost = await send(client, user_message("collide", context_id=first.context_id))
    assert lost.status.state == TaskState.TASK_STATE_FAILED
    assert "not saved" in lost.status.message.parts[0].text
    assert await _stored_prompts(storage, first.context_id) == ["hi", "elsewhere"]
