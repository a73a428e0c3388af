"""Errors in OpenAI's shape, so that the official SDKs raise their typed errors.

``{"error": {"message", "type", "param", "code"}}`` with the status the SDKs map to a
class: 400 BadRequestError, 401 AuthenticationError, 403 PermissionDeniedError, 404
NotFoundError, 409 ConflictError, 422 UnprocessableEntityError, 429 RateLimitError,
5xx InternalServerError. ``code`` is agentkeel's own error code. Storage and
configuration failures are logged and answered with a generic message; anything that
is not an AgentkeelError is a bug, logged with its traceback and answered with nothing
but ``internal_error``.
"""

from __future__ import annotations

import logging
import math

from starlette.responses import JSONResponse

from agentkeel.errors import (
    AgentkeelError,
    BudgetExceededError,
    ConfigurationError,
    ContextNotFoundError,
    ContextRefusedError,
    InterruptError,
    InterruptNotFoundError,
    InvalidRequestError,
    RunInProgressError,
    StorageError,
    StorageUnavailableError,
)
from agentkeel.messages import JSONObject
from agentkeel.runtime.errors import (
    IdempotencyKeyReusedError,
    MessageTooLargeError,
    RateLimitedError,
    ShuttingDownError,
)

__all__ = ["ModelNotFoundError", "error_json", "error_response"]

logger = logging.getLogger(__name__)


class ModelNotFoundError(AgentkeelError):
    """The request's ``model`` names no agent of this server."""

    code = "model_not_found"


_STATUS: tuple[tuple[type[AgentkeelError], int], ...] = (
    (ModelNotFoundError, 404),
    (InvalidRequestError, 400),
    (ContextNotFoundError, 404),
    (ContextRefusedError, 403),
    (InterruptNotFoundError, 404),
    (InterruptError, 409),
    (RunInProgressError, 409),
    (IdempotencyKeyReusedError, 422),
    (BudgetExceededError, 429),
    (RateLimitedError, 429),
    (MessageTooLargeError, 413),
    (StorageUnavailableError, 503),
    (ShuttingDownError, 503),
)
_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
}


def error_json(status: int, code: str, message: str, *, param: str | None = None) -> JSONObject:
    """The error object OpenAI's API answers (also the data of a failed stream's event)."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(exc: Exception) -> JSONResponse:
    """The response for an exception raised while handling a request."""
    if not isinstance(exc, AgentkeelError):
        logger.error("unexpected error while handling a chat completion", exc_info=exc)
        return JSONResponse(error_json(500, "internal_error", "internal server error"), 500)
    status = next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)
    message = exc.message
    if isinstance(exc, StorageError | ConfigurationError):
        logger.error("code=<%s> | a chat completion failed: %s", exc.code, exc.message)
        message = "the server failed to serve the request; the details are in its log"
    param = "model" if isinstance(exc, ModelNotFoundError) else None
    headers = {}
    if isinstance(exc, BudgetExceededError) and exc.retry_after is not None:
        headers["retry-after"] = str(max(1, round(exc.retry_after)))
    if isinstance(exc, RateLimitedError):
        headers["retry-after"] = str(max(1, math.ceil(exc.retry_after)))
    return JSONResponse(error_json(status, exc.code, message, param=param), status, headers)
