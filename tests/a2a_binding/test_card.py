"""The card's caching headers, and the extended card behind authentication on each transport."""

from __future__ import annotations

from collections.abc import Iterator
from email.utils import formatdate, parsedate_to_datetime

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import (
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    TaskPushNotificationConfig,
    a2a_pb2,
    a2a_pb2_grpc,
)
from a2a.utils.errors import TaskNotFoundError

from a2a_binding import a2a_client, base_url, send, user_message
from agentkeel.auth_settings import AuthSettings
from agentkeel.server import A2AServer
from agentkeel.server_settings import A2ASettings, ServerSettings
from e2e import scripted_agent, serve_in_thread

pytestmark = pytest.mark.anyio

ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdefgh"
TOOLS = ["delete_file", "lookup", "pause"]


async def test_the_card_has_last_modified_and_answers_conditional_gets(server_url: str) -> None:
    card_url = base_url(server_url) + "/.well-known/agent-card.json"
    async with httpx.AsyncClient() as http:
        first = await http.get(card_url)
        modified = first.headers["last-modified"]
        assert parsedate_to_datetime(modified).tzname() == "UTC"
        same = await http.get(card_url, headers={"If-Modified-Since": modified})
        assert same.status_code == 304 and same.headers["last-modified"] == modified
        earlier = formatdate(parsedate_to_datetime(modified).timestamp() - 60, usegmt=True)
        changed = await http.get(card_url, headers={"If-Modified-Since": earlier})
        assert changed.status_code == 200 and changed.json() == first.json()
        # If-None-Match decides when both are sent
        stale = await http.get(
            card_url, headers={"If-Modified-Since": modified, "If-None-Match": 'W/"other"'}
        )
        assert stale.status_code == 200
        unreadable = await http.get(card_url, headers={"If-Modified-Since": "yesterday"})
        assert unreadable.status_code == 200


@pytest.fixture
def secured(tool_log: object) -> Iterator[str]:
    """API keys on, gRPC on a free port."""
    del tool_log
    settings = ServerSettings(
        heartbeat_seconds=1.0,
        shutdown_timeout_seconds=5,
        auth=AuthSettings(api_keys={"alice": ALICE_KEY, "bob": BOB_KEY}),
        a2a=A2ASettings(grpc_port=0),
    )
    with serve_in_thread(A2AServer(scripted_agent, name="scripted", settings=settings).app) as url:
        yield url


async def test_the_tools_are_shown_only_to_authenticated_callers(secured: str) -> None:
    alice = {"Authorization": f"Bearer {ALICE_KEY}"}
    async with httpx.AsyncClient() as http:
        public = (await http.get(base_url(secured) + "/.well-known/agent-card.json")).json()
        assert [skill["id"] for skill in public["skills"]] == ["scripted"]
        assert public["capabilities"]["extendedAgentCard"] is True
        refused = await http.get(
            base_url(secured) + "/v1/extendedAgentCard", headers={"A2A-Version": "1.0"}
        )
        assert refused.status_code == 401
    for binding in ("JSONRPC", "HTTP+JSON"):
        async with a2a_client(secured, headers=alice, binding=binding) as (client, _):
            card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        assert [skill.id for skill in card.skills] == TOOLS
        assert card.supported_interfaces[0].url == base_url(secured)


def _grpc_target(card: dict[str, object]) -> str:
    interfaces = card["supportedInterfaces"]
    assert isinstance(interfaces, list)
    [target] = [item["url"] for item in interfaces if item["protocolBinding"] == "GRPC"]
    return str(target)


async def test_grpc_calls_need_the_same_credentials(secured: str) -> None:
    async with httpx.AsyncClient() as http:
        card = (await http.get(base_url(secured) + "/.well-known/agent-card.json")).json()
    request = a2a_pb2.GetExtendedAgentCardRequest(tenant="scripted")
    async with grpc.aio.insecure_channel(_grpc_target(card)) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.GetExtendedAgentCard(request, metadata=[("a2a-version", "1.0")])
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.aio.AioRpcError) as wrong:
            await stub.GetExtendedAgentCard(
                request, metadata=[("a2a-version", "1.0"), ("x-api-key", "not-a-key-at-all!")]
            )
        assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
        allowed = await stub.GetExtendedAgentCard(
            request, metadata=[("a2a-version", "1.0"), ("authorization", f"Bearer {ALICE_KEY}")]
        )
        assert [skill.id for skill in allowed.skills] == TOOLS
        with pytest.raises(grpc.aio.AioRpcError) as old:
            await stub.GetExtendedAgentCard(
                request, metadata=[("a2a-version", "0.3"), ("x-api-key", ALICE_KEY)]
            )
        assert old.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # VersionNotSupported
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.GetExtendedAgentCard(
                a2a_pb2.GetExtendedAgentCardRequest(tenant="nobody"),
                metadata=[("x-api-key", ALICE_KEY)],
            )
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND


async def test_push_configs_belong_to_the_tasks_principal(secured: str) -> None:
    alice = {"Authorization": f"Bearer {ALICE_KEY}"}
    bob = {"Authorization": f"Bearer {BOB_KEY}"}
    async with a2a_client(secured, headers=alice) as (client, _):
        task = await send(client, user_message("hello"))
        await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id="h", url="https://hooks.example.com/x")
        )
    async with a2a_client(secured, headers=bob) as (client, _):
        with pytest.raises(TaskNotFoundError):
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="h")
            )
        with pytest.raises(TaskNotFoundError):
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url="https://hooks.example.com/y")
            )
