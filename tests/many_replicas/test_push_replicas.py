"""A2A push notifications with three replicas: the replica running a task delivers them.

The configs are in the shared storage, and a config's write is announced through the
fan-out, so the replica running the task (not the one that took the config) reads
them and POSTs the task's updates to a real webhook receiver on loopback. Each
replica is started and stopped by its pid.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from a2a.types import (
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)

from a2a_binding import a2a_client, send, user_message
from a2a_binding.test_push import Webhook
from e2e import tool_runs
from fakes.server import run_asgi_server
from many_replicas.cluster import Cluster
from many_replicas.conftest import cluster_framework, three_processes

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis, pytest.mark.timeout(180)]


@pytest.fixture
def webhook() -> Iterator[tuple[Webhook, str]]:
    hook = Webhook()
    with run_asgi_server(hook.app) as url:
        yield hook, url + "/hook"


@pytest.fixture(params=["redis", "postgresql-only"])
def replicas(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tool_log: Path,
    pg_url: str,
    redis_db_url: str,
    redis_prefix: str,
) -> Iterator[Cluster]:
    """Three processes that may POST to loopback webhooks."""
    del tool_log
    redis_url = redis_db_url if request.param == "redis" else None
    framework = cluster_framework(tmp_path, pg_url, redis_url, redis_prefix)
    document = json.loads(framework.read_text(encoding="utf-8"))
    document["server"]["a2a"] = {"allowPrivateWebhooks": True}
    framework.write_text(json.dumps(document), encoding="utf-8")
    with three_processes(framework, request.param, pg_url, redis_db_url) as cluster:
        yield cluster


async def test_a_config_taken_by_b_is_delivered_by_a_which_runs_the_task(
    replicas: Cluster, webhook: tuple[Webhook, str]
) -> None:
    """B takes the webhook of a task running on A, then dies: A still POSTs the end."""
    hook, hook_url = webhook
    first, second, _ = replicas.urls
    with anyio.fail_after(60):
        async with a2a_client(first) as (client, _):
            task = await send(client, user_message("slow 3"), return_immediately=True)
        async with a2a_client(second) as (client, _):
            config = TaskPushNotificationConfig(task_id=task.id, id="hook", url=hook_url)
            await client.create_task_push_notification_config(config)
        assert replicas.servers[1].kill() < 0  # were B delivering, nothing would come
        completed = await hook.wait_for("TASK_STATE_COMPLETED", timeout=30)
    update = completed.body["statusUpdate"]
    assert isinstance(update, dict) and update["taskId"] == task.id
    assert hook.states() == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]  # one sender


async def test_a_task_resumed_on_c_is_pushed_by_c(
    replicas: Cluster, webhook: tuple[Webhook, str], tool_log: Path
) -> None:
    """A takes the task and its webhook and asks a question; C runs the approval and
    POSTs the rest, A having been stopped meanwhile."""
    hook, hook_url = webhook
    first, _, third = replicas.urls
    with anyio.fail_after(60):
        async with a2a_client(first) as (client, _):
            config = TaskPushNotificationConfig(id="hook", url=hook_url)
            request = SendMessageRequest(
                message=user_message("delete /tmp/replicas.txt"),
                configuration=SendMessageConfiguration(task_push_notification_config=config),
            )
            [response] = [item async for item in client.send_message(request)]
        await hook.wait_for("TASK_STATE_INPUT_REQUIRED")
        replicas.servers[0].stop()
        async with a2a_client(third) as (client, _):
            done = await send(
                client, user_message(data={"approved": True}, task_id=response.task.id)
            )
        await hook.wait_for("TASK_STATE_COMPLETED")
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert hook.states() == [
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    assert tool_runs(tool_log) == ["delete_file /tmp/replicas.txt"]
