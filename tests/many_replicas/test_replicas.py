"""Many replicas (SPEC 11): any process serves any request for any context.

Run against three ``agentkeel serve`` processes and against one ``--workers 3`` server,
all on one PostgreSQL schema and one Redis database number. The tests that kill or
pause a replica use the three processes, whose pids they know.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import anyio
import httpx
import pytest
import redis

from agentkeel.messages import open_tool_calls
from e2e import Frame, frames_of, reconnect, tool_runs
from many_replicas.cluster import AGENT, LEASE_SECONDS, Cluster

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(180)]


async def _history(cluster: Cluster, context_id: str) -> list[str]:
    storage = cluster.storage()
    await storage.open()
    try:
        snapshot = await storage.load(cluster.key(context_id))
    finally:
        await storage.close()
    assert snapshot is not None
    assert open_tool_calls(snapshot.messages) == []  # valid for a strict provider
    return [m.text for m in snapshot.messages if m.role == "user" and not m.tool_results]


async def test_round_robin_turns_keep_one_conversation(cluster: Cluster) -> None:
    """Each turn on another replica sees every turn before it (guarantee 9)."""
    with anyio.fail_after(60):
        for word in ("one", "two", "three", "four", "five"):
            response = await cluster.send(cluster.next_url(), {"message": word, "contextId": "rr"})
            assert response.status_code == 200, response.text
        last = await cluster.send(cluster.next_url(), {"message": "history", "contextId": "rr"})
    assert last.json()["text"] == "one|two|three|four|five|history"


async def test_a_stale_replica_catches_up_after_turns_elsewhere(cluster: Cluster) -> None:
    """A's cached Agent misses several turns B and C ran (a tool call, an edit among
    them); its next turn sees exactly the stored conversation, and nothing forks."""
    first, second, third = cluster.urls
    context = {"contextId": "behind"}
    with anyio.fail_after(90):
        for word in ("a1", "a2"):  # A caches the context
            assert (await cluster.send(first, {"message": word, **context})).status_code == 200
        for url, word in ((second, "b1"), (third, "secret"), (second, "b2"), (third, "c1")):
            assert (await cluster.send(url, {"message": word, **context})).status_code == 200
        caught = await cluster.send(first, {"message": "history", **context})
        assert caught.json()["text"] == "a1|a2|b1|secret|b2|c1|history"
        async with httpx.AsyncClient(base_url=second, timeout=30) as client:
            path = f"/agents/{AGENT}/contexts/behind/messages"
            listed = (await client.get(path)).json()["messages"]
            b2 = next(m["id"] for m in listed if m["text"] == "b2")
            edited = await cluster.send(second, {"replace": b2, "message": "b2!", **context})
            assert edited.status_code == 200, edited.text
        again = await cluster.send(first, {"message": "history", **context})  # a cut, then
    assert again.json()["text"] == "a1|a2|b1|secret|b2!|history"
    assert await _history(cluster, "behind") == ["a1", "a2", "b1", "secret", "b2!", "history"]


async def test_concurrent_turns_over_three_replicas_never_overlap(cluster: Cluster) -> None:
    """Ten turns at once on one context, spread over the replicas: all run, one at a time."""
    results: list[httpx.Response] = []

    async def turn(index: int) -> None:
        url = cluster.urls[index % 3]
        results.append(await cluster.send(url, {"message": f"slow 0.2 #{index}", "contextId": "c"}))

    with anyio.fail_after(120):
        async with anyio.create_task_group() as group:
            for index in range(10):
                group.start_soon(turn, index)
    assert [r.status_code for r in results] == [200] * 10, [r.text for r in results]
    assert {r.json()["status"] for r in results} == {"completed"}
    users = await _history(cluster, "c")
    assert sorted(users) == sorted(f"slow 0.2 #{index}" for index in range(10))
    storage = cluster.storage()
    await storage.open()
    try:
        runs = await storage.list_runs(cluster.key("c"))
    finally:
        await storage.close()
    spans = sorted((run.started_at, run.ended_at or 0.0) for run in runs)
    assert len(spans) == 10
    for (_, ended), (started, _) in zip(spans, spans[1:], strict=False):
        assert started >= ended - 0.001, "two turns of one context overlapped"


async def test_a_stream_started_on_one_replica_continues_on_another(cluster: Cluster) -> None:
    """Reconnecting on B with Last-Event-ID mid-run gets the rest of the frames, once."""
    first, second, third = cluster.urls
    seen: list[Frame] = []
    with anyio.fail_after(60):
        async with httpx.AsyncClient(base_url=first, timeout=30) as client:
            body = {"message": "slow 2", "contextId": "moving"}
            async with client.stream("POST", f"/agents/{AGENT}/stream", json=body) as response:
                async for frame in frames_of(response):
                    seen.append(frame)
                    if len(seen) == 3:
                        break
        async with httpx.AsyncClient(base_url=second, timeout=30) as client:
            rest = await reconnect(client, AGENT, "moving", seen[-1].id)
        async with httpx.AsyncClient(base_url=third, timeout=30) as client:
            whole = await reconnect(client, AGENT, "moving", 0)
    assert [f.id for f in seen + rest] == list(range(1, len(seen) + len(rest) + 1))
    assert [f.raw for f in seen + rest] == [f.raw for f in whole]
    assert rest[-1].done and rest[-1].data["status"] == "completed"


async def test_a_resume_sent_to_another_replica_works(cluster: Cluster, tool_log: Path) -> None:
    """An approval asked on A is decided on B: the tool runs once, the run completes."""
    first, second, _ = cluster.urls
    with anyio.fail_after(60):
        asked = await cluster.send(first, {"message": "delete notes.txt", "contextId": "hitl"})
        assert asked.status_code == 200, asked.text
        assert asked.json()["status"] == "suspended"
        decision = {"interruptId": asked.json()["interrupt"]["id"], "decision": {"approved": True}}
        resumed = await cluster.send(second, {"contextId": "hitl", "resume": decision})
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["status"] == "completed"
    assert tool_runs(tool_log) == ["delete_file notes.txt"]


async def test_one_idempotency_key_on_two_replicas_runs_once(
    cluster: Cluster, tool_log: Path
) -> None:
    """The same Idempotency-Key sent to two replicas at once runs its turn once."""
    first, second, _ = cluster.urls
    body = {"message": "pause 0.5", "contextId": "idem"}
    headers = {"Idempotency-Key": "key-1"}
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            replies: list[httpx.Response] = []

            async def send(url: str) -> None:
                replies.append(await cluster.send(url, body, headers))

            group.start_soon(send, first)
            group.start_soon(send, second)
    assert [r.status_code for r in replies] == [200, 200], [r.text for r in replies]
    assert replies[0].json()["runId"] == replies[1].json()["runId"]
    assert tool_runs(tool_log) == ["pause 0.5"]
    assert await _history(cluster, "idem") == ["pause 0.5"]


async def test_a_killed_holder_is_taken_over_within_the_lease(processes: Cluster) -> None:
    """SIGKILL of the replica running a long tool: another runs the context within the
    lease time, with every acknowledged turn and a valid history (guarantees 2, 11)."""
    holder = processes.servers[0]
    first, second, _ = processes.urls
    with anyio.fail_after(90):
        kept = await processes.send(first, {"message": "kept", "contextId": "kill"})
        assert kept.status_code == 200, kept.text
        async with httpx.AsyncClient(base_url=first, timeout=30) as client:
            body = {"message": "pause 60", "contextId": "kill"}
            async with client.stream("POST", f"/agents/{AGENT}/stream", json=body) as response:
                async for frame in frames_of(response):
                    if not frame.done and frame.event["type"] == "tool_call":
                        assert holder.kill() == -signal.SIGKILL
                        break
        killed_at = time.monotonic()
        after = await processes.send(second, {"message": "history", "contextId": "kill"})
        took = time.monotonic() - killed_at
    assert after.status_code == 200, after.text
    assert after.json()["text"] == "kept|history"
    assert took < LEASE_SECONDS + 5, f"the takeover took {took:.1f}s"
    assert await _history(processes, "kill") == ["kept", "history"]


async def test_a_paused_holder_never_commits_after_losing_its_lease(
    processes: Cluster, tool_log: Path
) -> None:
    """SIGSTOP past the lease, a turn on another replica, SIGCONT: the late turn is lost."""
    holder = processes.servers[0]
    assert holder.process is not None
    first, second, _ = processes.urls
    with anyio.fail_after(90):
        async with httpx.AsyncClient(base_url=first, timeout=60) as client:
            body = {"message": "pause 1", "contextId": "stop"}
            async with client.stream("POST", f"/agents/{AGENT}/stream", json=body) as response:
                async for frame in frames_of(response):
                    if not frame.done and frame.event["type"] == "tool_call":
                        holder.process.send_signal(signal.SIGSTOP)
                        break
        await anyio.sleep(LEASE_SECONDS + 1)
        other = await processes.send(second, {"message": "history", "contextId": "stop"})
        assert other.status_code == 200, other.text
        holder.process.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 20
        while "pause 1.0" not in tool_runs(tool_log) and time.monotonic() < deadline:
            await anyio.sleep(0.1)  # the paused tool finishes, its turn tries to commit
        await anyio.sleep(1)
    assert other.json()["text"] == "history"
    assert await _history(processes, "stop") == ["history"]


async def test_a_flushed_redis_mid_stream_loses_no_frame(processes: Cluster) -> None:
    """Redis forgets everything mid-run: a reconnect on B still gets every frame once."""
    first, second, _ = processes.urls
    seen: list[Frame] = []
    with anyio.fail_after(60):
        async with httpx.AsyncClient(base_url=first, timeout=30) as client:
            body = {"message": "slow 4", "contextId": "flush"}
            async with client.stream("POST", f"/agents/{AGENT}/stream", json=body) as response:
                async for frame in frames_of(response):
                    seen.append(frame)
                    if len(seen) == 3:
                        break
        await asyncio.to_thread(_flush, processes.redis_url)  # this test's own database
        await anyio.sleep(1.5)  # the holder writes the run's pointer again within a second
        async with httpx.AsyncClient(base_url=second, timeout=30) as client:
            rest = await reconnect(client, AGENT, "flush", seen[-1].id)
    assert [f.id for f in seen + rest] == list(range(1, len(seen) + len(rest) + 1))
    assert rest[-1].done and rest[-1].data["status"] == "completed"


def _flush(url: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()
