"""`LimitCounters` kept in this process: the default, and the conformance reference.

Streams are plain counts; turns per window are a sliding log of timestamps per name,
at most `limit` long, so a name costs memory in proportion to its limit and an idle
name is forgotten as soon as its window is empty. The clock is injectable so the
conformance suite can move time without sleeping.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["InProcessLimitCounters", "from_url"]


class InProcessLimitCounters:
    """Stream slots and sliding-window event counts, in memory (one process).

    Args:
        clock: Seconds, monotonic (default `time.monotonic`).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._held: dict[str, int] = {}
        self._events: dict[str, tuple[float, deque[float]]] = {}

    async def hold(self, name: str, limit: int) -> bool:
        """Take a slot of `name` unless `limit` are held."""
        held = self._held.get(name, 0)
        if held >= limit:
            return False
        self._held[name] = held + 1
        return True

    async def release(self, name: str) -> None:
        """Give back a slot; the name is forgotten when none is held."""
        held = self._held.get(name, 0) - 1
        if held > 0:
            self._held[name] = held
        else:
            self._held.pop(name, None)

    async def hit(self, name: str, limit: int, window: float) -> float:
        """Count an event unless `limit` fell within `window`; else the wait until one leaves."""
        now = self._clock()
        _, events = self._events.get(name) or (window, deque())
        self._events[name] = (window, events)
        while events and events[0] <= now - window:
            events.popleft()
        if len(events) >= limit:
            return max(events[0] + window - now, 1e-3)
        events.append(now)
        return 0.0

    def sweep(self) -> int:
        """Forget the names whose windows are empty; returns how many went."""
        now = self._clock()
        stale = [
            name
            for name, (window, events) in self._events.items()
            if not events or events[-1] <= now - window
        ]
        for name in stale:
            del self._events[name]
        return len(stale)


def from_url(url: str) -> InProcessLimitCounters:
    """``memory:`` (the registry's factory): counted in this process alone."""
    return InProcessLimitCounters()
