"""Losing a replica with turns on it (SPEC 9, guarantee 11): what was acknowledged runs.

A turn waiting in line on the replica that dies was never acknowledged (its request
answers when it starts, or ends): its client gets a connection error, and its retry
with the same Idempotency-Key on another replica runs it, exactly once, also when two
retries race. Three real processes on one PostgreSQL schema, on Redis or on PostgreSQL
alone; each is stopped by its pid.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from e2e import frames_of, tool_runs
from many_replicas.cluster import AGENT, Cluster
from many_replicas.conftest import cluster_framework, three_processes
from many_replicas.test_replicas import _history

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(180)]


@pytest.fixture(params=["redis", "postgresql-only"])
def three(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tool_log: Path,
    pg_url: str,
    redis_db_url: str,
    redis_prefix: str,
) -> Iterator[Cluster]:
    """Three replicas as three processes, sharing their claims through Redis or PostgreSQL."""
    del tool_log
    redis_url = redis_db_url if request.param == "redis" else None
    framework = cluster_framework(tmp_path, pg_url, redis_url, redis_prefix)
    with three_processes(framework, request.param, pg_url, redis_db_url) as cluster:
        yield cluster


async def test_a_queued_turn_of_a_killed_replica_runs_once_on_retry(
    three: Cluster, tool_log: Path
) -> None:
    """B runs a long turn; a turn queued behind it on A dies with A (its client sees the
    connection break); two retries with its Idempotency-Key, on B and C at once, run it
    once, after B's turn, and both answer its result."""
    dying = three.servers[0]
    first, second, third = three.urls
    queued = {"message": "pause 0.3", "contextId": "line"}
    headers = {"Idempotency-Key": "queued-1"}
    broke: list[BaseException] = []
    retries: list[httpx.Response] = []

    async def queue_on_the_dying_replica() -> None:
        try:
            await three.send(first, queued, headers)
        except httpx.TransportError as exc:  # the process went away under the request
            broke.append(exc)

    async def retry(url: str) -> None:
        retries.append(await three.send(url, queued, headers))

    with anyio.fail_after(90):
        async with anyio.create_task_group() as group:
            group.start_soon(three.send, second, {"message": "pause 4", "contextId": "line"})
            await _wait_for(three, "SELECT count(*) FROM {s}.lease_rows WHERE held")  # B runs
            group.start_soon(queue_on_the_dying_replica)
            await _wait_for(three, "SELECT count(*) FROM {s}.lease_line")  # A's turn waits
            assert dying.kill() < 0
        async with anyio.create_task_group() as group:
            group.start_soon(retry, second)
            group.start_soon(retry, third)
    assert len(broke) == 1, "the client of the killed replica must see its connection break"
    assert [r.status_code for r in retries] == [200, 200], [r.text for r in retries]
    assert retries[0].json()["runId"] == retries[1].json()["runId"]
    assert retries[0].json()["status"] == "completed"
    assert tool_runs(tool_log) == ["pause 4.0", "pause 0.3"]
    assert await _history(three, "line") == ["pause 4", "pause 0.3"]


async def _wait_for(cluster: Cluster, count: str) -> None:
    """Until the `count` query over the coordination's tables is above zero."""
    storage = cluster.storage()
    await storage.open()
    try:
        while True:
            async with storage._connection() as conn:
                row = await (await conn.execute(storage._sql(count))).fetchone()
            if row is not None and int(row[0]) > 0:
                return
            await anyio.sleep(0.05)
    finally:
        await storage.close()


async def test_a_started_turn_of_a_killed_replica_is_reported_failed(three: Cluster) -> None:
    """A's stream started (acknowledged), then A dies: the retry with its key answers the
    run failed, the next turn (on B) records it failed, and the history never has it."""
    dying = three.servers[0]
    first, second, third = three.urls
    body = {"message": "pause 60", "contextId": "gone"}
    headers = {"Idempotency-Key": "started-1"}
    with anyio.fail_after(90):
        async with (
            httpx.AsyncClient(base_url=first, timeout=30) as client,
            client.stream("POST", f"/agents/{AGENT}/stream", json=body, headers=headers) as started,
        ):
            assert started.status_code == 200
            async for frame in frames_of(started):
                if not frame.done and frame.event["type"] == "tool_call":
                    run_id = str(frame.data["runId"])
                    assert dying.kill() < 0
                    break
        retry = await three.send(third, body, headers)
        after = await three.send(second, {"message": "history", "contextId": "gone"})
    assert retry.status_code == 200, retry.text
    assert retry.json()["runId"] == run_id and retry.json()["status"] == "failed"
    assert retry.json()["error"]["code"] == "concurrent_write"
    assert after.status_code == 200, after.text
    assert after.json()["text"] == "history"
    storage = three.storage()
    await storage.open()
    try:
        record = await storage.get_run(three.key("gone"), run_id)
    finally:
        await storage.close()
    assert record is not None and record.status == "failed"
    assert record.error is not None and record.error.code == "concurrent_write"
    assert await _history(three, "gone") == ["history"]
