"""GetTask, ListTasks, CancelTask, SubscribeToTask, and tasks scoped to their principal."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from a2a_binding import a2a_client, base_url, response_text, send, user_message
from agentkeel.auth_settings import AuthSettings
from agentkeel.framework import ServerSettings
from agentkeel.server import A2AServer
from e2e import scripted_agent, serve_in_thread

pytestmark = pytest.mark.anyio

VERSION = {"A2A-Version": "1.0"}


async def test_get_and_list_tasks(server_url: str) -> None:
    async with a2a_client(server_url) as (client, _):
        first = await send(client, user_message("one"))
        context_id = first.context_id
        second = await send(client, user_message("two", context_id=context_id))
        third = await send(client, user_message("three", context_id=context_id))
        other = await send(client, user_message("elsewhere"))

        got = await client.get_task(GetTaskRequest(id=second.id))
        assert got.status.state == TaskState.TASK_STATE_COMPLETED
        assert response_text(got) == "echo: two"
        assert [m.parts[0].text for m in got.history] == ["two"]
        bare = await client.get_task(GetTaskRequest(id=second.id, history_length=0))
        assert not bare.history

        listed = await client.list_tasks(ListTasksRequest(context_id=context_id))
        assert [task.id for task in listed.tasks] == [third.id, second.id, first.id]
        assert listed.total_size == 3 and listed.next_page_token == ""
        assert all(not task.artifacts for task in listed.tasks)

        page = await client.list_tasks(ListTasksRequest(context_id=context_id, page_size=2))
        assert [task.id for task in page.tasks] == [third.id, second.id]
        rest = await client.list_tasks(
            ListTasksRequest(context_id=context_id, page_size=2, page_token=page.next_page_token)
        )
        assert [task.id for task in rest.tasks] == [first.id] and rest.next_page_token == ""

        full = await client.list_tasks(
            ListTasksRequest(context_id=context_id, include_artifacts=True)
        )
        assert [response_text(task) for task in full.tasks] == [
            "echo: three",
            "echo: two",
            "echo: one",
        ]
        everything = await client.list_tasks(ListTasksRequest())
        assert {task.id for task in everything.tasks} == {first.id, second.id, third.id, other.id}
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="run-0123456789abcdef01234567"))


async def test_cancel_a_working_task(server_url: str) -> None:
    async with a2a_client(server_url) as (client, _):
        task = await send(client, user_message("slow 5"), return_immediately=True)
        assert task.status.state == TaskState.TASK_STATE_WORKING
        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        got = await client.get_task(GetTaskRequest(id=task.id))
        assert got.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task.id))
        after = await send(client, user_message("history", context_id=task.context_id))
        assert response_text(after) == "history"  # the cancelled turn left no half message


async def test_subscribe_follows_a_working_task_to_its_end(server_url: str) -> None:
    async with a2a_client(server_url) as (client, _):
        task = await send(client, user_message("slow 1"), return_immediately=True)
    async with a2a_client(server_url, streaming=True) as (client, _):
        seen = [item async for item in client.subscribe(SubscribeToTaskRequest(id=task.id))]
    assert seen[0].HasField("task") and seen[0].task.id == task.id
    assert seen[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    text = "".join(
        item.artifact_update.artifact.parts[0].text
        for item in seen
        if item.HasField("artifact_update")
    )
    assert response_text(seen[0].task) + text == ("slowly " * 10).strip()
    async with a2a_client(server_url, streaming=True) as (client, _):
        with pytest.raises(UnsupportedOperationError, match="terminal"):
            [item async for item in client.subscribe(SubscribeToTaskRequest(id=task.id))]


ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdefgh"


@pytest.fixture
def shared_server(tool_log: object) -> Iterator[str]:
    """A server with API keys on: every caller is a principal of their own."""
    del tool_log
    auth = AuthSettings(api_keys={"alice": ALICE_KEY, "bob": BOB_KEY})
    settings = ServerSettings(heartbeat_seconds=1.0, shutdown_timeout_seconds=5, auth=auth)
    with serve_in_thread(A2AServer(scripted_agent, name="scripted", settings=settings).app) as url:
        yield url


async def test_credentials_are_declared_and_required(shared_server: str) -> None:
    async with httpx.AsyncClient() as http:
        card = await http.get(base_url(shared_server) + "/.well-known/agent-card.json")
        assert card.status_code == 200  # discovery needs no credentials
        assert set(card.json()["securitySchemes"]) == {"bearer", "apiKey"}
        assert (
            card.json()["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"] == "X-API-Key"
        )
        request = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        refused = await http.post(base_url(shared_server), json=request, headers=VERSION)
        assert refused.status_code == 401
        allowed = await http.post(
            base_url(shared_server), json=request, headers={**VERSION, "X-API-Key": ALICE_KEY}
        )
        assert allowed.json()["result"]["tasks"] == []


async def test_tasks_and_contexts_belong_to_their_principal(shared_server: str) -> None:
    alice = {"Authorization": f"Bearer {ALICE_KEY}"}
    bob = {"Authorization": f"Bearer {BOB_KEY}"}
    async with a2a_client(shared_server, headers=alice) as (client, _):
        mine = await send(client, user_message("alice's secret"))
    async with a2a_client(shared_server, headers=bob) as (client, _):
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=mine.id))
        with pytest.raises(TaskNotFoundError):
            await client.cancel_task(CancelTaskRequest(id=mine.id))
        assert not (await client.list_tasks(ListTasksRequest())).tasks
        same_id = await send(client, user_message("history", context_id=mine.context_id))
        assert response_text(same_id) == "history"  # bob's own context of that name
    async with a2a_client(shared_server, headers=alice) as (client, _):
        again = await send(client, user_message("history", context_id=mine.context_id))
        assert response_text(again) == "alice's secret|history"
