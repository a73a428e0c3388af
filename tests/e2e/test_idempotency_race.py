"""Requests that arrive at the same instant with one Idempotency-Key run the turn once.

A client retrying a request that looked stuck often sends the retry before the first
request reached its run; the server must still run the turn once and give every
request that run's result (or stream). The server stores sessions in files, whose
reads let other requests in while one is being registered.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from agentkeel.storage.file import LocalFileStorage
from e2e import Frame, stream_turn, tool_runs
from e2e.conftest import StartServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def file_server(start_server: StartServer, tmp_path: Path) -> Iterator[str]:
    """The scripted agent with its sessions in files."""
    with start_server(storage=LocalFileStorage(tmp_path / "sessions")) as url:
        yield url


SEND = "/agents/scripted/send"
COPIES = 10


async def test_ten_sends_with_one_key_at_once_run_one_turn(
    file_server: str, tool_log: Path
) -> None:
    answers: list[httpx.Response] = []
    body = {"message": "secret", "contextId": "ctx-race-send"}
    async with httpx.AsyncClient(base_url=file_server, timeout=30) as client:

        async def send() -> None:
            answers.append(await client.post(SEND, json=body, headers={"Idempotency-Key": "k1"}))

        async with anyio.create_task_group() as group:
            for _ in range(COPIES):
                group.start_soon(send)
        history = await client.post(
            SEND, json={"message": "history", "contextId": body["contextId"]}
        )
    assert [answer.status_code for answer in answers] == [200] * COPIES
    assert len({answer.json()["runId"] for answer in answers}) == 1
    assert tool_runs(tool_log) == ["lookup SECRET-INPUT-4242"]
    assert history.json()["text"] == "secret|history"


async def test_ten_streams_with_one_key_at_once_follow_one_run(
    file_server: str, tool_log: Path
) -> None:
    streams: list[list[Frame]] = []
    body = {"message": "secret", "contextId": "ctx-race-stream"}
    async with httpx.AsyncClient(base_url=file_server, timeout=30) as client:

        async def stream() -> None:
            streams.append(await stream_turn(client, "scripted", body, {"Idempotency-Key": "k2"}))

        async with anyio.create_task_group() as group:
            for _ in range(COPIES):
                group.start_soon(stream)
    assert len(streams) == COPIES
    assert {frame.data["runId"] for frames in streams for frame in frames} == {
        streams[0][0].data["runId"]
    }
    assert all(frames[-1].done and frames[-1].data["status"] == "completed" for frames in streams)
    assert tool_runs(tool_log) == ["lookup SECRET-INPUT-4242"]


async def test_a_key_sent_at_once_with_another_body_is_refused(file_server: str) -> None:
    answers: dict[str, httpx.Response] = {}
    async with httpx.AsyncClient(base_url=file_server, timeout=30) as client:

        async def send(message: str) -> None:
            answers[message] = await client.post(
                SEND,
                json={"message": message, "contextId": "ctx-race-reuse"},
                headers={"Idempotency-Key": "k3"},
            )

        async with anyio.create_task_group() as group:
            group.start_soon(send, "one")
            group.start_soon(send, "two")
        history = await client.post(
            SEND, json={"message": "history", "contextId": "ctx-race-reuse"}
        )
    assert sorted(answer.status_code for answer in answers.values()) == [200, 422]
    [(won, _)] = [(m, a) for m, a in answers.items() if a.status_code == 200]
    [refused] = [a for a in answers.values() if a.status_code == 422]
    assert refused.json()["error"]["code"] == "idempotency_key_reused"
    assert answers[won].json()["text"] == f"echo: {won}"
    assert history.json()["text"] == f"{won}|history"
