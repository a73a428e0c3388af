"""Idempotency keys: the first request with a key claims it, every other one joins its run.

A client that retries a request that looked stuck sends the same ``Idempotency-Key``
(A2A: the same ``messageId``) again, often before the first request has even reached
the run. Checking for a key and registering it must therefore be one step: `claim`
does both without awaiting, so under one event loop no second request can slip in
between, and every request after the first gets the first one's job back (and waits
for it, or attaches to its stream). A key that comes back with another body is refused
(``422 idempotency_key_reused``), so a key cannot be replayed against another message.

A claim is scoped by (principal, definition, contextId as sent, key) and kept for the
retention of run events, at most `IDEMPOTENCY_CAPACITY` at once (oldest forgotten
first). A turn that never started gives its claim back (`release`), so a retry after,
say, ``409 context_busy`` runs anew. `IdempotencyClaims` is the in-process
`IdempotencyStore`; a shared one across replicas needs the same atomic claim (a Redis
``SET NX``, a PostgreSQL insert on a unique key) and passes the same conformance suite
(`agentkeel.testing.coordination`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from agentkeel.runtime.coordination import IdempotencyScope
from agentkeel.runtime.errors import IdempotencyKeyReusedError
from agentkeel.storage.base import SessionKey

__all__ = ["IDEMPOTENCY_CAPACITY", "IdempotencyClaims", "IdempotencyScope"]

IDEMPOTENCY_CAPACITY = 10_000
"""Most idempotency keys remembered at once (oldest forgotten first)."""


_Job = TypeVar("_Job")


@dataclass(slots=True)
class _Claim(Generic[_Job]):
    job: _Job
    fingerprint: str
    expires: float
    context: SessionKey


class IdempotencyClaims(Generic[_Job]):
    """`IdempotencyStore` in this process: claimed keys and the job each one started.

    Args:
        ttl: Seconds a claim is kept.
        capacity: Most claims kept at once.
        clock: The monotonic clock (seconds).
    """

    def __init__(
        self,
        ttl: float,
        *,
        capacity: int = IDEMPOTENCY_CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.capacity = capacity
        self.clock = clock
        self._claims: OrderedDict[IdempotencyScope, _Claim[_Job]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._claims)

    async def claim(
        self,
        scope: IdempotencyScope,
        fingerprint: str,
        new_job: Callable[[], _Job],
        *,
        context: SessionKey,
    ) -> tuple[_Job, bool]:
        """The job of `scope` and whether this call created it (with `new_job`).

        Atomic: it never awaits, so two requests with one key never both get True.

        Raises:
            IdempotencyKeyReusedError: The key was claimed for a different body.
        """
        now = self.clock()
        found = self._claims.get(scope)
        if found is not None and found.expires >= now:
            if found.fingerprint != fingerprint:
                raise IdempotencyKeyReusedError(
                    "this Idempotency-Key was used for a different request; "
                    "use a new key for a new message"
                )
            return found.job, False
        job = new_job()
        self._claims[scope] = _Claim(
            job=job, fingerprint=fingerprint, expires=now + self.ttl, context=context
        )
        self._claims.move_to_end(scope)
        while len(self._claims) > self.capacity:
            self._claims.popitem(last=False)
        return job, True

    async def release(self, scope: IdempotencyScope, job: _Job) -> None:
        """Give back the claim of `scope` if `job` still holds it (its turn never started)."""
        found = self._claims.get(scope)
        if found is not None and found.job == job:
            del self._claims[scope]

    async def forget_context(self, context: SessionKey) -> None:
        """Drop every claim made for a run of `context` (it was deleted)."""
        for scope in [s for s, c in self._claims.items() if c.context == context]:
            del self._claims[scope]

    def sweep(self) -> int:
        """Drop the expired claims; returns how many went."""
        now = self.clock()
        expired = [s for s, c in self._claims.items() if c.expires < now]
        for scope in expired:
            del self._claims[scope]
        return len(expired)
