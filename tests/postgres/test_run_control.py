"""Cancel, interrupt and rollback on PostgreSQL: what is stored survives a restart.

The history a cancelled turn leaves is read back by a restarted server (a new process,
so nothing comes from a cache): `interrupt` keeps the cut-off turn, `rollback` leaves no
trace of it, and a cancelled approval never runs its tool.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from e2e import ServerProcess, frames_of, tool_runs, write_framework

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]
SEND = "/agents/scripted/send"


@pytest.fixture
def server(tmp_path: Path, tool_log: Path, pg_url: str) -> Iterator[ServerProcess]:
    del tool_log  # its environment variable reaches the subprocess
    document = {
        "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
        "storage": pg_url,
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 10},
    }
    process = ServerProcess(write_framework(tmp_path, document))
    try:
        yield process
    finally:
        process.stop()


async def taken_over(url: str, context_id: str, policy: str) -> str:
    """m0, then a slow tool turn that a `policy` turn takes over; that turn's text."""
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        await client.post(SEND, json={"message": "m0", "contextId": context_id})
        body = {"message": "pause 30", "contextId": context_id}
        async with client.stream("POST", "/agents/scripted/stream", json=body) as response:
            frames = frames_of(response)
            with anyio.fail_after(20):
                async for frame in frames:
                    if not frame.done and frame.event["type"] == "tool_call":
                        break
                second = {"message": "history", "contextId": context_id, "multitask": policy}
                taken = await client.post(SEND, json=second)
                rest = [frame async for frame in frames]
    assert rest[-1].data["status"] == "cancelled"
    text = taken.json()["text"]
    assert isinstance(text, str)
    return text


async def history(url: str, context_id: str) -> str:
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        response = await client.post(SEND, json={"message": "history", "contextId": context_id})
    text = response.json()["text"]
    assert isinstance(text, str)
    return text


async def test_interrupt_and_rollback_are_stored_as_they_said(
    server: ServerProcess, tool_log: Path
) -> None:
    url = server.start()
    kept = await taken_over(url, "ctx-pg-interrupt", "interrupt")
    dropped = await taken_over(url, "ctx-pg-rollback", "rollback")
    server.stop()
    url = server.start()  # a new process: the histories come from PostgreSQL
    after_interrupt = await history(url, "ctx-pg-interrupt")
    after_rollback = await history(url, "ctx-pg-rollback")
    assert kept == "m0|pause 30|history"
    assert dropped == "m0|history"
    assert after_interrupt == "m0|pause 30|history|history"
    assert after_rollback == "m0|history|history"
    assert tool_runs(tool_log) == []


async def test_a_cancelled_approval_stays_cancelled_after_a_restart(
    server: ServerProcess, tool_log: Path
) -> None:
    url = server.start()
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        body = {"message": "delete notes.txt", "contextId": "ctx-pg-approval"}
        suspended = (await client.post(SEND, json=body)).json()
    server.stop()
    url = server.start()  # the suspended run comes back from its checkpoint
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        cancelled = await client.post("/agents/scripted/contexts/ctx-pg-approval/cancel")
        again = await client.post("/agents/scripted/contexts/ctx-pg-approval/cancel")
        later = await client.post(SEND, json={"message": "hi", "contextId": "ctx-pg-approval"})
    assert suspended["status"] == "suspended"
    assert cancelled.status_code == 202 and cancelled.json()["runId"] == suspended["runId"]
    assert again.status_code == 409 and again.json()["error"]["code"] == "no_active_run"
    assert later.json()["status"] == "completed"
    assert tool_runs(tool_log) == []
