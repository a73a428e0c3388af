"""The HTTP+JSON binding: the SDK's REST routes below ``/agents/{name}/a2a/v1``.

The routes are the SDK's (`create_rest_routes`: ``POST /message:send``, ``GET
/tasks/{id}``...), mounted below the agent's base URL so that their ``/{tenant}``
variant cannot shadow any other route of the app. One check is added in front: a body
must be JSON. A POST labelled with another media type (``text/plain``, a form) gets
``415 Unsupported Media Type`` with the AIP-193 error of the SDK's
``ContentTypeNotSupportedError``, rather than being parsed as JSON regardless of what
the client said it sent. ``POST /message:stream`` is served first by the binding's own
endpoint (`agentkeel.a2a.endpoints`), which hands the SDK's route what it does not take.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.routes import ServerCallContextBuilder, create_rest_routes
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import ContentTypeNotSupportedError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route, Router
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["rest_mount"]

_JSON_TYPES = frozenset({"application/json", "application/a2a+json"})
_STREAM_PATH = "/message:stream"


class _JsonBodies:
    """Pure ASGI: refuse a request body declared as anything but JSON (415)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("POST", "PUT", "PATCH"):
            declared = Headers(scope=scope).get("content-type")
            media = (declared or "").split(";", 1)[0].strip().lower()
            if declared is not None and media not in _JSON_TYPES:
                error = ContentTypeNotSupportedError(
                    message=f"the body must be application/json, not {media or 'empty'!r}"
                )
                payload = build_rest_error_payload(error)
                payload["error"]["code"] = 415
                body = json.dumps(payload).encode("utf-8")
                await send(
                    {
                        "type": "http.response.start",
                        "status": 415,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


Endpoint = Callable[[Request], Awaitable[Response]]


def rest_mount(
    path: str,
    handler: RequestHandler,
    context_builder: ServerCallContextBuilder,
    stream: Callable[[Endpoint], Endpoint] | None = None,
) -> Mount:
    """The HTTP+JSON routes of one handler, mounted at `path` (``{base}/v1``).

    `stream`, given the SDK's ``message:stream`` endpoint, gives the one to serve first.
    """
    routes = create_rest_routes(handler, context_builder=context_builder)
    if stream is not None:
        sdk = next(
            route.endpoint
            for route in routes
            if isinstance(route, Route) and route.path == _STREAM_PATH
        )
        routes.insert(0, Route(_STREAM_PATH, stream(sdk), methods=["POST"]))
    return Mount(path, app=_JsonBodies(Router(routes=routes)))
