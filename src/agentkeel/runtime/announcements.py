"""Announcements: a word about a run, told to every replica through the shared fan-out.

A shared fan-out (`SharedStreams`) sends an `AnnounceWrite` with its next batch (Redis
``PUBLISH``, PostgreSQL ``NOTIFY``), and hands what its listening connection hears to
`Announced`, which wakes the requests waiting for a segment of a run (topic
``segment``: a suspended run resumed on another replica) and calls the listeners of
the other topics (A2A: a task's push configs changed). An announcement made while a
listening connection was down is lost, so every user keeps a fallback: a wait for a
segment still checks once a second.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

__all__ = ["SEGMENT_TOPIC", "AnnounceWrite", "Announced", "Heard"]

logger = logging.getLogger(__name__)

SEGMENT_TOPIC = "segment"
"""Announced as a segment of a run starts, wherever it runs."""
_SEGMENT_RECHECK_SECONDS = 1.0
"""How often a wait for a segment checks anyway (for a lost announcement)."""

Heard = Callable[[str, str], None]
"""An announcement's listener: (the run's context as one string, the run id)."""


@dataclass(frozen=True, slots=True)
class AnnounceWrite:
    """Tell every replica (this one too) `topic` about a run: ``[topic, context, run]``."""

    topic: str
    context: str
    """The run's context as one string (`shared_streams.context_name`)."""
    run_id: str

    def encoded(self) -> list[str]:
        """What a backend carries."""
        return [self.topic, self.context, self.run_id]


class Announced:
    """What this replica heard: wakes segment waiters, calls listeners by topic."""

    def __init__(self) -> None:
        self._segment_waiters: dict[tuple[str, str], set[anyio.Event]] = {}
        self._listeners: dict[str, list[Heard]] = {}

    def heard(self, announced: object) -> None:
        """A backend heard an announcement (`AnnounceWrite.encoded`), from any replica."""
        if not (
            isinstance(announced, list)
            and len(announced) == 3
            and all(isinstance(part, str) for part in announced)
        ):
            return
        topic, context, run_id = announced
        if topic == SEGMENT_TOPIC:
            for event in self._segment_waiters.get((context, run_id), ()):
                event.set()
        for listener in list(self._listeners.get(topic, ())):
            try:
                listener(context, run_id)
            except Exception:
                logger.exception("topic=<%s> | a listener of announcements failed", topic)

    def on(self, topic: str, listener: Heard) -> Callable[[], None]:
        """Call `listener` for each announcement of `topic`; returns what stops it."""
        self._listeners.setdefault(topic, []).append(listener)
        return lambda: self._listeners.get(topic, []).remove(listener)

    async def segment(
        self,
        context: str,
        run_id: str,
        timeout: float,
        running: Callable[[], Awaitable[bool]],
    ) -> bool:
        """Wait up to `timeout` seconds until `running()` says a segment of the run runs.

        It is asked first, then on each announcement of the run's segment, and once a
        second without one.
        """
        name = (context, run_id)
        waiters = self._segment_waiters.setdefault(name, set())
        event = anyio.Event()
        waiters.add(event)
        try:
            with anyio.move_on_after(timeout):
                while not await running():
                    with anyio.move_on_after(_SEGMENT_RECHECK_SECONDS):
                        await event.wait()
                    if event.is_set():
                        waiters.discard(event)
                        event = anyio.Event()
                        waiters.add(event)
                return True
            return False
        finally:
            waiters.discard(event)
            if not waiters:
                self._segment_waiters.pop(name, None)
