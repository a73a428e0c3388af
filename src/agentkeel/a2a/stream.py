"""The JSON-RPC dispatcher of the A2A binding, with a lean event stream.

`A2ADispatcher` is the SDK's `JsonRpcDispatcher` (request parsing, ``A2A-Version``
check, method routing, error objects) with the two steps of a stream replaced: events
become JSON-RPC responses by a direct mapping for the one event a stream carries by the
dozen (a text artifact chunk; every other event goes through the SDK's own ProtoJSON
conversion, and a test pins the two to the same output), and they are written by
`EventStream`, a pure ASGI response like the native wire's, instead of sse-starlette's
(which starts three tasks per stream and a timeout per write). That keeps an A2A turn's
server cost near a native turn's (bench/a2a.py).

The stream sends an SSE comment after `heartbeat` seconds without an event, so proxies
keep an idle stream (a long tool call, a task waiting for input) open, and it stops,
leaving the run alone, when the client goes away.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONRPCError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import TaskState, TaskStatusUpdateEvent
from a2a.utils import constants, proto_utils
from a2a.utils.errors import A2AError, InternalError, UnsupportedOperationError
from a2a.utils.version_validator import validate_version
from google.protobuf.json_format import MessageToDict
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentkeel.a2a.handler import AgentRequestHandler
from agentkeel.a2a.mapping import RESPONSE_ARTIFACT, Mapped, TextChunk
from agentkeel.a2a.protojson import timestamp_json
from agentkeel.messages import JSONObject

__all__ = ["A2ADispatcher", "EventStream", "event_result"]

logger = logging.getLogger(__name__)

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_KEEPALIVE = b": keep-alive\n\n"


def event_result(event: Mapped) -> JSONObject:
    """The ``result`` of one stream event (a StreamResponse as ProtoJSON)."""
    if isinstance(event, TextChunk):
        update: JSONObject = {
            "taskId": event.task_id,
            "contextId": event.context_id,
            "artifact": {
                "artifactId": RESPONSE_ARTIFACT,
                "name": RESPONSE_ARTIFACT,
                "parts": [{"text": event.text}],
            },
        }
        if event.append:
            update["append"] = True
        if event.last:
            update["lastChunk"] = True
        return {"artifactUpdate": update}
    if isinstance(event, TaskStatusUpdateEvent) and _plain_status(event):
        status: JSONObject = {"state": TaskState.Name(event.status.state)}
        if event.status.HasField("timestamp"):
            status["timestamp"] = timestamp_json(event.status.timestamp)
        change: JSONObject = {
            "taskId": event.task_id,
            "contextId": event.context_id,
            "status": status,
        }
        if event.HasField("metadata"):
            change["metadata"] = MessageToDict(event.metadata)
        return {"statusUpdate": change}
    result: JSONObject = MessageToDict(
        proto_utils.to_stream_response(event), preserving_proto_field_name=False
    )
    return result


def _plain_status(event: TaskStatusUpdateEvent) -> bool:
    """A status change without a message (the progress updates of a run)."""
    return (
        not event.status.HasField("message")
        and event.status.state != TaskState.TASK_STATE_UNSPECIFIED
        and bool(event.task_id and event.context_id)
    )


class EventStream(Response):
    """A ``text/event-stream`` of JSON-RPC responses; ends with the events or the client.

    Args:
        items: The JSON-RPC response objects to send, one per SSE event.
        request_id: The request's id, for an error raised mid-stream.
        heartbeat: Seconds of silence after which a comment is sent.
    """

    def __init__(
        self,
        items: AsyncGenerator[dict[str, Any], None],
        request_id: str | int | None,
        heartbeat: float,
    ) -> None:
        super().__init__(status_code=200)
        self.items = items
        self.request_id = request_id
        self.heartbeat = heartbeat

    async def _frames(self) -> AsyncIterator[bytes]:
        try:
            async with aclosing(self.items) as items:
                async for item in items:
                    if isinstance(item, _Encoded):
                        yield item.chunk
                        continue
                    prefix = b"event: error\n" if "error" in item else b""
                    yield prefix + b"data: " + _ENCODER.encode(item).encode("utf-8") + b"\n\n"
        except A2AError as exc:
            yield _error_frame(self.request_id, exc)
        except Exception:
            logger.exception("an A2A stream failed")
            yield _error_frame(self.request_id, InternalError(message="internal server error"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the events as they come, a comment when idle; stop when the client leaves."""
        await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
        last_sent = time.monotonic()
        sending = False  # one body message at a time: the stream's or a keep-alive comment

        async def emit(body: bytes) -> None:
            nonlocal last_sent, sending
            sending = True
            try:
                await send({"type": "http.response.body", "body": body, "more_body": True})
            finally:
                sending, last_sent = False, time.monotonic()

        async with anyio.create_task_group() as group:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            async def keep_alive() -> None:
                while True:
                    idle_for = last_sent + self.heartbeat - time.monotonic()
                    if idle_for > 0 or sending:
                        await anyio.sleep(max(idle_for, 0.05))
                    else:
                        await emit(_KEEPALIVE)

            group.start_soon(watch_disconnect)
            group.start_soon(keep_alive)
            try:
                async for frame in self._frames():
                    while sending:  # a keep-alive comment is being written
                        await anyio.sleep(0)
                    await emit(frame)
                while sending:
                    await anyio.sleep(0)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass  # the client went away between two events
            group.cancel_scope.cancel()


def _error_frame(request_id: str | int | None, error: A2AError | JSONRPCError) -> bytes:
    body = _ENCODER.encode(build_error_response(request_id, error)).encode("utf-8")
    return b"event: error\ndata: " + body + b"\n\n"


class _Encoded(dict[str, Any]):
    """A batch of JSON-RPC responses already encoded as SSE events (one write)."""

    def __init__(self, chunk: bytes) -> None:
        super().__init__()
        self.chunk = chunk


def _encode_batch(prefix: bytes, batch: list[Mapped]) -> _Encoded:
    """One write: each event a ``data:`` line holding its JSON-RPC response."""
    return _Encoded(
        b"".join(
            prefix + _ENCODER.encode(event_result(event)).encode("utf-8") + b"}\n\n"
            for event in batch
        )
    )


def _prefix(request_id: str | int | None) -> bytes:
    """The start of every response of one stream, up to its ``result``."""
    head = _ENCODER.encode({"jsonrpc": "2.0", "id": request_id})
    return b"data: " + head[:-1].encode("utf-8") + b',"result":'


class A2ADispatcher(JsonRpcDispatcher):
    """The SDK's JSON-RPC dispatcher, streaming batches of events through `EventStream`.

    Args:
        request_handler: The definition's handler.
        heartbeat: Seconds of silence after which a stream sends a comment.
        **options: The SDK dispatcher's other arguments (the call context builder).
    """

    def __init__(
        self, *, request_handler: AgentRequestHandler, heartbeat: float, **options: Any
    ) -> None:
        super().__init__(request_handler=request_handler, **options)
        self.handler = request_handler
        self.heartbeat = heartbeat

    @validate_version(constants.PROTOCOL_VERSION_1_0)
    async def _process_streaming_request(
        self,
        request_id: str | int | None,
        request_obj: Any,
        context: ServerCallContext,
    ) -> AsyncGenerator[dict[str, Any], None]:
        method = context.state.get("method")
        if method == "SendStreamingMessage":
            batches = self.handler.stream_batches(request_obj, context)
        elif method == "SubscribeToTask":
            batches = self.handler.subscription_batches(request_obj, context)
        else:
            raise UnsupportedOperationError(message="Stream not supported")
        try:  # the first batch now, so that an early error is a plain JSON-RPC error
            first: list[Mapped] = await anext(batches)
        except StopAsyncIteration:
            first = []

        prefix = _prefix(request_id)

        async def responses() -> AsyncGenerator[dict[str, Any], None]:
            async with aclosing(batches):
                if first:
                    yield _encode_batch(prefix, first)
                async for batch in batches:
                    if batch:
                        yield _encode_batch(prefix, batch)

        return responses()

    def _create_response(
        self,
        context: ServerCallContext,
        handler_result: AsyncGenerator[dict[str, Any], None] | dict[str, Any],
    ) -> Response:
        if isinstance(handler_result, dict):
            return super()._create_response(context, handler_result)
        return EventStream(handler_result, context.state.get("request_id"), self.heartbeat)
