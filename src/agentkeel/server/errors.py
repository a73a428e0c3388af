"""Exceptions to ``{"error": {"code", "message"}}`` responses, never a stack trace.

Every error agentkeel raises carries its wire `code`; this module adds the HTTP status
and the errors only the server raises (unknown agent, payload too large...). An
exception that is not an AgentkeelError is a bug: it is logged here with its traceback
and the client gets ``500 internal_error`` and nothing else. Storage and configuration
failures are also logged in full and answered with a generic message, because their
details (paths, file contents) are the server's business.
"""

from __future__ import annotations

import json
import logging
import math
from typing import ClassVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentkeel.errors import (
    AgentkeelError,
    BudgetExceededError,
    ConfigurationError,
    ContextExistsError,
    ContextNotFoundError,
    ContextRefusedError,
    InterruptError,
    InterruptNotFoundError,
    InterruptPendingError,
    InvalidRequestError,
    MessageNotFoundError,
    NoActiveRunError,
    RunInProgressError,
    SharedAgentError,
    StorageError,
    StorageUnavailableError,
)
from agentkeel.runtime.errors import (
    IdempotencyKeyReusedError,
    MessageTooLargeError,
    RateLimitedError,
    ShuttingDownError,
)
from agentkeel.runtime.wire import error_body

__all__ = [
    "AgentNotFoundError",
    "ErrorMiddleware",
    "HTTPError",
    "IdempotencyKeyReusedError",
    "InvalidJSONError",
    "PayloadTooLargeError",
    "RequestTimeoutError",
    "RouteNotFoundError",
    "RunNotFoundError",
    "ShuttingDownError",
    "error_response",
    "error_status",
    "retry_after_header",
    "send_json",
]

logger = logging.getLogger(__name__)


class HTTPError(AgentkeelError):
    """An error only the HTTP server raises; `status` is its HTTP status code."""

    status: ClassVar[int] = 400


class AgentNotFoundError(HTTPError):
    """No agent definition has this name."""

    code = "agent_not_found"
    status = 404


class RunNotFoundError(HTTPError):
    """The context exists but no run events are retained for it (never ran, or expired)."""

    code = "run_not_found"
    status = 404


class RouteNotFoundError(HTTPError):
    """No endpoint at this path (or not with this method)."""

    code = "not_found"
    status = 404


class PayloadTooLargeError(HTTPError):
    """The request body is larger than ``server.maxBodyBytes``."""

    code = "payload_too_large"
    status = 413


class RequestTimeoutError(HTTPError):
    """The request body did not arrive within ``server.limits.bodyTimeoutSeconds``."""

    code = "request_timeout"
    status = 408


class InvalidJSONError(HTTPError):
    """The request body is not JSON."""

    code = "invalid_json"
    status = 400


_STATUS: tuple[tuple[type[AgentkeelError], int], ...] = (
    (BudgetExceededError, 429),
    (RateLimitedError, 429),
    (MessageTooLargeError, 413),
    (InvalidRequestError, 400),
    (ContextNotFoundError, 404),
    (MessageNotFoundError, 404),
    (ContextExistsError, 409),
    (ContextRefusedError, 403),
    (SharedAgentError, 500),
    (InterruptNotFoundError, 404),
    (InterruptPendingError, 409),
    (InterruptError, 409),
    (RunInProgressError, 409),
    (NoActiveRunError, 409),
    (ShuttingDownError, 503),
    (IdempotencyKeyReusedError, 422),
)
_HIDDEN = (StorageError, ConfigurationError)
"""Errors whose messages may hold paths or file contents: logged, not shown."""


def error_status(exc: BaseException) -> int:
    """The HTTP status `error_response` answers for `exc` (the OpenAPI document's table)."""
    if isinstance(exc, HTTPError):
        return exc.status
    if isinstance(exc, StorageUnavailableError):
        return 503
    if isinstance(exc, AgentkeelError) and not isinstance(exc, _HIDDEN):
        return next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)
    return 500


def error_response(exc: BaseException) -> tuple[int, bytes]:
    """The status and JSON body for `exc`; logs what the client is not told."""
    if isinstance(exc, HTTPError):
        return exc.status, _dump(error_body(exc.code, exc.message))
    if isinstance(exc, StorageUnavailableError):
        logger.error("code=<%s> | request failed: %s", exc.code, exc.message)
        message = "the server's session storage is unavailable; try again shortly"
        return 503, _dump(error_body(exc.code, message))
    if isinstance(exc, _HIDDEN):
        logger.error("code=<%s> | request failed: %s", exc.code, exc.message)
        message = "the server's session storage failed; the details are in its log"
        if isinstance(exc, ConfigurationError):
            message = "the server is misconfigured; the details are in its log"
        return 500, _dump(error_body(exc.code, message))
    if isinstance(exc, AgentkeelError):
        status = next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)
        interrupt_id = exc.interrupt_id if isinstance(exc, InterruptPendingError) else None
        return status, _dump(error_body(exc.code, exc.message, interrupt_id=interrupt_id))
    logger.error("unexpected error while handling a request", exc_info=exc)
    return 500, _dump(error_body("internal_error", "internal server error"))


def retry_after_header(exc: BaseException) -> list[tuple[bytes, bytes]]:
    """``Retry-After`` for an error that knows when trying again may succeed."""
    if isinstance(exc, BudgetExceededError) and exc.retry_after is not None:
        return [(b"retry-after", str(max(1, round(exc.retry_after))).encode())]
    if isinstance(exc, RateLimitedError):  # rounded up: a retry sooner would be refused
        return [(b"retry-after", str(max(1, math.ceil(exc.retry_after))).encode())]
    return []


def _dump(body: object) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def send_json(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Send a whole JSON response through raw ASGI (for middleware)."""
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


class ErrorMiddleware:
    """Pure ASGI: an exception raised before the response started becomes a JSON error.

    After the response started (a stream), nothing can be sent any more: the error is
    logged and the connection is closed by the server.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app; answer an exception raised before the response started."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if started:
                logger.error("error after the response started", exc_info=exc)
                return
            status, body = error_response(exc)
            await send_json(send, status, body, retry_after_header(exc))
