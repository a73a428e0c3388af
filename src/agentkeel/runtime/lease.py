"""InProcessRunLease: the turn line of each context, kept in this process.

Every caller takes a ticket when it arrives (synchronously, before its first await, so
the order is the order of the requests) and waits until its ticket is at the head of
the line. A grant's fencing token is the count of grants this lease has made (over
every context, so nothing is kept per context once its line is empty): it only grows.
A grant with a ttl that was not renewed in time is taken over by the next ticket in
line; from then on its holder's `renew` and `check` raise LeaseLostError and its
`release` releases nothing. Cancels are delivered to the current holder's handler.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

import anyio

from agentkeel.errors import RunInProgressError
from agentkeel.runtime.coordination import CancelHandler, LeaseGrant, LeaseLostError
from agentkeel.storage.base import SessionKey

__all__ = ["InProcessRunLease", "TurnTicket"]


@dataclass(eq=False, slots=True)
class TurnTicket:
    """A caller's place in its context's line."""

    ready: anyio.Event = field(default_factory=anyio.Event)


@dataclass(eq=False, slots=True)
class _Line:
    """One context: its holder, the callers waiting behind it, and its grant count."""

    waiting: deque[TurnTicket] = field(default_factory=deque)
    holder: LeaseGrant | None = None
    expires_at: float | None = None
    on_cancel: CancelHandler | None = None

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now


class InProcessRunLease:
    """`RunLease` in this process: a line of tickets per context."""

    def __init__(self) -> None:
        self._lines: dict[SessionKey, _Line] = {}
        self._grants = 0
        """Grants made so far: the last fence."""

    def held(self, key: SessionKey) -> bool:
        """Whether a caller holds `key` or waits for it."""
        line = self._lines.get(key)
        return line is not None and (line.holder is not None or bool(line.waiting))

    async def acquire(
        self,
        key: SessionKey,
        *,
        wait: bool = True,
        ttl: float | None = None,
        on_cancel: CancelHandler | None = None,
    ) -> LeaseGrant:
        """Join the line of `key` (synchronously) and wait for the head of it."""
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = _Line()
        elif not wait and (line.holder is not None or line.waiting):
            if line.holder is None or not line.expired(time.monotonic()):
                raise RunInProgressError(
                    f"context {key.context_id} is running a turn; try again when it ends"
                )
        ticket = TurnTicket()
        line.waiting.append(ticket)
        self._wake(line)
        try:
            while not ticket.ready.is_set():
                remaining = None
                if line.expires_at is not None:
                    remaining = max(0.0, line.expires_at - time.monotonic())
                with anyio.move_on_after(remaining):
                    await ticket.ready.wait()
                if not ticket.ready.is_set():
                    self._wake(line)  # the holder may have expired meanwhile
        except BaseException:
            self._leave(key, line, ticket)
            raise
        line.waiting.popleft()
        self._grants += 1
        grant = LeaseGrant(key=key, fence=self._grants, ttl=ttl)
        line.holder, line.on_cancel = grant, on_cancel
        line.expires_at = None if ttl is None else time.monotonic() + ttl
        return grant

    async def renew(self, grant: LeaseGrant) -> LeaseGrant:
        """Extend `grant` by its ttl."""
        line = self._holding(grant)
        if grant.ttl is not None:
            line.expires_at = time.monotonic() + grant.ttl
        return grant

    async def release(self, grant: LeaseGrant) -> bool:
        """Let the next ticket in; False for a grant that is no longer the holder."""
        line = self._lines.get(grant.key)
        if line is None or line.holder != grant:
            return False
        line.holder, line.on_cancel, line.expires_at = None, None, None
        if line.waiting:
            self._wake(line)
        else:
            del self._lines[grant.key]
        return True

    async def check(self, grant: LeaseGrant) -> None:
        """Raise LeaseLostError unless `grant` holds its context."""
        self._holding(grant)

    async def cancel(self, key: SessionKey, run_id: str, *, drop: bool = False) -> bool:
        """Tell the holder's handler to cancel `run_id`."""
        line = self._lines.get(key)
        if line is None or line.holder is None or line.on_cancel is None:
            return False
        return line.on_cancel(run_id, drop)

    def _holding(self, grant: LeaseGrant) -> _Line:
        line = self._lines.get(grant.key)
        if line is None or line.holder != grant or line.expired(time.monotonic()):
            if line is not None and line.holder == grant:
                self._wake(line)
            raise LeaseLostError(
                f"the lease on context {grant.key.context_id} (fence {grant.fence}) was lost"
            )
        return line

    def _wake(self, line: _Line) -> None:
        """Hand the context to the head of the line if it is free (or its holder expired)."""
        if line.holder is not None:
            if not line.expired(time.monotonic()):
                return
            line.holder, line.on_cancel, line.expires_at = None, None, None
        if line.waiting:
            line.waiting[0].ready.set()

    def _leave(self, key: SessionKey, line: _Line, ticket: TurnTicket) -> None:
        """A caller gave up waiting: free its place and wake the next one."""
        try:
            line.waiting.remove(ticket)
        except ValueError:
            return
        if ticket.ready.is_set() or line.holder is None:
            if line.waiting:
                line.waiting[0].ready.set()
            elif line.holder is None and self._lines.get(key) is line:
                del self._lines[key]
