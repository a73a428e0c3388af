"""The retention sweeper: enforces ``retention`` (SPEC 5) on any RetentionStorage.

It runs in the server's lifespan on a tick of its own, and each tick works in bounded
batches: run records that ended more than ``retention.runs`` ago, retained frames older
than ``retention.events``, then contexts idle for ``retention.idleSessions``, deleted
through the server's own DELETE path (which refuses a context running a turn here, and
takes a swarm's members, checkpoints and A2A tasks along). A storage never names a
context whose latest run is running or suspended. The clock is injected, so tests move
time instead of sleeping. What it swept is counted by kind for ``/metrics``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import anyio

from agentkeel.errors import AgentkeelError, RunInProgressError
from agentkeel.framework import Retention
from agentkeel.keys import SessionKey
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.retention import RetentionStorage

__all__ = ["RetentionSweeper"]

logger = logging.getLogger(__name__)


class RetentionSweeper:
    """Sweeps one storage by one retention policy.

    Args:
        storage: The storage; one without the RetentionStorage capability is not swept.
        retention: The policy (None durations keep forever).
        delete_context: Deletes one context as ``DELETE`` would; False when unknown.
        clock: Seconds since the epoch (tests pass one they move).
        tick: Seconds between sweeps.
        batch: The most items of each kind one call handles.
        on_swept: Told (kind, count) after each batch: ``runs``, ``frames``, ``sessions``.
    """

    def __init__(
        self,
        storage: SessionStorage,
        retention: Retention,
        *,
        delete_context: Callable[[SessionKey], Awaitable[bool]],
        clock: Callable[[], float] = time.time,
        tick: float = 60.0,
        batch: int = 200,
        on_swept: Callable[[str, int], None] | None = None,
    ) -> None:
        self.storage = storage if isinstance(storage, RetentionStorage) else None
        self.retention = retention
        self.delete_context = delete_context
        self.clock = clock
        self.tick = tick
        self.batch = batch
        self.on_swept = on_swept

    @property
    def active(self) -> bool:
        """Whether there is anything to enforce on this storage."""
        policy = self.retention
        durations = (policy.runs, policy.events, policy.idle_sessions)
        return self.storage is not None and any(d is not None for d in durations)

    async def run_forever(self) -> None:
        """Sweep every `tick` seconds until cancelled; a failed sweep is logged, not fatal."""
        if not self.active:
            return
        while True:
            await anyio.sleep(self.tick)
            try:
                await self.sweep()
            except AgentkeelError as exc:
                logger.warning("retention sweep failed: %s", exc.message)

    async def sweep(self) -> dict[str, int]:
        """One sweep to the end (batch after batch); how many of each kind went."""
        swept = {"runs": 0, "frames": 0, "sessions": 0}
        storage = self.storage
        if storage is None:
            return swept
        now = self.clock()
        policy = self.retention
        if policy.runs is not None:
            swept["runs"] = await self._drain("runs", storage.sweep_runs, now - policy.runs)
        if policy.events is not None:
            cutoff = now - policy.events
            swept["frames"] = await self._drain("frames", storage.sweep_frames, cutoff)
        if policy.idle_sessions is not None:
            swept["sessions"] = await self._sessions(storage, now - policy.idle_sessions)
        return swept

    async def _drain(
        self, kind: str, call: Callable[[float, int], Awaitable[int]], cutoff: float
    ) -> int:
        total = 0
        while (count := await call(cutoff, self.batch)) > 0:
            total += count
            self._count(kind, count)
            if count < self.batch:
                break
        return total

    async def _sessions(self, storage: RetentionStorage, cutoff: float) -> int:
        total = 0
        seen: set[SessionKey] = set()
        while keys := [k for k in await storage.idle_sessions(cutoff, self.batch) if k not in seen]:
            count = 0
            for key in keys:
                seen.add(key)
                try:
                    count += await self.delete_context(key)
                except RunInProgressError:
                    continue  # a turn started since it was found: no longer idle
            total += count
            self._count("sessions", count)
        return total

    def _count(self, kind: str, count: int) -> None:
        if count and self.on_swept is not None:
            self.on_swept(kind, count)
