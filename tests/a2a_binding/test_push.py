"""Push notifications: a real webhook on loopback gets a task's updates, across a restart.

The receiver is a small Starlette app on uvicorn in a thread; the agent server is
``agentkeel serve`` in a subprocess with file storage, so the webhook config must come
back from storage after the restart for the completion to be pushed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import (
    GetTaskPushNotificationConfigRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a_binding import a2a_client, response_text, send, user_message
from agentkeel.a2a.push import StoredPushConfigs, check_webhook_url
from agentkeel.messages import JSONObject
from agentkeel.server_settings import A2ASettings, ServerSettings
from agentkeel.storage.memory import InMemoryStorage
from e2e import TOOL_LOG, ServerProcess, write_framework
from e2e.conftest import StartServer
from fakes.server import run_asgi_server

pytestmark = pytest.mark.anyio


@dataclass(frozen=True, slots=True)
class Delivery:
    """One POST the webhook received."""

    headers: dict[str, str]
    body: JSONObject


class Webhook:
    """A webhook receiver; the first `failures` POSTs are answered 503."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.attempts = 0
        self.received: list[Delivery] = []
        self._lock = threading.Lock()
        self.app = Starlette(routes=[Route("/hook", self._hook, methods=["POST"])])

    async def _hook(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.attempts += 1
            if self.attempts <= self.failures:
                return JSONResponse({"error": "try later"}, status_code=503)
            self.received.append(Delivery(dict(request.headers), body))
        return Response(status_code=204)

    def states(self) -> list[str]:
        """The states of the status updates received, in order."""
        with self._lock:
            return [
                str(item.body["statusUpdate"]["status"]["state"])  # type: ignore[index,call-overload]
                for item in self.received
                if "statusUpdate" in item.body
            ]

    async def wait_for(self, state: str, timeout: float = 20.0) -> Delivery:
        """The first status update to `state` (polls the received list)."""
        with anyio.fail_after(timeout):
            while True:
                with self._lock:
                    for item in self.received:
                        update = item.body.get("statusUpdate")
                        if isinstance(update, dict) and update["status"]["state"] == state:  # type: ignore[index,call-overload]
                            return item
                await anyio.sleep(0.05)


@pytest.fixture
def webhook() -> Iterator[tuple[Webhook, str]]:
    hook = Webhook()
    with run_asgi_server(hook.app) as url:
        yield hook, url + "/hook"


async def test_a_webhook_gets_input_required_then_completed_across_a_restart(
    tmp_path: Path, tool_log: Path, webhook: tuple[Webhook, str]
) -> None:
    hook, hook_url = webhook
    framework = write_framework(
        tmp_path,
        {
            "agents": {"scripted": {"factory": "e2e:scripted_agent"}},
            "sessionDir": "sessions",
            "checkpointer": {"dir": "checkpoints"},
            "server": {"a2a": {"allowPrivateWebhooks": True}},
        },
    )
    server = ServerProcess(framework, env={TOOL_LOG: str(tool_log)})
    config = TaskPushNotificationConfig(id="hook", url=hook_url, token="tok-1")
    config.authentication.scheme, config.authentication.credentials = "Bearer", "s3cret"
    try:
        url = server.start()
        async with a2a_client(url) as (client, _):
            request = SendMessageRequest(
                message=user_message("delete /tmp/pushed.txt"),
                configuration=SendMessageConfiguration(task_push_notification_config=config),
            )
            [response] = [item async for item in client.send_message(request)]
        waiting = response.task
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        asked = await hook.wait_for("TASK_STATE_INPUT_REQUIRED")
        assert asked.headers["authorization"] == "Bearer s3cret"
        assert asked.headers["x-a2a-notification-token"] == "tok-1"
        update = asked.body["statusUpdate"]
        assert isinstance(update, dict) and update["taskId"] == waiting.id
        question = waiting.status.message.parts[0].text
        assert question.startswith("Run delete_file")
        assert update["status"]["message"]["parts"][0]["text"] == question  # type: ignore[index,call-overload]
        assert hook.states() == ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"]
        server.stop()

        url = server.start()
        async with a2a_client(url) as (client, _):
            stored = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=waiting.id, id="hook")
            )
            assert stored.url == hook_url
            done = await send(client, user_message(data={"approved": True}, task_id=waiting.id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        await hook.wait_for("TASK_STATE_COMPLETED")
    finally:
        server.stop()
    assert hook.states() == [
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    answer = hook.received[-2].body["artifactUpdate"]  # the whole answer, before COMPLETED
    assert isinstance(answer, dict) and answer["lastChunk"] is True
    assert answer["artifact"]["parts"][0]["text"] == response_text(done)  # type: ignore[index,call-overload]
    assert response_text(done) == "tools said delete_file success"


async def test_a_failing_webhook_is_tried_again(start_server: StartServer) -> None:
    hook = Webhook(failures=2)
    settings = ServerSettings(heartbeat_seconds=1.0, a2a=A2ASettings(allow_private_webhooks=True))
    with run_asgi_server(hook.app) as hook_base, start_server(settings=settings) as url:
        async with a2a_client(url) as (client, _):
            waiting = await send(client, user_message("delete /tmp/retry.txt"))
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=waiting.id, url=hook_base + "/hook")
            )
            await send(client, user_message(data={"approved": True}, task_id=waiting.id))
            await hook.wait_for("TASK_STATE_COMPLETED")
    assert hook.attempts == len(hook.received) + 2
    assert hook.states()[0] == "TASK_STATE_WORKING"  # the first, delivered on its 3rd try


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest",
        "http://[::1]/hook",
        "ftp://hooks.example.com/x",
        "not a url",
    ],
)
def test_webhooks_to_private_addresses_are_refused_by_default(url: str) -> None:
    with pytest.raises(InvalidParamsError):
        check_webhook_url(url, allow_private=False)


def test_public_webhooks_pass_and_private_ones_when_allowed() -> None:
    check_webhook_url("https://hooks.example.com/a2a", allow_private=False)
    check_webhook_url("http://8.8.8.8/hook", allow_private=False)
    check_webhook_url("http://127.0.0.1:8080/hook", allow_private=True)
    with pytest.raises(InvalidParamsError):
        check_webhook_url("file:///etc/passwd", allow_private=True)


async def test_a_webhook_another_replica_registered_gets_the_resumption(
    start_server: StartServer, webhook: tuple[Webhook, str]
) -> None:
    hook, hook_url = webhook
    storage = InMemoryStorage()  # shared, as replicas share their storage
    settings = ServerSettings(heartbeat_seconds=1.0, a2a=A2ASettings(allow_private_webhooks=True))
    with start_server(storage=storage, settings=settings) as url:
        async with a2a_client(url) as (client, _):
            waiting = await send(client, user_message("delete /tmp/replica.txt"))
            other_replica = StoredPushConfigs(storage, "scripted")
            await other_replica.set_info(
                waiting.id, TaskPushNotificationConfig(url=hook_url), ServerCallContext()
            )
            await send(client, user_message(data={"approved": True}, task_id=waiting.id))
        await hook.wait_for("TASK_STATE_COMPLETED")
    assert hook.states() == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
