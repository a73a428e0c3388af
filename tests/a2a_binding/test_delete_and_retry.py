"""A deleted context's tasks are gone; a message sent again with its id runs once
(unless deduplication is turned off)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, Task
from a2a.utils.errors import TaskNotFoundError

from a2a_binding import a2a_client, base_url, response_text, send, user_message
from agentkeel.server_settings import A2ASettings, ServerSettings
from agentkeel.storage.file import LocalFileStorage
from e2e import tool_runs
from e2e.conftest import StartServer

pytestmark = pytest.mark.anyio
VERSION = {"A2A-Version": "1.0"}
SECRET = "my bank pin is 4711"


def stored_text(folder: Path) -> str:
    """Every stored file's name and content, joined (what a disk search would find)."""
    parts = []
    for path in sorted(folder.rglob("*")):
        parts.append(path.name)
        if path.is_file():
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


async def test_delete_removes_the_contexts_tasks_from_every_answer_and_the_disk(
    start_server: StartServer, tmp_path: Path
) -> None:
    folder = tmp_path / "sessions"
    with start_server(storage=LocalFileStorage(folder)) as url:
        async with a2a_client(url) as (client, _):
            doomed = await send(client, user_message(SECRET))
            kept = await send(client, user_message("keep me"))
            assert SECRET in stored_text(folder) and doomed.context_id in stored_text(folder)
            async with httpx.AsyncClient(base_url=url) as http:
                deleted = await http.delete(f"/agents/scripted/contexts/{doomed.context_id}")
                assert deleted.status_code == 204
                on_disk = stored_text(folder)
                assert SECRET not in on_disk and doomed.context_id not in on_disk
                assert "keep me" in on_disk
                rpc = {
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "GetTask",
                    "params": {"id": doomed.id},
                }
                raw = (await http.post(base_url(url), json=rpc, headers=VERSION)).json()
            assert raw["error"]["code"] == -32001  # TaskNotFoundError on the JSON-RPC wire
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=doomed.id))
            listed = await client.list_tasks(ListTasksRequest())
            assert [task.id for task in listed.tasks] == [kept.id]
            by_context = await client.list_tasks(ListTasksRequest(context_id=doomed.context_id))
            assert not by_context.tasks
            again = await send(client, user_message("history", context_id=doomed.context_id))
            assert response_text(again) == "history"  # the id starts a new conversation


async def test_a_message_sent_ten_times_at_once_runs_one_task(
    server_url: str, tool_log: Path
) -> None:
    message = user_message("secret", context_id="ctx-a2a-race", message_id="msg-retried-1")
    tasks: list[Task] = []
    async with a2a_client(server_url) as (client, _):

        async def deliver() -> None:
            tasks.append(await send(client, message))

        async with anyio.create_task_group() as group:
            for _ in range(10):
                group.start_soon(deliver)
        assert len({task.id for task in tasks}) == 1 and len(tasks) == 10
        assert tool_runs(tool_log) == ["lookup SECRET-INPUT-4242"]
        # another message that reuses the id is a message of its own: it runs, as a new
        # task, and is never answered with the first message's task
        other = user_message("other", context_id="ctx-a2a-race", message_id="msg-retried-1")
        other_task = await send(client, other)
    assert other_task.id != tasks[0].id
    assert response_text(other_task) == "echo: other"
    assert tool_runs(tool_log).count("lookup SECRET-INPUT-4242") == 1


async def test_with_deduplication_off_the_same_message_sent_again_runs_again(
    start_server: StartServer, tool_log: Path
) -> None:
    settings = ServerSettings(
        heartbeat_seconds=1.0,
        shutdown_timeout_seconds=5,
        a2a=A2ASettings(deduplicate_messages=False),
    )
    message = user_message("secret", context_id="ctx-a2a-reuse", message_id="msg-reused-1")
    with start_server(settings=settings) as url:
        async with a2a_client(url) as (client, _):
            first = await send(client, message)
            second = await send(client, message)
    assert first.id != second.id
    assert tool_runs(tool_log) == ["lookup SECRET-INPUT-4242"] * 2
