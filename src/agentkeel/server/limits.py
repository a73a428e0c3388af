"""Request limits as pure ASGI middleware: body size (413), deadline (408), JSON (400).

The body is read here, once: over ``maxBodyBytes`` (by Content-Length or by counting
what arrives) it is refused with ``413 payload_too_large`` before a handler sees it, and
on the JSON paths a body that does not parse is refused with ``400 invalid_json``. The
parsed value is left in ``scope["state"]`` under `JSON_BODY` so the handler does not
parse it twice, and the body is replayed to the app unchanged. Pure ASGI, not
BaseHTTPMiddleware, so streaming responses pass straight through. A body that trickles
in (a slow or hostile client holding a connection open) is cut off when it has not
arrived whole within ``server.limits.bodyTimeoutSeconds``: ``408 request_timeout``.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkeel.json_decode import decode_json
from agentkeel.server.errors import (
    InvalidJSONError,
    PayloadTooLargeError,
    RequestTimeoutError,
    error_response,
    send_json,
)
from agentkeel.server_settings import JSON_BODY

__all__ = ["JSON_BODY", "RequestLimits", "native_json_path"]

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def native_json_path(path: str) -> bool:
    """The paths whose bodies are decoded here.

    A2A routes parse their own, and so does AG-UI's run route: it decodes only the last
    two of the messages its clients post (`agentkeel.bindings.agui.body`), with the same
    acceptance as `decode_json`, so a long thread costs it no Python objects.
    """
    return "/a2a" not in path and not path.endswith("/ag-ui")


class RequestLimits:
    """Refuse oversized bodies (413) and malformed JSON (400) as JSON error bodies.

    Args:
        app: The wrapped ASGI app.
        max_body_bytes: The largest body accepted.
        json_paths: Which paths must carry JSON; by default every path but A2A's.
        body_timeout: Seconds the whole body may take to arrive (None: no deadline).
        on_refused: Told the reason of each refusal (``body_size``, ``body_timeout``).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        json_paths: Callable[[str], bool] = native_json_path,
        body_timeout: float | None = None,
        on_refused: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.json_paths = json_paths
        self.body_timeout = body_timeout
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read and check the body, then call the app with it replayed."""
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
            await self.app(scope, receive, send)
            return
        try:
            body = b""
            with anyio.move_on_after(self.body_timeout) as deadline:
                body = await self._read(scope, receive)
            if deadline.cancelled_caught:
                self.on_refused("body_timeout")
                raise RequestTimeoutError(
                    f"the request body did not arrive within {self.body_timeout:g} seconds"
                )
            if body and self.json_paths(scope["path"]):
                try:
                    parsed = decode_json(body)
                except (ValueError, RecursionError):
                    raise InvalidJSONError("the request body is not valid JSON") from None
                scope.setdefault("state", {})[JSON_BODY] = parsed
        except (PayloadTooLargeError, InvalidJSONError, RequestTimeoutError) as exc:
            status, payload = error_response(exc)
            await send_json(send, status, payload, [(b"connection", b"close")])
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, scope: Scope, receive: Receive) -> bytes:
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body_bytes:
                raise self._too_large()
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)

    def _too_large(self) -> PayloadTooLargeError:
        self.on_refused("body_size")
        return PayloadTooLargeError(f"the request body is larger than {self.max_body_bytes} bytes")


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that returns `body` once, then waits for the client's disconnect."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
