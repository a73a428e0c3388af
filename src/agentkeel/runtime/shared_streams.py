"""SharedStreams: the part of a shared fan-out that does not depend on where frames go.

A shared fan-out (Redis Streams, or PostgreSQL alone) keeps the runs running on this
replica in memory, as the in-process fan-out does, so that publishing stays
synchronous (a frame is published from the Agent's event callback) and followers here
read memory. What was published is turned into `Write` records, and a writer task
hands them to the backend in batches (`send_batch`); a follower on another replica
reads the backend (`RemoteRunChannel`, through the backend's `FrameReader`).

A small pointer per context names its latest run, where its latest segment starts and
whether it runs: written at a segment's start and end, and once a second while it
runs (so a backend that forgot it has it back within a second). It holds the fence of
the segment's lease grant (`RunStream.order`), and a backend keeps the pointer of the
highest: a turn's commit frees the lease, so the next turn may start on another
replica before this one's done frame (and its pointer) reached the backend. Frames are persisted
in storage at the end of every segment, before its done frame is published, so a
reconnect works after the backend forgot them, and a follower that meets a gap in
the ids finishes from storage.

A segment's start is also announced to every replica (Redis ``PUBLISH``, PostgreSQL
``NOTIFY``: `announce`, heard through `on_announcement`), so a request waiting for a
suspended run to resume on another replica (`next_segment`) wakes at once; it still
reads the pointer once a second, since an announcement made while the listening
connection was down is lost. Bindings announce their own topics the same way (A2A: a
task's push configs changed, for the replica running it).

Losing the backend loses no turn: the writer drops what it cannot send (and says so
in `degraded`), the run goes on and commits, and followers elsewhere finish from
storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.runtime.announcements import SEGMENT_TOPIC, Announced, AnnounceWrite, Heard
from agentkeel.runtime.channels import Frame, RetainedStreams, RunChannel
from agentkeel.runtime.coordination import RunStream
from agentkeel.runtime.remote_channel import FrameReader, RemoteRunChannel
from agentkeel.storage.base import SessionStorage

__all__ = [
    "FrameWrite",
    "PointerWrite",
    "SharedRunChannel",
    "SharedStreams",
    "Write",
]

logger = logging.getLogger(__name__)

_POINTER_REFRESH_SECONDS = 1.0
_COALESCE_SECONDS = 0.005


@dataclass(frozen=True, slots=True)
class FrameWrite:
    """Append one frame to its run's stream."""

    key: SessionKey
    run_id: str
    frame: Frame
    ttl: int | None


@dataclass(frozen=True, slots=True)
class PointerWrite:
    """Set (or, with `value` None, delete) a context's pointer; touch its run's expiry."""

    key: SessionKey
    run_id: str | None
    value: str | None
    ttl: int | None


Write = FrameWrite | PointerWrite | AnnounceWrite


class SharedRunChannel(RunChannel):
    """A run running here: its frames in memory, and each one handed to the writer."""

    def __init__(
        self,
        key: SessionKey,
        run_id: str,
        frames: list[Frame],
        sink: Callable[[SharedRunChannel, Frame], None],
    ) -> None:
        super().__init__(key, run_id, frames)
        self._sink = sink
        self.pointer_at = 0.0
        """When the context's pointer was last written for this run (monotonic)."""

    def append(self, frame: Frame) -> None:
        """Publish `frame` here, and to the backend through the writer."""
        super().append(frame)
        self._sink(self, frame)


class SharedStreams:
    """`StreamFanout` over a shared backend; a subclass gives the backend's I/O.

    Args:
        storage: Where segments' frames persist, and are read back from.
        retention: Seconds a finished run's frames stay (None: no expiry).
    """

    backend = "shared"
    """The backend's name, for logs and ``/readyz``."""

    def __init__(self, storage: SessionStorage, retention: float | None) -> None:
        self.retention = retention
        self.local = RetainedStreams(storage, retention)
        self.degraded: str | None = None
        """Why the backend could not be used last time (None: it could)."""
        self._writes: list[Write] = []
        self._queued = 0
        self._written = 0
        self._wake = asyncio.Event()
        self._done = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.announced = Announced()
        """What this replica heard announced (a backend hands it every announcement)."""

    # -- what a backend provides -------------------------------------------------------

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        """Connect to the backend while inside."""
        yield

    async def send_batch(self, writes: list[Write]) -> None:
        """Send `writes`, in order, in as few round trips as the backend allows."""
        raise NotImplementedError

    async def read_pointer(self, key: SessionKey) -> str | None:
        """The context's pointer, as written."""
        raise NotImplementedError

    async def read_frames(self, key: SessionKey, run_id: str) -> list[Frame]:
        """Every frame the backend holds for the run, in order."""
        raise NotImplementedError

    def reader(self, key: SessionKey, run_id: str) -> FrameReader:
        """A reader of the run's new frames for one follower (closed when it stops)."""
        raise NotImplementedError

    async def ping(self) -> None:
        """Raise unless the backend answers now."""
        raise NotImplementedError

    def announce(self, topic: str, key: SessionKey, run_id: str) -> None:
        """Tell every replica `topic` about the run (sent with the next batch)."""
        self._queue(AnnounceWrite(topic, context_name(key), run_id))

    def on_announcement(self, topic: str, listener: Heard) -> Callable[[], None]:
        """Call `listener` for each announcement of `topic`; returns what stops it."""
        return self.announced.on(topic, listener)

    # -- lifecycle ---------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Connect, and run the writer while inside; on exit, send what is left."""
        async with self.connected():
            self._wake = asyncio.Event()
            self._done = asyncio.Condition()
            self._task = asyncio.get_running_loop().create_task(self._write_forever())
            try:
                yield
            finally:
                with anyio.move_on_after(5):
                    await self.flush()
                task, self._task = self._task, None
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def health(self) -> str | None:
        """None when the backend answers now; else why not (for ``/readyz``)."""
        try:
            with anyio.fail_after(1):
                await self.ping()
        except Exception as exc:
            self.degraded = f"{self.backend}: {type(exc).__name__}"
            return self.degraded
        self.degraded = None  # it answers again: the next writes will go through
        return None

    # -- the writer --------------------------------------------------------------------

    def _queue(self, write: Write) -> None:
        self._writes.append(write)
        self._queued += 1
        self._wake.set()

    async def flush(self) -> None:
        """Wait until what was queued so far was sent (or given up on)."""
        target = self._queued
        if self._task is None:
            return
        async with self._done:
            await self._done.wait_for(lambda: self._written >= target)

    async def _write_forever(self) -> None:
        while True:
            await self._wake.wait()
            # a few milliseconds for the frames published right after this one: a burst
            # of tokens then costs one round trip, at the price of that delay elsewhere
            await asyncio.sleep(_COALESCE_SECONDS)
            self._wake.clear()
            writes, self._writes = self._writes, []
            if writes:
                try:
                    await self.send_batch(writes)
                    self.degraded = None
                except Exception as exc:
                    if self.degraded is None:
                        logger.warning(
                            "%s | frames are not fanned out (storage still has them): %s",
                            self.backend,
                            exc,
                        )
                    self.degraded = f"{self.backend}: {type(exc).__name__}"
            async with self._done:
                self._written += len(writes)
                self._done.notify_all()

    def _sent(self, channel: SharedRunChannel, frame: Frame) -> None:
        now = time.monotonic()
        ttl = _seconds(self.retention, running=not frame.done)
        self._queue(FrameWrite(channel.key, channel.run_id, frame, ttl))
        if frame.done or now - channel.pointer_at >= _POINTER_REFRESH_SECONDS:
            channel.pointer_at = now
            pointer = _pointer(channel, active=not frame.done)
            self._queue(PointerWrite(channel.key, channel.run_id, pointer, ttl))

    # -- the Protocol ------------------------------------------------------------------

    async def run(self, key: SessionKey, run_id: str, *, resumed: bool) -> RunStream:
        """The stream of a starting run: new, or a resumed run's, continuing its ids."""
        found = await self.local.run(key, run_id, resumed=resumed)
        if isinstance(found, SharedRunChannel):
            return found
        channel = SharedRunChannel(key, run_id, list(found.frames), self._sent)
        channel.ended_at = found.ended_at
        return channel

    def put(self, stream: RunStream) -> None:
        """Make `stream` its context's latest run, here and in the backend."""
        self.local.put(stream)
        if isinstance(stream, SharedRunChannel) and stream.active:
            stream.pointer_at = time.monotonic()
            ttl = _seconds(self.retention, running=True)
            pointer = _pointer(stream, active=True)
            self._queue(PointerWrite(stream.key, stream.run_id, pointer, ttl))
            self.announce(SEGMENT_TOPIC, stream.key, stream.run_id)

    def on_segment(self, listener: Callable[[RunStream], None]) -> Callable[[], None]:
        """Call `listener` as each segment of a run starts here."""
        return self.local.on_segment(listener)

    async def latest(self, key: SessionKey) -> RunStream | None:
        """The context's latest run: here, followed from the backend, or from storage."""
        await self.flush()
        try:
            pointer = _decode(await self.read_pointer(key))
        except Exception as exc:
            self.degraded = f"{self.backend}: {type(exc).__name__}"
            return await self.local.latest(key)
        if pointer is None:
            return await self.local.latest(key)
        run_id, active, segment = pointer
        here = self.local._latest.get(key)
        if isinstance(here, SharedRunChannel) and here.run_id == run_id:
            return await self.local.latest(key)
        try:
            frames = await self.read_frames(key, run_id)
        except Exception:
            frames = []
        if [frame.id for frame in frames] != list(range(1, len(frames) + 1)):
            frames = []  # the backend lost some: what is stored is whole, the live rest follows
            stored = await self.local._load(key, run_id)
            if stored is not None and (not active or stored.last_id > segment):
                return stored
        active = active and not (frames and frames[-1].done)
        return self._remote(key, run_id, frames, active=active)

    def _remote(
        self, key: SessionKey, run_id: str, frames: list[Frame], *, active: bool
    ) -> RemoteRunChannel:
        async def still_latest() -> bool:
            try:
                pointer = _decode(await self.read_pointer(key))
            except Exception:
                return True
            return pointer is None or pointer[0] == run_id

        return RemoteRunChannel(
            key,
            run_id,
            frames,
            active=active,
            reader=lambda: self.reader(key, run_id),
            stored=lambda: self.local._load(key, run_id),
            still_latest=still_latest,
        )

    async def next_segment(self, key: SessionKey, run_id: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a segment of `run_id` to run, on any replica.

        Woken by the segment's announcement; the pointer is read first (the segment may
        already run), then once a second.
        """

        async def running() -> bool:
            try:
                pointer = _decode(await self.read_pointer(key))
            except Exception:
                return False
            return pointer is not None and pointer[0] == run_id and pointer[1]

        return await self.announced.segment(context_name(key), run_id, timeout, running)

    async def persist(self, stream: RunStream, done: Frame) -> None:
        """Save the run's frames, `done` included, in storage before `done` is published."""
        await self.local.persist(stream, done)

    def retained_body(self, stream: RunStream, done: Frame) -> bytes | None:
        """What `persist` stores (the in-process fan-out's body)."""
        return self.local.retained_body(stream, done)

    def drop(self, key: SessionKey) -> None:
        """Forget the context's latest run here and in the backend (it was deleted)."""
        self.local.drop(key)
        self._queue(PointerWrite(key, None, None, None))

    def sweep(self) -> int:
        """Forget expired runs here (the backend expires its own)."""
        return self.local.sweep()


def _pointer(channel: RunChannel, *, active: bool) -> str:
    data: JSONObject = {"run": channel.run_id, "seg": channel.latest_segment_start()}
    data["active"] = active
    if channel.order:
        data["fence"] = channel.order
    return json.dumps(data, separators=(",", ":"))


def _decode(raw: str | None) -> tuple[str, bool, int] | None:
    """(run id, whether a segment runs, where the latest segment starts) of a pointer."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("run"), str):
        return None
    segment = value.get("seg")
    return value["run"], value.get("active") is True, segment if isinstance(segment, int) else 0


def _seconds(retention: float | None, *, running: bool = False) -> int | None:
    """Seconds a key lives: the retention (plus an hour for a running segment's keys)."""
    if retention is None:
        return 86_400 if running else None
    return max(1, round(retention + (3600 if running else 0)))


def context_name(key: SessionKey) -> str:
    """A context as one string (a backend's key part)."""
    return json.dumps([key.principal, key.definition, key.context_id], separators=(",", ":"))
