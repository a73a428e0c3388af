"""A2A binding tests: the official a2a-sdk client against real servers on loopback.

(The folder is not called ``a2a``: the tests folder is on ``sys.path``, so a package
``a2a`` there would shadow the SDK itself.)

Servers come from the end-to-end kit (`e2e.serve_in_thread`, `e2e.ServerProcess`, the
scripted agent); these helpers only add the SDK side: a client built from the agent
card, messages, and the few steps every test repeats.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import grpc.aio
import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
)
from google.protobuf.json_format import MessageToDict, ParseDict

from agentkeel.messages import JSONValue

AGENT = "scripted"


def base_url(url: str, agent: str = AGENT) -> str:
    """The A2A base URL of an agent of the server at `url`."""
    return f"{url}/agents/{agent}/a2a"


@asynccontextmanager
async def a2a_client(
    url: str,
    *,
    agent: str = AGENT,
    streaming: bool = False,
    headers: Mapping[str, str] | None = None,
    binding: str = "JSONRPC",
) -> AsyncIterator[tuple[Client, AgentCard]]:
    """An SDK client for `agent`, made the way an A2A client does: from its card.

    `binding` is the transport it picks among the card's interfaces: ``JSONRPC``,
    ``HTTP+JSON`` or ``GRPC`` (gRPC calls carry no `headers`).
    """
    async with httpx.AsyncClient(timeout=30, headers=dict(headers or {})) as http:
        card = await A2ACardResolver(http, base_url(url, agent)).get_agent_card()
        config = ClientConfig(
            httpx_client=http,
            streaming=streaming,
            supported_protocol_bindings=[binding],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        client = ClientFactory(config).create(card)
        try:
            yield client, card
        finally:
            await client.close()


def user_message(
    text: str | None = None,
    *,
    data: JSONValue = None,
    context_id: str = "",
    task_id: str = "",
    message_id: str = "",
) -> Message:
    """A user message with a text part (or a data part), and optional ids."""
    part = Part(text=text) if text is not None else ParseDict({"data": data}, Part())
    return Message(
        message_id=message_id or f"msg-{uuid.uuid4().hex}",
        role=Role.ROLE_USER,
        parts=[part],
        context_id=context_id,
        task_id=task_id,
    )


async def events(
    client: Client, message: Message, *, return_immediately: bool = False
) -> list[StreamResponse]:
    """Send `message` and collect every response the client yields."""
    configuration = SendMessageConfiguration(return_immediately=return_immediately)
    request = SendMessageRequest(message=message, configuration=configuration)
    return [item async for item in client.send_message(request)]


async def send(client: Client, message: Message, *, return_immediately: bool = False) -> Task:
    """Send `message` without streaming; the Task it answers with."""
    responses = await events(client, message, return_immediately=return_immediately)
    assert len(responses) == 1 and responses[0].HasField("task"), responses
    return responses[0].task


def response_text(task: Task) -> str:
    """The text of a task's ``response`` artifact ("" when it has none)."""
    for artifact in task.artifacts:
        if artifact.artifact_id == "response":
            return "".join(part.text for part in artifact.parts)
    return ""


def status_data(task: Task) -> JSONValue:
    """The data part of a task's status message (an interrupt, when it waits for input)."""
    for part in task.status.message.parts:
        if part.WhichOneof("content") == "data":
            value: JSONValue = MessageToDict(part.data)
            return value
    return None
