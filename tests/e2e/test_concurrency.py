"""One turn at a time per context (queue or reject), eviction, idempotent retries."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest

from agentkeel.checkpoint.memory import InMemoryCheckpointer
from agentkeel.framework import ServerSettings
from agentkeel.storage.memory import InMemoryStorage
from e2e import frames_of, stream_turn, tool_runs
from e2e.conftest import StartServer

pytestmark = pytest.mark.anyio
SEND = "/agents/scripted/send"


async def metric(client: httpx.AsyncClient, name: str) -> float:
    for line in (await client.get("/metrics")).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


async def test_ten_concurrent_turns_queue_in_arrival_order(server_url: str) -> None:
    results: dict[int, dict[str, object]] = {}
    async with httpx.AsyncClient(base_url=server_url, timeout=30) as client:

        async def send(index: int) -> None:
            body = {"message": f"m{index}", "contextId": "ctx-queue"}
            response = await client.post(SEND, json=body)
            results[index] = response.json()

        async def occupy() -> None:
            await client.post(SEND, json={"message": "slow 1.5", "contextId": "ctx-queue"})

        async def queued_turns(count: int) -> float:
            with anyio.fail_after(5):
                while (value := await metric(client, "agentkeel_queued_turns")) < count:
                    await anyio.sleep(0.005)
            return value

        async with anyio.create_task_group() as group:
            group.start_soon(occupy)
            with anyio.fail_after(5):
                while await metric(client, "agentkeel_active_runs") < 1:
                    await anyio.sleep(0.005)
            for index in range(10):  # each one is queued before the next is sent
                group.start_soon(send, index)
                queued = await queued_turns(index + 1)
        history = await client.post(SEND, json={"message": "history", "contextId": "ctx-queue"})
    assert queued == 10
    assert [results[i]["text"] for i in range(10)] == [f"echo: m{i}" for i in range(10)]
    assert len({str(r["runId"]) for r in results.values()}) == 10
    expected = "|".join(["slow 1.5", *(f"m{i}" for i in range(10)), "history"])
    assert history.json()["text"] == expected


async def test_reject_policy_answers_context_busy(start_server: StartServer) -> None:
    settings = ServerSettings(concurrency="reject", heartbeat_seconds=1.0)
    with start_server(settings=settings) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            body = {"message": "slow 0.5", "contextId": "ctx-busy"}
            async with client.stream("POST", "/agents/scripted/stream", json=body) as response:
                frames = frames_of(response)
                await frames.__anext__()
                busy = await client.post(SEND, json={"message": "x", "contextId": "ctx-busy"})
                other = await client.post(SEND, json={"message": "x", "contextId": "ctx-free"})
                rest = [frame async for frame in frames]
            later = await client.post(SEND, json={"message": "history", "contextId": "ctx-busy"})
    assert busy.status_code == 409
    assert busy.json()["error"]["code"] == "context_busy"
    assert other.status_code == 200
    assert rest[-1].data["status"] == "completed"
    assert later.json()["text"] == "slow 0.5|history"


async def test_eviction_loses_nothing(start_server: StartServer, tool_log: Path) -> None:
    storage, checkpointer = InMemoryStorage(), InMemoryCheckpointer()
    with start_server(storage=storage, checkpointer=checkpointer, max_contexts=2) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            await client.post(SEND, json={"message": "note one", "contextId": "ctx-a"})
            suspended = await client.post(
                SEND, json={"message": "delete e.txt", "contextId": "ctx-b"}
            )
            interrupt_id = suspended.json()["interrupt"]["id"]
            for name in ("ctx-c", "ctx-d"):
                await client.post(SEND, json={"message": "filler", "contextId": name})
            evictions = await metric(client, "agentkeel_context_evictions_total")
            cached = await metric(client, "agentkeel_cached_contexts")
            pending = await client.post(SEND, json={"message": "hi", "contextId": "ctx-b"})
            resumed = await client.post(
                SEND,
                json={
                    "contextId": "ctx-b",
                    "resume": {"interruptId": interrupt_id, "decision": {"approved": True}},
                },
            )
            history = await client.post(SEND, json={"message": "history", "contextId": "ctx-a"})
    assert evictions >= 2 and cached == 2
    assert pending.json()["error"]["interruptId"] == interrupt_id
    assert resumed.json()["status"] == "completed"
    assert resumed.json()["runId"] == suspended.json()["runId"]
    assert tool_runs(tool_log) == ["delete_file e.txt"]
    assert history.json()["text"] == "note one|history"


async def test_idempotent_retries_run_once(server_url: str, tool_log: Path) -> None:
    async with httpx.AsyncClient(base_url=server_url, timeout=10) as client:
        headers = {"Idempotency-Key": "key-1"}
        body = {"message": "secret", "contextId": "ctx-idem"}
        first = await client.post(SEND, json=body, headers=headers)
        retry = await client.post(SEND, json=body, headers=headers)
        other_body = await client.post(
            SEND, json={"message": "other", "contextId": "ctx-idem"}, headers=headers
        )
        fresh = await client.post(
            SEND, json={"message": "no context yet"}, headers={"Idempotency-Key": "key-2"}
        )
        fresh_retry = await client.post(
            SEND, json={"message": "no context yet"}, headers={"Idempotency-Key": "key-2"}
        )
        stream_headers = {"Idempotency-Key": "key-3"}
        stream_body = {"message": "tokens 5", "contextId": "ctx-idem"}
        streamed = await stream_turn(client, "scripted", stream_body, stream_headers)
        restreamed = await stream_turn(client, "scripted", stream_body, stream_headers)
        history = await client.post(SEND, json={"message": "history", "contextId": "ctx-idem"})
    assert retry.json() == first.json()
    assert tool_runs(tool_log) == ["lookup SECRET-INPUT-4242"]
    assert other_body.status_code == 422
    assert other_body.json()["error"]["code"] == "idempotency_key_reused"
    assert fresh_retry.json() == fresh.json()
    assert [f.raw for f in restreamed] == [f.raw for f in streamed]
    assert history.json()["text"] == "secret|tokens 5|history"
