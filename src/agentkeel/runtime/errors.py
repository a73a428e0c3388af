"""Errors the runtime raises that every binding answers in its own shape.

They carry their wire `code`; the HTTP status is the native wire's business
(`agentkeel.server.errors`), the A2A error is the A2A binding's.
"""

from __future__ import annotations

from agentkeel.errors import AgentkeelError

__all__ = ["IdempotencyKeyReusedError", "ShuttingDownError"]


class ShuttingDownError(AgentkeelError):
    """The server is draining for a shutdown and takes no new turns."""

    code = "shutting_down"


class IdempotencyKeyReusedError(AgentkeelError):
    """An Idempotency-Key came back with a different request body."""

    code = "idempotency_key_reused"
