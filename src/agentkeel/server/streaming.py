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

import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass

import anyio
from starlette.types import Receive, Scope, Send

from agentkeel.errors import StorageError
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.sse import encode_comment
from agentkeel.storage.base import RunEventStorage, SessionStorage

__all__ = ["Frame", "RetainedStreams", "RunChannel", "SSEResponse"]

logger = logging.getLogger(__name__)

_HEARTBEAT = encode_comment("keep-alive")


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_dumps = _ENCODER.encode  # one encoder, not one per frame as json.dumps(**options) builds
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame: its per-run id, its data object, and its SSE bytes."""

    id: int
    data: JSONObject
    encoded: bytes
    done: bool
    """Whether this is a segment's last frame."""

    @classmethod
    def build(cls, frame_id: int, data: JSONObject) -> Frame:
        """Encode `data` once; every reader sends the same bytes.

        Compact JSON never holds a raw line break (they are escaped inside strings), so
        it is always one ``data:`` line and can be framed without `encode_frame`'s split.
        """
        text = _dumps(data)
        encoded = b"id: %d\ndata: %s\n\n" % (frame_id, text.encode("utf-8"))
        return cls(frame_id, data, encoded, data.get("done") is True)


class RunChannel:
    """The frames of one run, buffered for replay and fanned out to live readers."""

    def __init__(self, key: SessionKey, run_id: str, frames: Sequence[Frame] = ()) -> None:
        self.key = key
        self.run_id = run_id
        self.frames: list[Frame] = list(frames)
        self.active = False
        """A segment of the run is in progress (frames may still come)."""
        self.ended_at: float | None = time.time() if frames else None
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

    def next_frame(self, data: JSONObject) -> Frame:
        """The frame that `data` becomes when it is published next (not published yet)."""
        return Frame.build(self.last_id + 1, data)

    def publish(self, data: JSONObject) -> Frame:
        """Number, encode and publish one frame."""
        frame = self.next_frame(data)
        self.append(frame)
        return frame

    def append(self, frame: Frame) -> None:
        """Publish a frame built with `next_frame`; a done frame ends the segment."""
        self.frames.append(frame)
        if frame.done:
            self.active = False
            self.ended_at = time.time()
        if self._waiting:  # an Event per frame costs; wake readers only when some wait
            self._waiting = False
            self._changed.set()
            self._changed = anyio.Event()

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
        frames = self.frames if extra is None else [*self.frames, extra]
        ended = self.ended_at if extra is None else time.time()
        trailer = b"" if ended is None else b": ended %r\n\n" % round(ended, 3)
        return b"".join(frame.encoded for frame in frames) + trailer

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
            head, _, data = block.partition(b"\ndata: ")
            if not head.startswith(b"id: "):
                continue
            try:
                frame_id, decoded = int(head.removeprefix(b"id: ")), json.loads(data)
            except ValueError:
                continue
            if isinstance(decoded, dict):
                frames.append(
                    Frame(frame_id, decoded, block + b"\n\n", decoded.get("done") is True)
                )
        channel = cls(key, run_id, frames)
        channel.ended_at = ended_at or channel.ended_at
        return channel

    async def follow(self, after: int, heartbeat: float) -> AsyncGenerator[bytes, None]:
        """SSE bytes of the frames after id `after`, live, up to the next done frame.

        Frames that arrived together leave together, as one chunk: a burst of tokens
        costs one write instead of one per frame.
        """
        frames = self.frames
        index = next((i for i, frame in enumerate(frames) if frame.id > after), len(frames))
        while True:
            if index < len(frames):
                end, done = index, False
                while end < len(frames) and not done:
                    done = frames[end].done
                    end += 1
                yield b"".join(frame.encoded for frame in frames[index:end])
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
                yield _HEARTBEAT


class SSEResponse:
    """A pure ASGI ``text/event-stream`` response that stops when the client goes away.

    Stopping only ends this response: the run it reads from goes on in the server's
    task group and keeps its frames for a reconnect.
    """

    def __init__(
        self, chunks: AsyncGenerator[bytes, None], headers: Sequence[tuple[bytes, bytes]] = ()
    ):
        self.chunks = chunks
        self.headers = [*_SSE_HEADERS, *headers]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the headers, then every chunk, until the end or the client's disconnect."""
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        async with anyio.create_task_group() as group:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(watch_disconnect)
            try:
                async with aclosing(self.chunks) as chunks:
                    async for chunk in chunks:
                        body = {"type": "http.response.body", "body": chunk, "more_body": True}
                        await send(body)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass  # the client went away between two frames
            group.cancel_scope.cancel()


class RetainedStreams:
    """The latest run channel of each context: in memory for `retention`, else from storage.

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

    @property
    def persistent(self) -> bool:
        """Whether frames survive a restart (the storage can keep them)."""
        return isinstance(self.storage, RunEventStorage)

    def put(self, channel: RunChannel) -> None:
        """Make `channel` its context's latest run."""
        self._latest[channel.key] = channel
        self._latest.move_to_end(channel.key)
        while len(self._latest) > self.capacity:
            oldest = next(iter(self._latest))
            if self._latest[oldest].active:
                break
            del self._latest[oldest]

    def drop(self, key: SessionKey) -> None:
        """Forget the context's retained run (the context was deleted)."""
        self._latest.pop(key, None)

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
        if not isinstance(self.storage, RunEventStorage):
            return None
        stored = await self.storage.get_frames(key, run_id)
        return None if not stored else RunChannel.from_bytes(key, run_id, stored)

    async def persist(self, channel: RunChannel, done: Frame) -> None:
        """Save the run's frames, `done` included, before `done` is published (best effort)."""
        if not isinstance(self.storage, RunEventStorage):
            return
        try:
            await self.storage.put_frames(channel.key, channel.run_id, channel.to_bytes(done))
        except StorageError as exc:
            logger.warning(
                "session=<%s>, run=<%s> | could not persist run events: %s",
                channel.key.session_id,
                channel.run_id,
                exc.message,
            )
