"""Wake-ups for a run's next segment: how a follower of a suspended task learns it resumed.

A task waiting for input is a run between two segments. Whoever resumes it (an A2A
message, the native wire, a decision after a restart), the runtime starts the new
segment through `RetainedStreams.put`, which tells its ``on_segment`` listeners; this
turns that call into an event per run id, so `SubscribeToTask` (and push delivery)
wake the moment the run goes on instead of polling the context's channel.
"""

from __future__ import annotations

import anyio

from agentkeel.server.streaming import RetainedStreams, RunChannel

__all__ = ["SegmentWatch"]


class SegmentWatch:
    """One event per awaited run id, set when a segment of that run starts.

    Args:
        streams: The runtime's retained streams, whose segment starts this listens to.
    """

    def __init__(self, streams: RetainedStreams) -> None:
        self._events: dict[str, anyio.Event] = {}
        streams.on_segment.append(self._started)

    def _started(self, channel: RunChannel) -> None:
        event = self._events.pop(channel.run_id, None)
        if event is not None:
            event.set()

    def expect(self, run_id: str) -> anyio.Event:
        """The event the next segment of `run_id` sets.

        Get it before checking the channel, so a segment that starts in between still
        wakes the waiter.
        """
        event = self._events.get(run_id)
        if event is None:
            event = self._events[run_id] = anyio.Event()
        return event

    def forget(self, run_id: str, event: anyio.Event) -> None:
        """Drop `event` if nobody else is waiting on it any more (a waiter gave up)."""
        if self._events.get(run_id) is event and not event.is_set():
            del self._events[run_id]
