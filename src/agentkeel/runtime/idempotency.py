"""InProcessIdempotency: Idempotency-Key claims kept in this process.

A claim is checked and made with no await in between, so two requests with the same
key, even at the same instant, make one claim: the second gets the first one's run.
Claims last `ttl` seconds; at most `IDEMPOTENCY_CAPACITY` are kept (oldest forgotten
first).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Generic, TypeVar

from agentkeel.runtime.coordination import IdempotencyScope
from agentkeel.runtime.errors import IdempotencyKeyReusedError
from agentkeel.storage.base import SessionKey

__all__ = ["IDEMPOTENCY_CAPACITY", "InProcessIdempotency"]

IDEMPOTENCY_CAPACITY = 10_000
"""Most idempotency keys remembered at once (oldest forgotten first)."""

T = TypeVar("T")


class InProcessIdempotency(Generic[T]):
    """`IdempotencyStore` in this process.

    Args:
        ttl: Seconds a claim lasts.
        capacity: Most claims kept at once.
    """

    def __init__(self, ttl: float, *, capacity: int = IDEMPOTENCY_CAPACITY) -> None:
        self.ttl = ttl
        self.capacity = capacity
        self._claims: OrderedDict[IdempotencyScope, tuple[T, str, SessionKey, float]] = (
            OrderedDict()
        )

    def __len__(self) -> int:
        return len(self._claims)

    async def claim(
        self, scope: IdempotencyScope, fingerprint: str, run: T, *, context: SessionKey
    ) -> tuple[T, bool]:
        """The earlier claim's run, or `run` claimed now (no await between check and claim)."""
        found = self._claims.get(scope)
        if found is not None and found[3] >= time.monotonic():
            if found[1] != fingerprint:
                raise IdempotencyKeyReusedError(
                    "this Idempotency-Key was used for a different request"
                )
            return found[0], False
        self._claims[scope] = (run, fingerprint, context, time.monotonic() + self.ttl)
        self._claims.move_to_end(scope)
        while len(self._claims) > self.capacity:
            self._claims.popitem(last=False)
        return run, True

    async def release(self, scope: IdempotencyScope, run: T) -> None:
        """Withdraw the claim if `run` still holds it."""
        found = self._claims.get(scope)
        if found is not None and found[0] == run:
            del self._claims[scope]

    async def forget_context(self, context: SessionKey) -> None:
        """Drop the claims of `context`'s runs."""
        for scope in [s for s, found in self._claims.items() if found[2] == context]:
            del self._claims[scope]

    def sweep(self) -> int:
        """Drop expired claims."""
        now = time.monotonic()
        expired = [scope for scope, found in self._claims.items() if found[3] < now]
        for scope in expired:
            del self._claims[scope]
        return len(expired)
