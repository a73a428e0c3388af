"""Stopping runs on the server: the cancel endpoint and the interrupt and rollback policies.

Every test runs a real uvicorn server. A cancel must stop the work on the server (the
slow tool never finishes: its log line never appears), end the run's stream with a
``cancelled`` done frame, and leave a history that a strict provider accepts on the
next turn.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import pytest

from agentkeel.client import AgentClient, AsyncAgentClient
from agentkeel.errors import ConfigurationError, NoActiveRunError
from agentkeel.framework import ServerSettings, load_framework
from agentkeel.server import create_app
from agentkeel.storage.base import SessionKey
from e2e import Frame, frames_of, serve_in_thread, tool_runs
from e2e.conftest import StartServer
from fakes.openai_server import FakeOpenAI, OpenAIStream

pytestmark = pytest.mark.anyio
SEND = "/agents/scripted/send"
STREAM = "/agents/scripted/stream"
KEY = "sk-run-control-test"


def cancel_url(context_id: str, agent: str = "scripted") -> str:
    return f"/agents/{agent}/contexts/{context_id}/cancel"


@asynccontextmanager
async def running_turn(
    client: httpx.AsyncClient, body: Mapping[str, object], until: str, url: str = STREAM
) -> AsyncIterator[tuple[list[Frame], AsyncIterator[Frame]]]:
    """Stream a turn and stop reading at its first `until` event (its frames so far)."""
    async with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, await response.aread()
        frames = frames_of(response)
        seen: list[Frame] = []
        with anyio.fail_after(10):
            async for frame in frames:
                seen.append(frame)
                if not frame.done and frame.event["type"] == until:
                    break
        yield seen, frames


async def rest_of(frames: AsyncIterator[Frame]) -> list[Frame]:
    with anyio.fail_after(10):
        return [frame async for frame in frames]


async def metric(client: httpx.AsyncClient, series: str) -> float:
    for line in (await client.get("/metrics")).text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[1])
    return 0.0


# -- cancel --------------------------------------------------------------------------------


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key=KEY)
    with fake.serve():
        yield fake


def openai_framework(base_url: str) -> dict[str, object]:
    model = {"provider": "openai", "model": "gpt-strict", "baseUrl": base_url}
    return {
        "agents": {
            "gpt": {
                "model": {**model, "apiKeyEnv": "RUN_CONTROL_KEY", "maxRetries": 0},
                "tools": ["e2e:pause"],
            }
        },
        "server": {"heartbeatSeconds": 1},
    }


async def test_cancel_stops_a_long_tool_and_the_next_turn_is_valid_for_a_strict_provider(
    fake_openai: FakeOpenAI, tool_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUN_CONTROL_KEY", KEY)
    arguments = json.dumps({"seconds": 60})
    fake_openai.enqueue(
        OpenAIStream().tool_call(0, id="call-1", name="pause", arguments=[arguments]).reply(),
        OpenAIStream().text("fine").finish("stop").reply(),
    )
    app = create_app(openai_framework(fake_openai.base_url))
    body = {"message": "wait a minute", "contextId": "ctx-long-tool"}
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with running_turn(client, body, "tool_call", "/agents/gpt/stream") as (
                seen,
                frames,
            ):
                cancelled = await client.post(cancel_url("ctx-long-tool", "gpt"))
                rest = await rest_of(frames)
            again = await client.post(cancel_url("ctx-long-tool", "gpt"))
            nxt = await client.post(
                "/agents/gpt/send", json={"message": "and now?", "contextId": "ctx-long-tool"}
            )
            cancels = await metric(client, 'agentkeel_cancels_total{agent="gpt",reason="cancel"}')
        runtime = app.state.runtime
        run_id = seen[0].data["runId"]
        record = await runtime.framework.storage.get_run(
            SessionKey(definition="gpt", context_id="ctx-long-tool"), str(run_id)
        )
    assert cancelled.status_code == 202
    assert cancelled.json() == {"runId": run_id, "status": "cancelling"}
    done = rest[-1]
    assert done.done and done.data["status"] == "cancelled" and done.data["runId"] == run_id
    assert tool_runs(tool_log) == []  # the tool was stopped, on the server
    assert record is not None and record.status == "cancelled"
    assert again.status_code == 409 and again.json()["error"]["code"] == "no_active_run"
    assert nxt.status_code == 200, nxt.text
    assert nxt.json()["status"] == "completed" and nxt.json()["text"] == "fine"
    # the strict fake accepted the history: the open call got its (error) result
    messages = fake_openai.requests[-1].json["messages"]
    assert isinstance(messages, list)
    roles = [m["role"] for m in messages if isinstance(m, dict)]
    assert roles == ["user", "assistant", "tool", "user"]
    tool_message = messages[2]
    assert isinstance(tool_message, dict) and tool_message["tool_call_id"] == "call-1"
    assert cancels == 1


async def test_cancel_abandons_a_suspended_run(server_url: str, tool_log: Path) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        body = {"message": "delete notes.txt", "contextId": "ctx-suspended"}
        suspended = (await client.post(SEND, json=body)).json()
        cancelled = await client.post(cancel_url("ctx-suspended"))
        stream = "/agents/scripted/contexts/ctx-suspended/stream"
        async with client.stream("GET", stream) as response:
            replay = [frame async for frame in frames_of(response)]
        later = await client.post(SEND, json={"message": "history", "contextId": "ctx-suspended"})
        again = await client.post(cancel_url("ctx-suspended"))
    assert suspended["status"] == "suspended"
    assert cancelled.status_code == 202
    assert cancelled.json() == {"runId": suspended["runId"], "status": "cancelling"}
    assert replay[-1].data["status"] == "cancelled"
    assert replay[-1].data["runId"] == suspended["runId"]
    assert later.status_code == 200 and later.json()["status"] == "completed"
    assert tool_runs(tool_log) == []  # the refused call never ran
    assert again.status_code == 409 and again.json()["error"]["code"] == "no_active_run"


async def test_cancel_abandons_a_suspended_run_that_was_evicted(
    start_server: StartServer, tool_log: Path
) -> None:
    with start_server(max_contexts=1) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = {"message": "delete notes.txt", "contextId": "ctx-evicted"}
            suspended = (await client.post(SEND, json=body)).json()
            await client.post(SEND, json={"message": "hi", "contextId": "ctx-other"})  # evicts it
            cancelled = await client.post(cancel_url("ctx-evicted"))
            later = await client.post(SEND, json={"message": "history", "contextId": "ctx-evicted"})
    assert suspended["status"] == "suspended"
    assert cancelled.status_code == 202 and cancelled.json()["runId"] == suspended["runId"]
    assert later.status_code == 200 and later.json()["status"] == "completed"
    assert tool_runs(tool_log) == []


async def test_cancel_answers_no_active_run_and_context_not_found(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        await client.post(SEND, json={"message": "hi", "contextId": "ctx-idle"})
        idle = await client.post(cancel_url("ctx-idle"))
        unknown = await client.post(cancel_url("ctx-never-seen"))
        bad = await client.post(cancel_url("ctx bad id"))
        other = await client.post(cancel_url("ctx-idle", "nobody"))
    assert idle.status_code == 409 and idle.json()["error"]["code"] == "no_active_run"
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "context_not_found"
    assert bad.status_code == 400
    assert other.status_code == 404


async def test_another_principal_cannot_cancel(
    monkeypatch: pytest.MonkeyPatch, tool_log: Path
) -> None:
    monkeypatch.setenv("ALICE_API_KEY", "alice-key-run-control")
    monkeypatch.setenv("BOB_API_KEY", "bob-key-run-control")
    keys = {"alice": {"env": "ALICE_API_KEY"}, "bob": {"env": "BOB_API_KEY"}}
    document = {
        "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
        "server": {"auth": {"apiKeys": keys}, "heartbeatSeconds": 1},
    }
    alice = {"X-API-Key": "alice-key-run-control"}
    bob = {"X-API-Key": "bob-key-run-control"}
    body = {"message": "pause 30", "contextId": "ctx-alice"}
    with serve_in_thread(create_app(document)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with client.stream("POST", STREAM, json=body, headers=alice) as response:
                frames = frames_of(response)
                with anyio.fail_after(10):
                    async for frame in frames:
                        if not frame.done and frame.event["type"] == "tool_call":
                            break
                by_bob = await client.post(cancel_url("ctx-alice"), headers=bob)
                by_alice = await client.post(cancel_url("ctx-alice"), headers=alice)
                rest = await rest_of(frames)
    assert by_bob.status_code == 404 and by_bob.json()["error"]["code"] == "context_not_found"
    assert by_alice.status_code == 202
    assert rest[-1].data["status"] == "cancelled"
    assert tool_runs(tool_log) == []


async def test_the_python_client_cancels_on_the_server(server_url: str, tool_log: Path) -> None:
    async with AsyncAgentClient(server_url, agent="scripted", context_id="ctx-client") as agent:
        await agent.send("first")
        with pytest.raises(NoActiveRunError):
            await agent.cancel()
        result = None
        async for item in agent.stream("pause 30"):
            if getattr(item, "type", None) == "tool_call":
                cancelled = await agent.cancel()
                assert cancelled.status == "cancelling"
            result = item
        history = await agent.send("history")
    assert getattr(result, "status", None) == "cancelled"
    assert history.text == "first|pause 30|history"
    assert tool_runs(tool_log) == []


def blocking_cancel(url: str, context_id: str) -> str:
    """The blocking client's cancel (it runs its own loop, so off the test's loop)."""
    client = AgentClient(url, agent="scripted", context_id=context_id)
    try:
        return client.cancel().run_id
    finally:
        client.close()


async def test_the_blocking_client_cancels_on_the_server(server_url: str, tool_log: Path) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        body = {"message": "pause 30", "contextId": "ctx-blocking"}
        async with running_turn(client, body, "tool_call") as (seen, frames):
            run_id = await anyio.to_thread.run_sync(blocking_cancel, server_url, "ctx-blocking")
            rest = await rest_of(frames)
    assert run_id == seen[0].data["runId"]
    assert rest[-1].data["status"] == "cancelled"
    assert tool_runs(tool_log) == []


# -- multitask: interrupt and rollback ----------------------------------------------------


async def two_turns(
    url: str, second: dict[str, object], context_id: str
) -> tuple[list[Frame], httpx.Response, httpx.Response]:
    """A first turn, then a slow tool turn taken over by `second` while its tool runs."""
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        await client.post(SEND, json={"message": "m0", "contextId": context_id})
        body = {"message": "pause 30", "contextId": context_id}
        async with running_turn(client, body, "tool_call") as (seen, frames):
            taken = await client.post(SEND, json={**second, "contextId": context_id})
            rest = await rest_of(frames)
        history = await client.post(SEND, json={"message": "history", "contextId": context_id})
    return [*seen, *rest], taken, history


async def test_interrupt_cancels_the_running_turn_and_keeps_what_it_did(
    server_url: str, tool_log: Path
) -> None:
    frames, taken, history = await two_turns(
        server_url, {"message": "history", "multitask": "interrupt"}, "ctx-interrupt"
    )
    assert frames[-1].done and frames[-1].data["status"] == "cancelled"
    assert taken.status_code == 200 and taken.json()["status"] == "completed"
    assert taken.json()["text"] == "m0|pause 30|history"  # the cancelled turn is kept
    assert history.json()["text"] == "m0|pause 30|history|history"
    assert tool_runs(tool_log) == []


async def test_rollback_drops_the_running_turn_as_if_never_sent(
    server_url: str, tool_log: Path
) -> None:
    frames, taken, history = await two_turns(
        server_url, {"message": "history", "multitask": "rollback"}, "ctx-rollback"
    )
    assert frames[-1].done and frames[-1].data["status"] == "cancelled"
    assert taken.json()["status"] == "completed"
    assert taken.json()["text"] == "m0|history"  # the cancelled turn left no trace
    assert history.json()["text"] == "m0|history|history"
    assert tool_runs(tool_log) == []


async def test_the_server_policy_applies_and_a_request_overrides_it(
    start_server: StartServer,
) -> None:
    settings = ServerSettings(concurrency="rollback", heartbeat_seconds=1.0)
    with start_server(settings=settings) as url:
        frames, taken, history = await two_turns(url, {"message": "history"}, "ctx-policy")
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = {"message": "pause 30", "contextId": "ctx-override"}
            async with running_turn(client, body, "tool_call") as (_, rest):
                busy = await client.post(
                    SEND, json={"message": "x", "contextId": "ctx-override", "multitask": "reject"}
                )
                await client.post(cancel_url("ctx-override"))
                ended = await rest_of(rest)
            rollbacks = await metric(
                client, 'agentkeel_cancels_total{agent="scripted",reason="rollback"}'
            )
    assert frames[-1].data["status"] == "cancelled"
    assert taken.json()["text"] == "m0|history"
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "context_busy"
    assert ended[-1].data["status"] == "cancelled"
    assert rollbacks == 1


async def test_multitask_is_validated(server_url: str) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        bad = await client.post(SEND, json={"message": "x", "multitask": "drop-everything"})
        wrong_type = await client.post(SEND, json={"message": "x", "multitask": 3})
        idle = await client.post(SEND, json={"message": "x", "multitask": "rollback"})
        exposed = (await client.get("/metrics")).text
    assert idle.status_code == 200 and idle.json()["text"] == "echo: x"  # nothing to stop
    assert "# TYPE agentkeel_cancels_total counter" in exposed
    assert "agentkeel_cancels_total{" not in exposed  # nothing was cancelled
    for response in (bad, wrong_type):
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_request"
        assert "multitask" in response.json()["error"]["message"]


def test_framework_json_takes_the_new_policies_and_refuses_others() -> None:
    agents = {"scripted": {"factory": "e2e:scripted_agent"}}
    for policy in ("queue", "reject", "interrupt", "rollback"):
        loaded = load_framework({"agents": agents, "server": {"concurrency": policy}})
        assert loaded.server.concurrency == policy
    with pytest.raises(ConfigurationError, match="concurrency"):
        load_framework({"agents": agents, "server": {"concurrency": "drop"}})


async def test_cancel_stops_a_swarm_member_on_the_server(tool_log: Path) -> None:
    document = {
        "agents": {
            "scripted": {"factory": "e2e:scripted_agent"},
            "desk": {"swarm": {"members": ["scripted"], "entry": "scripted"}},
        },
        "server": {"heartbeatSeconds": 1},
    }
    body = {"message": "pause 30", "contextId": "ctx-swarm"}
    with serve_in_thread(create_app(document)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with running_turn(client, body, "tool_call", "/agents/desk/stream") as (_, rest):
                cancelled = await client.post(cancel_url("ctx-swarm", "desk"))
                ended = await rest_of(rest)
            later = await client.post(
                "/agents/desk/send", json={"message": "history", "contextId": "ctx-swarm"}
            )
    assert cancelled.status_code == 202
    assert ended[-1].data["status"] == "cancelled"
    assert later.json()["status"] == "completed"
    assert later.json()["text"] == "pause 30|history"
    assert tool_runs(tool_log) == []
