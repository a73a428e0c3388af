"""The A2A binding's event streams, and its JSON-RPC dispatcher.

Events become StreamResponse ProtoJSON by a direct mapping for the kinds a stream
carries by the dozen (text artifact chunks, plain status updates, the first Task; any
other event goes through the SDK's own ProtoJSON conversion, and a test pins the two to
the same output), a batch of them per write (`encode_batches`), and they are written by
`EventStream`, a pure ASGI response like the native wire's, instead of sse-starlette's
(which starts three tasks per stream and a timeout per write). That keeps an A2A turn's
server cost near a native turn's (bench/a2a.py). JSON-RPC and HTTP+JSON streams differ
only in each event's envelope and in their error event.

`A2ADispatcher` is the SDK's `JsonRpcDispatcher` (request parsing, ``A2A-Version``
check, method routing, error objects) writing its streams so; the common streaming
send skips it (`agentkeel.a2a.endpoints`).

A stream sends an SSE comment when the run's frames say nothing came for
``server.heartbeatSeconds`` (the runtime's heartbeat, as on the native wire), so proxies
keep an idle stream (a long tool call) open, and it stops, leaving the run alone, when
the client goes away.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from functools import partial
from typing import Any, cast

import anyio
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONRPCError
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import Task, TaskState, TaskStatusUpdateEvent
from a2a.utils import constants, proto_utils
from a2a.utils.errors import A2AError, InternalError, UnsupportedOperationError
from a2a.utils.version_validator import validate_version
from google.protobuf.json_format import MessageToDict
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentkeel.a2a.handler import AgentRequestHandler
from agentkeel.a2a.mapping import RESPONSE_ARTIFACT, Mapped, TextChunk
from agentkeel.a2a.protojson import task_json, timestamp_json
from agentkeel.messages import JSONObject

__all__ = [
    "A2ADispatcher",
    "EventStream",
    "encode_batches",
    "event_result",
    "jsonrpc_error_frame",
    "jsonrpc_prefix",
]

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
    if isinstance(event, Task):
        return {"task": task_json(event)}
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
    """A ``text/event-stream`` of encoded events; ends with the events or the client.

    Args:
        chunks: The SSE bytes to send, a batch of events per chunk.
        error_frame: The event that reports an error raised mid-stream.
    """

    def __init__(
        self, chunks: AsyncGenerator[bytes, None], error_frame: Callable[[A2AError], bytes]
    ) -> None:
        super().__init__(status_code=200)
        self.chunks = chunks
        self.error_frame = error_frame

    async def _frames(self) -> AsyncIterator[bytes]:
        try:
            async with aclosing(self.chunks) as chunks:
                async for chunk in chunks:
                    yield chunk
        except A2AError as exc:
            yield self.error_frame(exc)
        except Exception:
            logger.exception("an A2A stream failed")
            yield self.error_frame(InternalError(message="internal server error"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the events as they come; stop when the client leaves."""
        await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
        async with anyio.create_task_group() as group:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(watch_disconnect)
            try:
                async for frame in self._frames():
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass  # the client went away between two events
            group.cancel_scope.cancel()


def jsonrpc_error_frame(request_id: str | int | None, error: A2AError | JSONRPCError) -> bytes:
    """An ``error`` event holding the JSON-RPC error response of `error`."""
    body = _ENCODER.encode(build_error_response(request_id, error)).encode("utf-8")
    return b"event: error\ndata: " + body + b"\n\n"


async def encode_batches(
    batches: AsyncGenerator[list[Mapped], None], first: list[Mapped], prefix: bytes, end: bytes
) -> AsyncGenerator[bytes, None]:
    """Each batch of events as one chunk: per event `prefix`, its result's JSON, `end`.

    An empty batch after the first is a heartbeat (nothing happened for a while): it
    becomes an SSE comment, so that proxies keep the stream open.
    """
    async with aclosing(batches):
        batch = first
        while True:
            if batch:
                yield b"".join(
                    prefix + _ENCODER.encode(event_result(event)).encode("utf-8") + end
                    for event in batch
                )
            elif batch is not first:
                yield _KEEPALIVE
            try:
                batch = await anext(batches)
            except StopAsyncIteration:
                return


def jsonrpc_prefix(request_id: str | int | None) -> bytes:
    """The start of every event of one JSON-RPC stream, up to its ``result``."""
    head = _ENCODER.encode({"jsonrpc": "2.0", "id": request_id})
    return b"data: " + head[:-1].encode("utf-8") + b',"result":'


class A2ADispatcher(JsonRpcDispatcher):
    """The SDK's JSON-RPC dispatcher, streaming batches of events through `EventStream`.

    Args:
        request_handler: The definition's handler.
        **options: The SDK dispatcher's other arguments (the call context builder).
    """

    def __init__(self, *, request_handler: AgentRequestHandler, **options: Any) -> None:
        super().__init__(request_handler=request_handler, **options)
        self.handler = request_handler

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

        prefix = jsonrpc_prefix(request_id)
        chunks = _Chunks(encode_batches(batches, first, prefix, b"}\n\n"))
        return cast("AsyncGenerator[dict[str, Any], None]", chunks)  # see _create_response

    def _create_response(
        self,
        context: ServerCallContext,
        handler_result: AsyncGenerator[dict[str, Any], None] | dict[str, Any],
    ) -> Response:
        if not isinstance(handler_result, _Chunks):
            return super()._create_response(context, handler_result)
        error_frame = partial(jsonrpc_error_frame, context.state.get("request_id"))
        return EventStream(handler_result.chunks, error_frame)


class _Chunks:
    """A stream's encoded chunks, passed through the SDK dispatcher as its result."""

    def __init__(self, chunks: AsyncGenerator[bytes, None]) -> None:
        self.chunks = chunks
