"""One task renews the leases of every running turn of this process.

A shared coordination gives a turn's lease a ttl, so that a dead replica's contexts free
themselves; the turn's holder renews it every third of that while the turn runs. A task
per turn did so at first: most turns end long before their first renewal, and spawning
that task, then cancelling its sleep, cost each turn two event-loop wake-ups and a task
for nothing. One task per process now sleeps until the oldest running turn's renewal is
due, and not at all while no turn runs.

The turns' grants share the coordination's ttl, so the turns come due in the order they
started (and were renewed in): the oldest entry is always the next one due.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup

from agentkeel.runtime.coordination import LeaseGrant, RunLease

__all__ = ["Renewals"]

logger = logging.getLogger(__name__)


@dataclass(eq=False, slots=True)
class Renewed:
    """A running turn's lease, as the renewals keep it."""

    grant: LeaseGrant
    on_renewed: Callable[[LeaseGrant], None]
    """Told the grant each renewal returned."""
    on_lost: Callable[[Exception], None]
    """Told why, once a renewal failed (the turn must stop: another replica may run it)."""


class Renewals:
    """The running turns' leases, renewed by one task in the server's task group."""

    def __init__(self, lease: RunLease) -> None:
        self.lease = lease
        self._due: dict[Renewed, float] = {}
        """When each lease is renewed next, oldest (soonest) first."""
        self._woken: anyio.Event | None = None
        self._running = False

    def add(
        self,
        grant: LeaseGrant,
        group: TaskGroup,
        *,
        on_renewed: Callable[[LeaseGrant], None],
        on_lost: Callable[[Exception], None],
    ) -> Renewed:
        """Renew `grant` every third of its ttl until `remove`; starts the task if needed."""
        assert grant.ttl is not None
        held = Renewed(grant, on_renewed, on_lost)
        self._due[held] = anyio.current_time() + grant.ttl / 3
        if not self._running:
            self._running = True
            group.start_soon(self._renew_forever)
        elif self._woken is not None:
            self._woken.set()
        return held

    def remove(self, held: Renewed) -> None:
        """The turn ended: stop renewing its lease."""
        self._due.pop(held, None)

    async def _renew_forever(self) -> None:
        try:
            while True:
                if not self._due:
                    self._woken = anyio.Event()
                    await self._woken.wait()
                    self._woken = None
                    continue
                held, due = next(iter(self._due.items()))
                delay = due - anyio.current_time()
                if delay > 0:
                    await anyio.sleep(delay)
                    continue  # it may have ended meanwhile
                await self._renew(held)
        finally:
            self._running = False

    async def _renew(self, held: Renewed) -> None:
        try:
            grant = await self.lease.renew(held.grant)
        except Exception as exc:
            if self._due.pop(held, None) is not None:
                held.on_lost(exc)
            return
        if self._due.pop(held, None) is not None:  # still running: next in line
            assert grant.ttl is not None
            held.grant = grant
            held.on_renewed(grant)
            self._due[held] = anyio.current_time() + grant.ttl / 3
