"""Controlling a run from a replica that does not run it (SPEC 11), as real processes.

A cancel POSTed to B stops the long tool A runs, and the next turn, on C, sends the
provider a history it accepts: a fake OpenAI server that refuses a tool call left
without its result. Each replica is started and stopped by its pid.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from agentkeel.storage.base import SessionKey
from e2e import Frame, ServerProcess, frames_of, tool_runs
from fakes.openai_server import FakeOpenAI, OpenAIStream
from many_replicas.cluster import Cluster
from many_replicas.conftest import _own_copy, cluster_framework

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(180)]

API_KEY = "sk-replica-control"
KEY_ENV = "REPLICA_CONTROL_KEY"


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(api_key=API_KEY)
    with fake.serve():
        yield fake


@pytest.fixture
def gpt_replicas(
    tmp_path: Path,
    tool_log: Path,
    pg_url: str,
    redis_db_url: str,
    redis_prefix: str,
    fake_openai: FakeOpenAI,
) -> Iterator[Cluster]:
    """Three processes serving ``gpt``, an OpenAI agent with the slow ``pause`` tool."""
    del tool_log
    framework = cluster_framework(tmp_path, pg_url, redis_db_url, redis_prefix)
    document = json.loads(framework.read_text(encoding="utf-8"))
    model = {"provider": "openai", "model": "gpt-strict", "baseUrl": fake_openai.base_url}
    document["agents"]["gpt"] = {
        "model": {**model, "apiKeyEnv": KEY_ENV, "maxRetries": 0},
        "tools": ["e2e:pause"],
    }
    framework.write_text(json.dumps(document), encoding="utf-8")
    servers = [
        ServerProcess(_own_copy(framework, index), env={KEY_ENV: API_KEY}) for index in range(3)
    ]
    try:
        urls = [server.start() for server in servers]
        yield Cluster(servers, urls, "processes", pg_url, redis_db_url)
    finally:
        for server in servers:
            server.stop()


async def test_a_cancel_on_b_stops_the_long_tool_on_a(
    gpt_replicas: Cluster, fake_openai: FakeOpenAI, tool_log: Path
) -> None:
    first, second, third = gpt_replicas.urls
    fake_openai.enqueue(
        OpenAIStream()
        .tool_call(0, id="call-1", name="pause", arguments=[json.dumps({"seconds": 60})])
        .reply(),
        OpenAIStream().text("fine").finish("stop").reply(),
    )
    body = {"message": "wait a minute", "contextId": "far"}
    seen: list[Frame] = []
    with anyio.fail_after(60):
        async with (
            httpx.AsyncClient(base_url=first, timeout=30) as on_a,
            httpx.AsyncClient(base_url=second, timeout=30) as on_b,
            on_a.stream("POST", "/agents/gpt/stream", json=body) as response,
        ):
            assert response.status_code == 200
            async for frame in frames_of(response):
                seen.append(frame)
                if not frame.done and frame.event["type"] == "tool_call":
                    cancelled = await on_b.post("/agents/gpt/contexts/far/cancel")
                    assert cancelled.status_code == 202, cancelled.text
        async with httpx.AsyncClient(base_url=third, timeout=30) as on_c:
            after = await on_c.post("/agents/gpt/send", json={"message": "and now?", **body})
    run_id = str(seen[0].data["runId"])
    assert cancelled.json() == {"runId": run_id, "status": "cancelling"}
    assert seen[-1].done and seen[-1].data["status"] == "cancelled"
    assert tool_runs(tool_log) == []  # stopped on A, not left to finish
    storage = gpt_replicas.storage()
    await storage.open()
    try:
        record = await storage.get_run(SessionKey(definition="gpt", context_id="far"), run_id)
    finally:
        await storage.close()
    assert record is not None and record.status == "cancelled"
    assert after.status_code == 200, after.text
    assert after.json()["status"] == "completed" and after.json()["text"] == "fine"
    messages = fake_openai.requests[-1].json["messages"]  # the strict fake took them
    assert isinstance(messages, list)
    roles = [m["role"] for m in messages if isinstance(m, dict)]
    assert roles == ["user", "assistant", "tool", "user"]
