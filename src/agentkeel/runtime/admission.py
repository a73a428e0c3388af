"""Admission under ``server.limits``: who may open a stream or start a turn now.

The counting is the coordination's (`LimitCounters`), so with replicas sharing a
backend a principal's limits hold across all of them; this module only names the
counters, compares, and turns a refusal into `RateLimitedError` (429 with
``Retry-After``) or `MessageTooLargeError` (413), counting each refusal by reason in
``agentkeel_limit_refusals_total``.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from agentkeel.runtime.coordination import LimitCounters
from agentkeel.runtime.errors import MessageTooLargeError, RateLimitedError
from agentkeel.runtime.wire import SendRequest, WireMessage
from agentkeel.server_settings import LimitSettings
from agentkeel.storage.base import SessionKey

__all__ = ["Admission"]

_MINUTE = 60.0
_STREAM_RETRY_SECONDS = 1.0
"""A stream slot frees when another stream ends, which no counter can predict."""


def _principal(key: SessionKey) -> str:
    return key.principal or ""


def message_bytes(request: SendRequest) -> int:
    """The UTF-8 size of a request's message text (0 for a resume)."""
    message = request.message
    if message is None:
        return 0
    if isinstance(message, WireMessage):
        return sum(len(part.text.encode("utf-8")) for part in message.parts)
    return len(message.encode("utf-8"))


class Admission:
    """Checks new turns and streams against `settings` with `counters`.

    Args:
        settings: The ``server.limits`` section.
        counters: Where the counts live.
        refused: Told the reason of each refusal (the metrics).
    """

    def __init__(
        self,
        settings: LimitSettings,
        counters: LimitCounters,
        refused: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.settings = settings
        self.counters = counters
        self.refused = refused

    async def admit_turn(self, key: SessionKey, request: SendRequest) -> None:
        """Count one turn of `key`'s principal and context, or raise why it may not start."""
        limits = self.settings
        size_limit = limits.max_message_bytes
        if size_limit is not None and message_bytes(request) > size_limit:
            self.refused("message_size")
            raise MessageTooLargeError(f"the message is larger than {size_limit} bytes")
        per_principal = limits.turns_per_minute_per_principal
        if per_principal is not None:
            name = f"turns:p:{_principal(key)}"
            wait = await self.counters.hit(name, per_principal, _MINUTE)
            if wait:
                self._refuse("principal_turns", f"over {per_principal} turns a minute", wait)
        per_context = limits.turns_per_minute_per_context
        if per_context is not None:
            name = f"turns:c:{_principal(key)}:{key.definition}:{key.context_id}"
            wait = await self.counters.hit(name, per_context, _MINUTE)
            if wait:
                self._refuse(
                    "context_turns", f"over {per_context} turns a minute on this context", wait
                )

    async def stream_slot(self, principal: str | None) -> str | None:
        """Take a stream slot of `principal`; the name to release, None when unlimited."""
        limit = self.settings.streams_per_principal
        if limit is None:
            return None
        name = f"streams:{principal or ''}"
        if not await self.counters.hold(name, limit):
            self._refuse("streams", f"over {limit} open streams", _STREAM_RETRY_SECONDS)
        return name

    async def release_slot(self, slot: str | None) -> None:
        """Give back a slot `stream_slot` took (None: nothing was taken)."""
        if slot is not None:
            with anyio.CancelScope(shield=True):  # a cancelled stream still gives it back
                await self.counters.release(slot)

    def _refuse(self, reason: str, what: str, wait: float) -> None:
        self.refused(reason)
        raise RateLimitedError(
            f"{what}; retry in {wait:.0f}s" if wait >= 1 else f"{what}; retry shortly",
            reason=reason,
            retry_after=wait,
        )
