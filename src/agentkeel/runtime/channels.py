"""Run streams: numbered SSE frames per run, fanned out to any number of readers.

A `RunChannel` holds every frame of one run (all its segments: a run that suspends and
resumes goes on with the next ids), encoded once, and wakes its readers as frames
arrive. A reader follows from any id, which is both the live stream of a request and
the ``Last-Event-ID`` replay of a reconnect: it gets the frames after that id, then
follows live until the next ``done`` frame. On an idle stream it sends a comment every
few seconds, so proxies do not time the connection out.

`RetainedStreams` keeps the latest run of each context in memory for
``retention.events`` and, through a storage's optional `RunEventStorage` capability,
loads the frames a previous process persisted, so a reconnect also works after a restart.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import cast

import anyio

from agentkeel.errors import StorageError
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import RunStream
from agentkeel.runtime.frames import Frame, Packed
from agentkeel.sse import encode_comment
from agentkeel.storage.base import RunEventStorage, SessionStorage

__all__ = ["Frame", "RetainedStreams", "RunChannel"]

logger = logging.getLogger(__name__)

_HEARTBEAT = encode_comment("keep-alive")


class RunChannel:
    """The frames of one run, buffered for replay and fanned out to live readers."""

    def __init__(self, key: SessionKey, run_id: str, frames: Sequence[Frame] = ()) -> None:
        self.key = key
        self.run_id = run_id
        self.frames: Sequence[Frame] = list(frames)
        self.active = False
        """A segment of the run is in progress (frames may still come)."""
        self.ended_at: float | None = time.time() if frames else None
        self.order = 0
        """The fence of the lease grant its latest segment runs under (0: none)."""
        self._changed = anyio.Event()
        self._waiting = False

    @property
    def last_id(self) -> int:
        """The id of the last frame (0 before the first)."""
        return self.frames[-1].id if self.frames else 0

    def begin(self) -> int:
        """Start a segment; returns the id after which its frames start."""
        self.active = True
        return self.last_id

    def next_frame(self, data: JSONObject, text: str | None = None) -> Frame:
        """The frame that `data` becomes when it is published next (not published yet)."""
        return Frame.build(self.last_id + 1, data, text)

    def publish(self, data: JSONObject, text: str | None = None) -> Frame:
        """Number, encode and publish one frame (`text`: `data` already encoded)."""
        frame = self.next_frame(data, text)
        self.append(frame)
        return frame

    def append(self, frame: Frame) -> None:
        """Publish a frame built with `next_frame`; a done frame ends the segment."""
        if not isinstance(self.frames, list):
            self.frames = list(self.frames)
        self.frames.append(frame)
        if frame.done:
            self.active = False
            self.ended_at = time.time()
        if self._waiting:  # an Event per frame costs; wake readers only when some wait
            self._waiting = False
            self._changed.set()
            self._changed = anyio.Event()

    def pack(self) -> None:
        """Keep the frames of this finished run as bytes (`Packed`): it is no context's latest."""
        if not self.active and isinstance(self.frames, list):
            self.frames = Packed(self.frames)

    def latest_segment_start(self) -> int:
        """The id after which the latest segment starts (where a reader without an id begins)."""
        for index in range(len(self.frames) - 2, -1, -1):
            if self.frames[index].done:
                return self.frames[index].id
        return 0

    def to_bytes(self, extra: Frame | None = None) -> bytes:
        """The frames as `RunEventStorage` keeps them: the SSE bytes already encoded.

        A comment after them carries the time the last segment ended, so that retention
        still counts from then after a restart. Nothing is encoded a second time.
        """
        if isinstance(self.frames, Packed):  # the bytes are there: decode none of them
            kept = list(self.frames.encoded)
        else:
            kept = [frame.encoded for frame in self.frames]
        if extra is not None:
            kept.append(extra.encoded)
        ended = self.ended_at if extra is None else time.time()
        trailer = b"" if ended is None else b": ended %r\n\n" % round(ended, 3)
        return b"".join(kept) + trailer

    @classmethod
    def from_bytes(cls, key: SessionKey, run_id: str, body: bytes) -> RunChannel:
        """Rebuild a finished run's channel from stored frames (malformed ones are skipped)."""
        frames: list[Frame] = []
        ended_at: float | None = None
        for block in body.split(b"\n\n"):
            if block.startswith(b": ended "):
                try:
                    ended_at = float(block.removeprefix(b": ended "))
                except ValueError:
                    continue
                continue
            if (frame := Frame.decode(block + b"\n\n")) is not None:
                frames.append(frame)
        channel = cls(key, run_id, frames)
        channel.ended_at = ended_at or channel.ended_at
        return channel

    async def batches(self, after: int, heartbeat: float) -> AsyncGenerator[Sequence[Frame], None]:
        """The frames after id `after`, live, up to the next done frame.

        Frames that arrived together leave together, as one batch (a burst of tokens
        costs one write instead of one per frame); an empty batch means nothing came
        for `heartbeat` seconds.
        """
        frames = self.frames
        index = next((i for i, frame in enumerate(frames) if frame.id > after), len(frames))
        while True:
            if index < len(frames):
                end, done = index, False
                while end < len(frames) and not done:
                    done = frames[end].done
                    end += 1
                yield frames[index:end]
                if done:
                    return
                index = end
                continue
            if not self.active:
                return
            changed = self._changed
            self._waiting = True
            with anyio.move_on_after(heartbeat) as scope:
                await changed.wait()
            if scope.cancelled_caught:
                yield ()

    async def follow(self, after: int, heartbeat: float) -> AsyncGenerator[bytes, None]:
        """`batches` as SSE bytes; a keep-alive comment for each `heartbeat` of silence."""
        async with aclosing(self.batches(after, heartbeat)) as batches:
            async for batch in batches:
                yield b"".join(frame.encoded for frame in batch) if batch else _HEARTBEAT


class RetainedStreams:
    """`StreamFanout` in this process: each context's latest run, kept for `retention`.

    Past memory, the frames come back from storage (when it keeps them).

    Args:
        storage: Read for frames a previous process persisted (when it is a
            `RunEventStorage`).
        retention: Seconds a finished run's frames stay available; None for no limit.
        capacity: Most contexts whose latest run is held in memory (least recently used
            go first; their frames stay in storage).
    """

    def __init__(
        self, storage: SessionStorage, retention: float | None, *, capacity: int = 10_000
    ) -> None:
        self.storage = storage
        self.retention = retention
        self.capacity = capacity
        self._latest: OrderedDict[SessionKey, RunChannel] = OrderedDict()
        self._listeners: list[Callable[[RunStream], None]] = []
        """Called with a channel each time a segment of its run starts (new or resumed),
        before its first frame: how push delivery follows tasks unpolled."""
        self._segments: dict[tuple[SessionKey, str], anyio.Event] = {}
        """Who waits for a run's next segment (a resumption), by context and run."""

    @property
    def persistent(self) -> bool:
        """Whether frames survive a restart (the storage can keep them)."""
        return _keeps_frames(type(self.storage))

    def put(self, stream: RunStream) -> None:
        """Make `stream` its context's latest run; tell `on_segment` and wake its waiters."""
        channel = _own(stream)
        previous = self._latest.get(channel.key)
        if previous is not None and previous is not channel:
            previous.pack()  # what still holds it (an idempotency claim) holds bytes
        self._latest[channel.key] = channel
        self._latest.move_to_end(channel.key)
        while len(self._latest) > self.capacity:
            oldest = next(iter(self._latest))
            if self._latest[oldest].active:
                break
            self._latest.pop(oldest).pack()  # a claim may still hold it
        if channel.active:  # a run's segment starts, not a channel read back from storage
            for listener in list(self._listeners):
                listener(channel)
            self._wake(channel.key, channel.run_id)

    def on_segment(self, listener: Callable[[RunStream], None]) -> Callable[[], None]:
        """Call `listener` as each segment of a run starts here; returns what stops it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def drop(self, key: SessionKey) -> None:
        """Forget the context's retained run (the context was deleted); wake its waiters."""
        dropped = self._latest.pop(key, None)
        if dropped is not None:
            self._wake(key, dropped.run_id)

    async def next_segment(self, key: SessionKey, run_id: str, timeout: float) -> bool:
        """Wait up to `timeout` s for a segment of `run_id` to start (or its context to go)."""
        event = self._segments.get((key, run_id))
        if event is None:
            event = self._segments[(key, run_id)] = anyio.Event()
        with anyio.move_on_after(timeout):
            await event.wait()
        if self._segments.get((key, run_id)) is event and not event.is_set():
            del self._segments[(key, run_id)]
        return event.is_set()

    def _wake(self, key: SessionKey, run_id: str) -> None:
        event = self._segments.pop((key, run_id), None)
        if event is not None:
            event.set()

    def _expired(self, channel: RunChannel, now: float) -> bool:
        if channel.active or self.retention is None or channel.ended_at is None:
            return False
        return channel.ended_at + self.retention < now

    def sweep(self) -> int:
        """Drop expired channels from memory; returns how many went."""
        now = time.time()
        expired = [key for key, ch in self._latest.items() if self._expired(ch, now)]
        for key in expired:
            del self._latest[key]
        return len(expired)

    async def run(self, key: SessionKey, run_id: str, *, resumed: bool) -> RunChannel:
        """The channel of a starting run: new, or a resumed run's, to continue its ids."""
        channel = self._latest.get(key)
        if channel is not None and channel.run_id == run_id:
            return channel
        stored = await self._load(key, run_id) if resumed else None
        return stored or RunChannel(key, run_id)

    async def latest(self, key: SessionKey) -> RunChannel | None:
        """The context's latest run with its frames, if they are still retained."""
        channel = self._latest.get(key)
        if channel is None and self.persistent:
            record = await self.storage.latest_run(key)
            if record is not None:
                channel = await self._load(key, record.run_id)
                if channel is not None:
                    self.put(channel)
        if channel is None or self._expired(channel, time.time()):
            return None
        return channel

    async def _load(self, key: SessionKey, run_id: str) -> RunChannel | None:
        if not self.persistent:
            return None
        stored = await cast(RunEventStorage, self.storage).get_frames(key, run_id)
        return None if not stored else RunChannel.from_bytes(key, run_id, stored)

    async def persist(self, stream: RunStream, done: Frame) -> None:
        """Save the run's frames, `done` included, before `done` is published (best effort)."""
        body = self.retained_body(stream, done)
        if body is None:
            return
        channel = _own(stream)
        try:
            await cast(RunEventStorage, self.storage).put_frames(channel.key, channel.run_id, body)
        except StorageError as exc:
            logger.warning(
                "session=<%s>, run=<%s> | could not persist run events: %s",
                channel.key.session_id,
                channel.run_id,
                exc.message,
            )

    def retained_body(self, stream: RunStream, done: Frame) -> bytes | None:
        """The body `persist` stores: every frame's SSE bytes and `done`'s, or None."""
        if not self.persistent:
            return None
        return _own(stream).to_bytes(done)


@functools.cache
def _keeps_frames(storage_type: type) -> bool:
    """Whether a storage class keeps frames (cached: a Protocol check costs microseconds)."""
    return issubclass(storage_type, RunEventStorage)


def _own(stream: RunStream) -> RunChannel:
    """`stream` as this fanout made it (a fanout only takes back its own streams)."""
    if not isinstance(stream, RunChannel):
        raise TypeError(f"not a stream of RetainedStreams: {stream!r}")
    return stream
