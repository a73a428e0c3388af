"""The client's own errors, and the typed error for each wire error code.

An error answer (``{"error": {"code", "message"}}``) becomes the `agentkeel.errors`
class of its code, so ``except ContextNotFoundError`` works the same in the server's
code and the client's; a code without a class of its own becomes a `ServerError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from agentkeel import errors
from agentkeel.errors import AgentkeelError, InterruptPendingError, InvalidRequestError

__all__ = ["ConnectionLostError", "ServerError", "malformed", "wire_error"]

_INTERRUPT_ID = re.compile(r"\bint-[A-Za-z0-9_-]+")


class ServerError(AgentkeelError):
    """An error answer without a class of its own; `code` is the wire code as sent."""

    code: str  # type: ignore[misc]  # an instance value here, a class constant elsewhere

    def __init__(self, message: str, *, code: str, status_code: int) -> None:
        super().__init__(message)
        self.code = code
        self.status_code = status_code
        """The HTTP status of the answer."""


class ConnectionLostError(AgentkeelError):
    """The server stayed unreachable through every retry (the turn may have run anyway)."""

    code = "connection_lost"


_ERROR_CLASSES: dict[str, Callable[[str], AgentkeelError]] = {
    "context_not_found": errors.ContextNotFoundError,
    "context_busy": errors.RunInProgressError,
    "invalid_context_id": errors.InvalidContextIdError,
    "invalid_request": InvalidRequestError,
    "invalid_json": InvalidRequestError,
    "interrupt_not_found": errors.InterruptNotFoundError,
    "interrupt_error": errors.InterruptError,
    "storage_error": errors.StorageError,
    "no_active_run": errors.NoActiveRunError,
    "context_exists": errors.ContextExistsError,
    "message_not_found": errors.MessageNotFoundError,
}


def malformed(what: str) -> ServerError:
    """The error for an answer that is not SPEC's wire."""
    return ServerError(f"malformed answer: {what}", code="bad_response", status_code=200)


def wire_error(status_code: int, body: bytes) -> AgentkeelError:
    """Turn an error answer (``{"error": {"code", "message"}}``) into a typed error."""
    try:
        error = json.loads(body)["error"]
        code, message = error["code"], error["message"]
        if not isinstance(code, str) or not isinstance(message, str):
            raise TypeError("code and message must be strings")
    except (ValueError, LookupError, TypeError):
        message = f"the server answered HTTP {status_code} without an error body"
        return ServerError(message, code="http_error", status_code=status_code)
    if code == "interrupt_pending":
        named, found = error.get("interruptId"), _INTERRUPT_ID.search(message)
        interrupt_id = named if isinstance(named, str) else found.group() if found else ""
        return InterruptPendingError(message, interrupt_id=interrupt_id)
    make = _ERROR_CLASSES.get(code)
    return make(message) if make else ServerError(message, code=code, status_code=status_code)
