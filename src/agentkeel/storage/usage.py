"""UsageStorage: token totals kept beside the sessions, per context and per principal.

An optional capability, like RunEventStorage: a backend that has it keeps the totals
with the session (so deleting a context forgets its total) and a principal's totals per
UTC day apart from any one context (so deleting a context never resets a daily budget).
Every model call adds to both, so the totals count tokens that were spent even by a run
that later crashed; with shared storage, every replica reads the same totals.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from agentkeel.result import Usage
from agentkeel.storage.base import SessionKey

__all__ = ["UsageStorage", "utc_day"]


def utc_day(at: float | None = None) -> str:
    """The UTC day of `at` (now when None) as ``YYYY-MM-DD``, the key of daily totals."""
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if at is None else at))


@runtime_checkable
class UsageStorage(Protocol):
    """Token totals per context and per principal and day."""

    async def add_usage(self, key: SessionKey, usage: Usage, *, day: str) -> None:
        """Add `usage` to the context's total and to its principal's total of `day`.

        `key.principal` None (no authentication) counts under one shared principal.
        """
        ...

    async def context_usage(self, key: SessionKey) -> Usage:
        """Everything the context's model calls used (zero for an unknown context)."""
        ...

    async def principal_usage(self, principal: str | None, day: str) -> Usage:
        """What the principal's model calls used on `day` (``YYYY-MM-DD``, UTC)."""
        ...
