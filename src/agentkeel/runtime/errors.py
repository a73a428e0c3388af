"""Errors the runtime raises that every binding answers in its own shape.

They carry their wire `code`; the HTTP status is the native wire's business
(`agentkeel.server.errors`), the A2A error is the A2A binding's.
"""

from __future__ import annotations

from agentkeel.errors import AgentkeelError

__all__ = [
    "IdempotencyKeyReusedError",
    "MessageTooLargeError",
    "RateLimitedError",
    "ShuttingDownError",
]


class ShuttingDownError(AgentkeelError):
    """The server is draining for a shutdown and takes no new turns."""

    code = "shutting_down"


class IdempotencyKeyReusedError(AgentkeelError):
    """An Idempotency-Key came back with a different request body."""

    code = "idempotency_key_reused"


class RateLimitedError(AgentkeelError):
    """A principal (or a context) is over one of ``server.limits``: try again later.

    `reason` names the limit (``streams``, ``principal_turns``, ``context_turns``), for the
    refusal metrics; `retry_after` is the seconds until a retry can succeed.
    """

    code = "rate_limited"

    def __init__(self, message: str, *, reason: str, retry_after: float) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after


class MessageTooLargeError(AgentkeelError):
    """A message is larger than ``server.limits.maxMessageBytes`` (no retry will help)."""

    code = "message_too_large"
