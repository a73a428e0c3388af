"""The two streaming sends, served without the SDK's generic dispatch layers.

``SendStreamingMessage`` (JSON-RPC) and ``POST {base}/v1/message:stream`` (HTTP+JSON)
carry nearly every turn of an A2A client, and the SDK's path to them (the JSON-RPC
dispatcher's request model and tracing spans, the REST dispatcher's error decorators,
sse-starlette's tasks and per-write timeouts, ``ParseDict`` and ``MessageToDict`` on
every event) cost a turn more CPU than the turn's run. `StreamEndpoints` takes the
common request, a well-formed call in protocol 1.x with a plain message, straight to
the handler's batches and writes them with `EventStream`, as the native wire does; any
other request (a malformed one, another version, a configuration or metadata) is handed
to the SDK's own endpoint unchanged, so every error keeps the SDK's protocol shape.
Errors raised before the first event are the binding's own shapes too: a JSON-RPC error
response, or the AIP-193 error body with its HTTP status.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from functools import lru_cache, partial

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes import ServerCallContextBuilder
from a2a.types import SendMessageRequest
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import A2AError, InternalError
from packaging.version import InvalidVersion, Version
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentkeel.a2a.handler import AgentRequestHandler
from agentkeel.a2a.mapping import Mapped
from agentkeel.a2a.protojson import send_request
from agentkeel.a2a.stream import EventStream, encode_batches, jsonrpc_error_frame, jsonrpc_prefix

__all__ = ["StreamEndpoints"]

logger = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]

_JSONRPC_FIELDS = frozenset({"jsonrpc", "method", "params", "id"})
_METHOD = "SendStreamingMessage"


@lru_cache(maxsize=32)
def _speaks_1(version: str) -> bool:
    """The ``A2A-Version`` is 1.x (the SDK's rule: the same major version)."""
    try:
        return Version(version).major == 1
    except InvalidVersion:
        return False


async def _body(request: Request) -> object:
    """The request's JSON (None when it does not parse: the SDK says how)."""
    try:
        return json.loads(await request.body())
    except ValueError:
        return None


class StreamEndpoints:
    """The fast JSON-RPC and HTTP+JSON streaming sends of one definition.

    Args:
        handler: The definition's request handler.
        builder: Builds the call context (principal, transport) as the SDK's routes do.
        jsonrpc: The SDK dispatcher's endpoint, for every other JSON-RPC request.
    """

    def __init__(
        self,
        handler: AgentRequestHandler,
        builder: ServerCallContextBuilder,
        *,
        jsonrpc: Endpoint,
    ) -> None:
        self.handler = handler
        self.builder = builder
        self.sdk_jsonrpc = jsonrpc
        self.sdk_rest: Endpoint = jsonrpc

    def rest_endpoint(self, sdk: Endpoint) -> Endpoint:
        """`rest`, handing what it does not serve to `sdk` (the SDK's own route)."""
        self.sdk_rest = sdk
        return self.rest

    async def jsonrpc(self, request: Request) -> Response:
        """``POST {base}``: a plain ``SendStreamingMessage`` here, the rest to the SDK."""
        body = await _body(request)
        if not (
            isinstance(body, dict)
            and body.keys() <= _JSONRPC_FIELDS
            and body.get("jsonrpc") == "2.0"
            and body.get("method") == _METHOD
            and type(body.get("id")) in (str, int)
            and _speaks_1(request.headers.get("a2a-version", ""))
        ):
            return await self.sdk_jsonrpc(request)
        request_id: str | int = body["id"]
        try:
            params = send_request(body.get("params", {}))
        except Exception:  # the SDK's dispatcher words the parse error
            return await self.sdk_jsonrpc(request)
        context = self._context(request, params)
        context.state["method"], context.state["request_id"] = _METHOD, request_id
        try:
            batches, first = await self._open(params, context)
        except A2AError as exc:
            logger.warning("A2A request %s: %s %s", request_id, type(exc).__name__, exc.message)
            return JSONResponse(build_error_response(request_id, exc))
        prefix = jsonrpc_prefix(request_id)
        chunks = encode_batches(batches, first, prefix, b"}\n\n")
        return EventStream(chunks, partial(jsonrpc_error_frame, request_id))

    async def rest(self, request: Request) -> Response:
        """``POST {base}/v1/message:stream``: a plain message here, the rest to the SDK."""
        body = await _body(request)
        if not _speaks_1(request.headers.get("a2a-version", "")):
            return await self.sdk_rest(request)
        try:
            params = send_request(body)
        except Exception:  # the SDK's route words the parse error
            return await self.sdk_rest(request)
        try:
            batches, first = await self._open(params, self._context(request, params))
        except A2AError as exc:
            logger.warning("A2A REST stream: %s %s", type(exc).__name__, exc.message)
            payload = build_rest_error_payload(exc)
            return JSONResponse(payload, status_code=payload["error"]["code"])
        chunks = encode_batches(batches, first, b"data: ", b"\n\n")
        return EventStream(chunks, _rest_error_frame)

    def _context(self, request: Request, params: SendMessageRequest) -> ServerCallContext:
        context = self.builder.build(request)
        context.tenant = params.tenant
        return context

    async def _open(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> tuple[AsyncGenerator[list[Mapped], None], list[Mapped]]:
        """The handler's batches and the first one (an early error is raised here)."""
        batches = self.handler.stream_batches(params, context)
        try:
            first: list[Mapped] = await anext(batches)
        except StopAsyncIteration:
            first = []
        except A2AError:
            raise
        except Exception:
            logger.exception("an A2A stream failed before its first event")
            raise InternalError(message="internal server error") from None
        return batches, first


def _rest_error_frame(error: A2AError) -> bytes:
    body = json.dumps(build_rest_error_payload(error), ensure_ascii=False)
    return b"event: error\ndata: " + body.encode("utf-8") + b"\n\n"
