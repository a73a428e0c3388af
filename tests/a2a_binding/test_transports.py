"""Every A2A method over each of the three transports, with the official SDK client.

The same server declares JSON-RPC, HTTP+JSON and gRPC (``server.a2a.grpcPort: 0``);
each test picks one interface of its card, as a client restricted to that binding
does, and drives the method through it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import anyio
import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError

from a2a_binding import a2a_client, base_url, events, response_text, send, user_message
from agentkeel.server_settings import A2ASettings, ServerSettings
from e2e.conftest import StartServer

pytestmark = pytest.mark.anyio

BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


@pytest.fixture
def url(start_server: StartServer) -> Iterator[str]:
    """A server on all three transports (gRPC on a free port)."""
    settings = ServerSettings(
        heartbeat_seconds=1.0, shutdown_timeout_seconds=5, a2a=A2ASettings(grpc_port=0)
    )
    with start_server(settings=settings) as served:
        yield served


async def test_the_card_declares_all_three_interfaces(url: str) -> None:
    async with a2a_client(url) as (_, card):
        interfaces = {item.protocol_binding: item for item in card.supported_interfaces}
    assert list(interfaces) == BINDINGS
    assert interfaces["JSONRPC"].url == base_url(url)
    assert interfaces["HTTP+JSON"].url == base_url(url) + "/v1"
    host, _, port = interfaces["GRPC"].url.rpartition(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert interfaces["GRPC"].tenant == "scripted"
    assert {item.protocol_version for item in interfaces.values()} == {"1.0"}


@pytest.mark.parametrize("binding", BINDINGS)
async def test_send_get_list_and_stream(url: str, binding: str) -> None:
    async with a2a_client(url, binding=binding) as (client, _):
        task = await send(client, user_message("hello"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert response_text(task) == "echo: hello"
        again = await client.get_task(GetTaskRequest(id=task.id, history_length=0))
        assert again.status.state == TaskState.TASK_STATE_COMPLETED and not again.history
        second = await send(client, user_message("history", context_id=task.context_id))
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [item.id for item in listed.tasks] == [second.id, task.id]
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="run-unknown"))
    async with a2a_client(url, binding=binding, streaming=True) as (client, _):
        responses = await events(client, user_message("tokens 3"))
    assert responses[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    chunks = [item.artifact_update for item in responses if item.HasField("artifact_update")]
    assert "".join(chunk.artifact.parts[0].text for chunk in chunks) == "t00 t01 t02 "
    assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_subscribe_follows_a_resumed_task_and_cancel_abandons_one(
    url: str, binding: str
) -> None:
    async with (
        a2a_client(url, binding=binding) as (client, _),
        a2a_client(url, binding=binding, streaming=True) as (streamer, _),
    ):
        waiting = await send(client, user_message("delete /tmp/sub.txt"))
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        seen: list[StreamResponse] = []
        first = anyio.Event()

        async def follow() -> None:
            async for item in streamer.subscribe(SubscribeToTaskRequest(id=waiting.id)):
                seen.append(item)
                first.set()

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(follow)
                await first.wait()
                resumed = user_message(data={"approved": True}, task_id=waiting.id)
                done = await send(client, resumed)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert seen[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

        other = await send(client, user_message("delete /tmp/cancel.txt"))
        cancelled = await client.cancel_task(CancelTaskRequest(id=other.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_push_config_methods_and_the_extended_card(url: str, binding: str) -> None:
    async with a2a_client(url, binding=binding) as (client, _):
        task = await send(client, user_message("hello"))
        config = TaskPushNotificationConfig(
            task_id=task.id, id="hook-1", url="https://hooks.example.com/a2a", token="t-1"
        )
        created = await client.create_task_push_notification_config(config)
        assert (created.id, created.url, created.token) == ("hook-1", config.url, "t-1")
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
        )
        assert got.url == config.url
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [item.id for item in listed.configs] == ["hook-1"]
        for _ in range(2):  # deleting what is gone is no error
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
            )
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert not listed.configs
        with pytest.raises(TaskNotFoundError):
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook-1")
            )
        with pytest.raises(InvalidParamsError):  # loopback: refused by default (SSRF)
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url="http://127.0.0.1:9/hook")
            )
        card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
    assert [skill.id for skill in card.skills] == ["delete_file", "lookup", "pause"]
    assert card.capabilities.push_notifications and card.capabilities.extended_agent_card


async def test_a_rest_body_must_be_declared_json(url: str) -> None:
    message = {"role": "ROLE_USER", "messageId": "m-ct", "parts": [{"text": "hello"}]}
    send_url = base_url(url) + "/v1/message:send"
    async with httpx.AsyncClient() as http:
        refused = await http.post(
            send_url,
            content=json.dumps({"message": message}),
            headers={"Content-Type": "text/plain", "A2A-Version": "1.0"},
        )
        assert refused.status_code == 415
        error = refused.json()["error"]
        assert error["code"] == 415 and "text/plain" in error["message"]
        assert error["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
        accepted = await http.post(
            send_url,
            content=json.dumps({"message": message}),
            headers={"Content-Type": "application/json; charset=utf-8", "A2A-Version": "1.0"},
        )
    assert accepted.status_code == 200
    assert accepted.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
