"""The card, SendMessage, SendStreamingMessage, contexts shared with the native wire, errors."""

from __future__ import annotations

import httpx
import pytest
from a2a.types import TaskArtifactUpdateEvent, TaskState
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

from a2a_binding import (
    a2a_client,
    base_url,
    events,
    response_text,
    send,
    user_message,
)
from agentkeel.framework import ServerSettings
from e2e import SECRET_INPUT, SECRET_OUTPUT
from e2e.conftest import StartServer

pytestmark = pytest.mark.anyio

VERSION = {"A2A-Version": "1.0"}


async def test_the_card_describes_the_agent_and_can_be_cached(server_url: str) -> None:
    card_url = base_url(server_url) + "/.well-known/agent-card.json"
    async with httpx.AsyncClient() as http:
        response = await http.get(card_url)
        assert response.status_code == 200
        assert "max-age=" in response.headers["cache-control"]
        etag = response.headers["etag"]
        again = await http.get(card_url, headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.headers["etag"] == etag
    async with a2a_client(server_url) as (_, card):
        assert card.name == "scripted"
        assert card.description == "A scripted test agent"
        assert card.capabilities.streaming and card.capabilities.push_notifications
        assert card.capabilities.extended_agent_card
        jsonrpc, rest = card.supported_interfaces  # no gRPC port configured
        assert jsonrpc.url == base_url(server_url)
        assert (jsonrpc.protocol_binding, jsonrpc.protocol_version) == ("JSONRPC", "1.0")
        assert rest.url == base_url(server_url) + "/v1"
        assert (rest.protocol_binding, rest.protocol_version) == ("HTTP+JSON", "1.0")
        assert [skill.id for skill in card.skills] == ["delete_file", "lookup", "pause"]
        assert card.skills[0].description.startswith("Pretend to delete a file")


async def test_send_then_continue_with_the_returned_context(server_url: str) -> None:
    async with a2a_client(server_url) as (client, _):
        first = await send(client, user_message("hello"))
        assert first.status.state == TaskState.TASK_STATE_COMPLETED
        assert first.id.startswith("run-") and first.context_id.startswith("ctx-")
        assert response_text(first) == "echo: hello"
        assert [m.parts[0].text for m in first.history] == ["hello"]
        second = await send(client, user_message("history", context_id=first.context_id))
    assert second.context_id == first.context_id and second.id != first.id
    assert response_text(second) == "hello|history"


async def test_a_stream_starts_with_the_task_and_ends_completed(server_url: str) -> None:
    async with a2a_client(server_url, streaming=True) as (client, _):
        responses = await events(client, user_message("tokens 5"))
    assert responses[0].HasField("task")
    assert responses[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    task_id = responses[0].task.id
    chunks: list[TaskArtifactUpdateEvent] = [
        item.artifact_update for item in responses if item.HasField("artifact_update")
    ]
    assert "".join(c.artifact.parts[0].text for c in chunks) == "t00 t01 t02 t03 t04 "
    assert {c.artifact.artifact_id for c in chunks} == {"response"}
    assert not chunks[0].append and all(c.append for c in chunks[1:])
    assert chunks[-1].last_chunk and not any(c.last_chunk for c in chunks[:-1])
    updates = [item.status_update for item in responses if item.HasField("status_update")]
    assert all(update.task_id == task_id for update in updates)
    assert [u.status.state for u in updates] == [
        TaskState.TASK_STATE_WORKING,
        TaskState.TASK_STATE_COMPLETED,
    ]
    assert responses[-1].HasField("status_update")


async def test_tool_activity_is_status_metadata_and_tool_data_stays_home(server_url: str) -> None:
    async with a2a_client(server_url, streaming=True) as (client, _):
        responses = await events(client, user_message("secret"))
    updates = [r.status_update for r in responses if r.HasField("status_update")]
    activity = [MessageToDict(u.metadata)["agentkeel"] for u in updates if u.HasField("metadata")]
    assert [(item["type"], item["name"]) for item in activity] == [
        ("tool_call", "lookup"),
        ("tool_result", "lookup"),
    ]
    assert activity[1]["status"] == "success"
    wire = "".join(MessageToDict(r).__repr__() for r in responses)
    assert SECRET_INPUT not in wire and SECRET_OUTPUT not in wire


async def test_a_conversation_moves_between_the_two_wires(server_url: str) -> None:
    async with (
        a2a_client(server_url) as (client, _),
        httpx.AsyncClient(base_url=server_url) as http,
    ):
        over_a2a = await send(client, user_message("begun over A2A"))
        body = {"message": "history", "contextId": over_a2a.context_id}
        native = (await http.post("/agents/scripted/send", json=body)).json()
        assert native["text"] == "begun over A2A|history"

        started = await http.post("/agents/scripted/send", json={"message": "begun natively"})
        context_id = started.json()["contextId"]
        continued = await send(client, user_message("history", context_id=context_id))
        assert response_text(continued) == "begun natively|history"


async def test_the_endpoint_answers_with_and_without_a_trailing_slash(server_url: str) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "SendMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "a"}]}},
    }
    async with httpx.AsyncClient() as http:
        for url in (base_url(server_url), base_url(server_url) + "/"):
            response = await http.post(url, json=request, headers=VERSION)
            assert response.status_code == 200
            result = response.json()["result"]["task"]
            assert result["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_an_idle_stream_sends_keep_alive_comments(server_url: str) -> None:
    message = {"role": "ROLE_USER", "messageId": "m-2", "parts": [{"text": "pause 2.5"}]}
    request = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    async with httpx.AsyncClient(timeout=30) as http:  # the server's heartbeat is 1 s
        async with http.stream("POST", base_url(server_url), json=request, headers=VERSION) as r:
            body = b"".join([chunk async for chunk in r.aiter_bytes()])
    assert b": keep-alive\n\n" in body
    assert body.rstrip().endswith(b"}}}}") and b"TASK_STATE_COMPLETED" in body.splitlines()[-2]


async def test_protocol_errors(server_url: str) -> None:
    async with a2a_client(server_url) as (client, _):
        done = await send(client, user_message("hello"))
        with pytest.raises(TaskNotFoundError):
            await send(client, user_message("hi", task_id="run-000000000000000000000000"))
        with pytest.raises(UnsupportedOperationError, match="terminal"):
            await send(client, user_message("again", task_id=done.id))
        with pytest.raises(InvalidParamsError, match="another context"):
            await send(client, user_message("x", task_id=done.id, context_id="ctx-other"))
        with pytest.raises(InvalidParamsError):
            await send(client, user_message("x", context_id="../escape"))
    request = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": done.id}}
    async with httpx.AsyncClient() as http:
        response = await http.post(base_url(server_url), json=request)  # no A2A-Version: 0.3
        assert response.json()["error"]["code"] == -32009
        response = await http.post(base_url(server_url), content=b"{nope", headers=VERSION)
        assert response.json()["error"]["code"] == -32700


async def test_the_concurrency_rule_is_the_native_wires(start_server: StartServer) -> None:
    settings = ServerSettings(concurrency="reject", shutdown_timeout_seconds=5)
    with start_server(settings=settings) as url:
        async with a2a_client(url) as (client, _):
            slow = await send(client, user_message("slow 1"), return_immediately=True)
            with pytest.raises(UnsupportedOperationError, match="running a turn"):
                await send(client, user_message("hi", context_id=slow.context_id))
