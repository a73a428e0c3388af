"""RemoteRunChannel: a run that another replica is running, followed through the backend.

The replica running a turn writes each frame to the run's stream in the shared
backend; any other replica follows it with a `FrameReader`: a blocking read from the
last id it sent. Each follower has a reader of its own, closed when it stops (Redis: a
connection of its own, since a pooled connection whose blocking read was cancelled
would go back to the pool with the reply still coming, and the next user would read it).

When the backend cannot give what is missing (it was flushed, restarted or
unreachable, which shows as a gap in the ids or an error), the follower waits for the
end of the segment in storage, where the runner persists every frame before the done
frame is published, and sends the rest from there: every frame once, in order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Protocol

import anyio

from agentkeel.keys import SessionKey
from agentkeel.runtime.channels import Frame, RunChannel

__all__ = ["FrameReader", "RemoteRunChannel", "contiguous", "frame_of"]

logger = logging.getLogger(__name__)

StoredFrames = Callable[[], Awaitable[RunChannel | None]]
"""Loads the run's frames as storage keeps them (persisted at each segment's end)."""
StillLatest = Callable[[], Awaitable[bool]]
"""Whether the run is still its context's latest (a dead holder's run is not, once
another replica ran the context)."""

_BLOCK_SECONDS = 1.0
_STORAGE_POLL_SECONDS = 0.25


class FrameReader(Protocol):
    """One follower's reads of a run's new frames."""

    async def read(self, after: int, block: float) -> list[Frame]:
        """The frames after id `after` (in order), waiting up to `block` seconds for one."""
        ...

    async def close(self) -> None:
        """Release what the reader holds (its connection)."""
        ...


def contiguous(frames: Sequence[Frame], last: int) -> tuple[list[Frame], bool]:
    """The `frames` that follow id `last` without a gap, up to a done frame.

    Also whether a gap stopped them (the backend lost frames in between).
    """
    batch: list[Frame] = []
    for frame in frames:
        if frame.id != last + 1:
            return batch, True
        batch.append(frame)
        last = frame.id
        if frame.done:
            break
    return batch, False


def frame_of(frame_id: int, encoded: bytes) -> Frame | None:
    """The frame whose SSE bytes are `encoded`; None if they are malformed."""
    try:
        data = json.loads(encoded.split(b"\ndata: ", 1)[1])
    except (IndexError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return Frame(frame_id, data, encoded, data.get("done") is True)


class RemoteRunChannel(RunChannel):
    """The frames of a run running on another replica: read so far, then followed live.

    Args:
        key: The context.
        run_id: The run.
        frames: The frames the backend held when the channel was made (contiguous from 1).
        active: Whether a segment was still running then.
        reader: Makes one follower's reader.
        stored: Loads the run's frames from storage (the fallback).
        still_latest: Whether the run is still the context's latest.
    """

    def __init__(
        self,
        key: SessionKey,
        run_id: str,
        frames: Sequence[Frame],
        *,
        active: bool,
        reader: Callable[[], FrameReader],
        stored: StoredFrames,
        still_latest: StillLatest,
    ) -> None:
        super().__init__(key, run_id, frames)
        self.active = active
        self._reader = reader
        self._stored = stored
        self._still_latest = still_latest

    def append(self, frame: Frame) -> None:
        """Only the replica running the run publishes its frames."""
        raise RuntimeError("a run followed from another replica cannot be published to")

    async def batches(self, after: int, heartbeat: float) -> AsyncGenerator[Sequence[Frame], None]:
        """The retained frames after `after`, then the live ones, up to the next done frame."""
        last = after
        retained: Sequence[Frame] = [frame for frame in self.frames if frame.id > after]
        while retained:
            end = next((i + 1 for i, frame in enumerate(retained) if frame.done), len(retained))
            batch, retained = retained[:end], retained[end:]
            yield batch
            last = batch[-1].id
            if batch[-1].done:
                return
        if not self.active:
            return
        async for batch in self._live(last, heartbeat):
            yield batch

    async def _live(self, last: int, heartbeat: float) -> AsyncGenerator[Sequence[Frame], None]:
        reader = self._reader()
        quiet_since = anyio.current_time()
        try:
            while True:
                try:
                    frames = await reader.read(last, min(heartbeat, _BLOCK_SECONDS))
                except Exception as exc:
                    logger.warning("run=<%s> | following from storage: %s", self.run_id, exc)
                    break
                batch, gap = contiguous(frames, last)
                if batch:
                    last = batch[-1].id
                    quiet_since = anyio.current_time()
                    yield batch
                    if batch[-1].done:
                        return
                if gap:
                    break  # the backend lost frames: the rest comes from storage
                if not batch and anyio.current_time() - quiet_since >= heartbeat:
                    quiet_since = anyio.current_time()
                    if not await self._still_latest():
                        return  # its holder died, and the context ran again since
                    yield ()
        finally:
            with anyio.CancelScope(shield=True):
                await reader.close()
        async for stored in self._from_storage(last, heartbeat):
            yield stored

    async def _from_storage(
        self, last: int, heartbeat: float
    ) -> AsyncGenerator[Sequence[Frame], None]:
        quiet_since = anyio.current_time()
        while True:
            stored = await self._stored()
            frames: Sequence[Frame] = (
                [] if stored is None else [f for f in stored.frames if f.id > last]
            )
            end = next((index for index, frame in enumerate(frames) if frame.done), None)
            if end is not None:
                yield frames[: end + 1]
                return
            await anyio.sleep(_STORAGE_POLL_SECONDS)
            if anyio.current_time() - quiet_since >= heartbeat:
                quiet_since = anyio.current_time()
                if not await self._still_latest():
                    return
                yield ()
