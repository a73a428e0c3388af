"""Human in the loop over A2A (across restarts), published artifacts and direct replies."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from a2a_binding import a2a_client, events, response_text, send, status_data, user_message
from agentkeel.server import create_app
from e2e import TOOL_LOG, ServerProcess, serve_in_thread, tool_runs, write_framework

pytestmark = pytest.mark.anyio

CONFORMANCE = Path(__file__).resolve().parents[2] / "examples" / "conformance" / "framework.json"


async def test_an_approval_round_trip_across_restarts(tmp_path: Path, tool_log: Path) -> None:
    framework = write_framework(
        tmp_path,
        {
            "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
            "sessionDir": "sessions",
            "checkpointer": {"dir": "checkpoints"},
        },
    )
    server = ServerProcess(framework, env={TOOL_LOG: str(tool_log)})
    try:
        url = server.start()
        async with a2a_client(url) as (client, _):
            waiting = await send(client, user_message("delete /tmp/a2a.txt"))
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        interrupt = status_data(waiting)
        assert isinstance(interrupt, dict) and isinstance(interrupt["interrupt"], dict)
        assert {k: v for k, v in interrupt["interrupt"].items() if k != "id"} == {
            "kind": "approval",
            "tool": "delete_file",
            "prompt": 'Run delete_file with {"path": "/tmp/a2a.txt"}',
        }
        assert waiting.status.message.parts[0].text == (
            'Run delete_file with {"path": "/tmp/a2a.txt"}\nApprove? Answer yes or no.'
        )
        server.stop()

        url = server.start()
        async with a2a_client(url) as (client, _):
            again = await client.get_task(GetTaskRequest(id=waiting.id))
            assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert status_data(again) == interrupt
            done = await send(client, user_message(data={"approved": True}, task_id=waiting.id))
        assert (done.id, done.context_id) == (waiting.id, waiting.context_id)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert response_text(done) == "tools said delete_file success"
        assert tool_runs(tool_log) == ["delete_file /tmp/a2a.txt"]
        server.stop()

        url = server.start()
        async with a2a_client(url) as (client, _):
            final = await client.get_task(GetTaskRequest(id=waiting.id))
        assert final.status.state == TaskState.TASK_STATE_COMPLETED
        roles = [MessageToDict(m)["role"] for m in final.history]
        assert roles == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]
        assert MessageToDict(final.history[2])["parts"] == [{"data": {"approved": True}}]
    finally:
        server.stop()


async def test_a_rejection_resumed_on_a_stream(server_url: str, tool_log: Path) -> None:
    async with a2a_client(server_url) as (client, _):
        waiting = await send(client, user_message("delete /tmp/keep.txt"))
        with pytest.raises(InvalidParamsError, match="waits for a decision"):
            await send(client, user_message("hello", context_id=waiting.context_id))
        with pytest.raises(InvalidParamsError, match="approval needs"):
            await send(client, user_message("maybe", task_id=waiting.id))
    async with a2a_client(server_url, streaming=True) as (client, _):
        answer = user_message(data={"approved": False, "reason": "keep it"}, task_id=waiting.id)
        responses = await events(client, answer)
    assert responses[0].task.id == waiting.id
    assert responses[0].task.status.state == TaskState.TASK_STATE_WORKING
    assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    text = "".join(
        r.artifact_update.artifact.parts[0].text for r in responses if r.HasField("artifact_update")
    )
    assert text == "tools said delete_file error"
    assert tool_runs(tool_log) == []


async def test_a_task_waiting_for_input_can_be_cancelled(server_url: str, tool_log: Path) -> None:
    async with a2a_client(server_url) as (client, _):
        waiting = await send(client, user_message("delete /tmp/never.txt"))
        cancelled = await client.cancel_task(CancelTaskRequest(id=waiting.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        after = await send(client, user_message("hello", context_id=waiting.context_id))
        assert response_text(after) == "echo: hello"
    assert tool_runs(tool_log) == []


async def test_input_artifacts_and_direct_replies_of_the_conformance_agent() -> None:
    with serve_in_thread(create_app(CONFORMANCE)) as url:
        async with a2a_client(url, agent="conformance") as (client, card):
            assert [skill.id for skill in card.skills] == ["ask_for_input", "attach"]
            asking = await send(client, user_message("q", message_id="tck-input-required-1"))
            assert asking.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            more = user_message("first", task_id=asking.id, message_id="tck-input-required-2")
            still = await send(client, more)
            assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            done = await send(client, user_message("second", task_id=asking.id))
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            texts = [m.parts[0].text for m in done.history]
            assert texts == ["q", "Please provide more input.", "first"] + texts[3:]
            assert texts[3:] == ["Please provide more input.", "second"]

            data = await send(client, user_message("d", message_id="tck-artifact-data-1"))
            [artifact] = data.artifacts
            assert MessageToDict(artifact.parts[0]) == {"data": {"key": "value", "count": 42}}
            stored = await client.get_task(GetTaskRequest(id=data.id))
            assert [a.artifact_id for a in stored.artifacts] == [artifact.artifact_id]

            reply = await events(client, user_message("m", message_id="tck-message-response-1"))
            assert reply[0].HasField("message")
            assert reply[0].message.parts[0].text == "Direct message response"

        async with a2a_client(url, agent="conformance", streaming=True) as (client, _):
            streamed = await events(
                client, user_message("f", message_id="tck-stream-artifact-file")
            )
        files = [
            r.artifact_update.artifact
            for r in streamed
            if r.HasField("artifact_update")
            and r.artifact_update.artifact.artifact_id != "response"
        ]
        assert [(f.parts[0].filename, f.parts[0].raw) for f in files] == [
            ("output.txt", b"Generated file content")
        ]
        assert streamed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_subscription_to_a_waiting_task_follows_its_resumption(server_url: str) -> None:
    async with a2a_client(server_url) as (client, _):
        waiting = await send(client, user_message("delete /tmp/later.txt"))
    seen: list[StreamResponse] = []

    async def subscribe() -> None:
        async with a2a_client(server_url, streaming=True) as (client, _):
            request = SubscribeToTaskRequest(id=waiting.id)
            seen.extend([item async for item in client.subscribe(request)])

    async with anyio.create_task_group() as group:
        group.start_soon(subscribe)
        await anyio.sleep(0.5)
        async with a2a_client(server_url) as (client, _):
            await send(client, user_message("yes", task_id=waiting.id))
    assert seen[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
