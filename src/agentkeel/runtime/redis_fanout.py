"""RedisStreams: the runs' frames fanned out to every replica through Redis Streams.

One stream per run; each frame is one ``XADD`` whose entry id is the frame id
(``<id>-0``), so a duplicate or a lower id (a second writer, say a holder that lost
its lease) is refused by Redis itself. A small pointer per context names its latest
run, where its latest segment starts and whether it runs. Streams and pointers expire
after ``retention.events``; the frames are persisted in storage at the end of every
segment (before its done frame is published), so a reconnect works after Redis forgot
them, was flushed, or was unreachable.

Publishing stays synchronous (a frame is published from the Agent's event callback):
the replica running the run keeps its frames in memory, as the in-process fan-out
does, and a writer task sends what was published to Redis in pipelined batches (one
command per frame; the pointer is written once per segment start and end). A follower
on the same replica reads the memory; one on another replica reads Redis
(`RemoteRunChannel`).

Losing Redis loses no turn: the writer drops what it cannot send (and says so in
`degraded`), the run goes on and commits, and followers elsewhere finish from storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from redis.asyncio import Redis
from redis.exceptions import RedisError

from agentkeel.keys import SessionKey
from agentkeel.runtime.channels import Frame, RetainedStreams, RunChannel
from agentkeel.runtime.coordination import RunStream
from agentkeel.runtime.redis_follow import RemoteRunChannel, decode_entry
from agentkeel.storage.base import SessionStorage

__all__ = ["RedisRunChannel", "RedisStreams"]

logger = logging.getLogger(__name__)

Op = Callable[[Any], None]
"""Adds commands to a pipeline."""
_POLL_SECONDS = 0.05


class RedisRunChannel(RunChannel):
    """A run running here: its frames in memory, and each one handed to the writer."""

    def __init__(
        self,
        key: SessionKey,
        run_id: str,
        frames: list[Frame],
        sink: Callable[[RedisRunChannel, Frame], None],
    ) -> None:
        super().__init__(key, run_id, frames)
        self._sink = sink

    def append(self, frame: Frame) -> None:
        """Publish `frame` here, and to Redis through the writer."""
        super().append(frame)
        self._sink(self, frame)


class RedisStreams:
    """`StreamFanout` over Redis Streams, shared by every replica on one Redis database.

    Args:
        url: The ``redis://`` URL (its database number selects the database).
        storage: Where segments' frames persist, and are read back from.
        retention: Seconds a finished run's frames stay (None: no expiry).
        prefix: Put before every key, so that deployments can share a database.
    """

    def __init__(
        self,
        url: str,
        storage: SessionStorage,
        retention: float | None,
        *,
        prefix: str = "agentkeel:",
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.retention = retention
        self.local = RetainedStreams(storage, retention)
        self.degraded: str | None = None
        """Why Redis could not be used last time (None: it could)."""
        self._redis: Redis | None = None
        self._ops: list[Op] = []
        self._queued = 0
        self._written = 0
        self._wake = asyncio.Event()
        self._done = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Connect, and run the writer while inside; on exit, send what is left."""
        self._redis = Redis.from_url(self.url)
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
            redis, self._redis = self._redis, None
            await redis.aclose()

    @property
    def redis(self) -> Redis:
        """The shared client (its pool serves every non-blocking command)."""
        if self._redis is None:
            raise RuntimeError("RedisStreams is not running (enter `running()` first)")
        return self._redis

    def follower_client(self) -> Redis:
        """A client with one connection of its own, for one follower's blocking reads."""
        return Redis.from_url(self.url, single_connection_client=True)

    async def health(self) -> str | None:
        """None when Redis answers a PING now; else why not (for ``/readyz``)."""
        try:
            with anyio.fail_after(1):
                await self.redis.ping()
        except (RedisError, TimeoutError, OSError) as exc:
            return f"redis: {type(exc).__name__}: {exc}"
        return self.degraded

    # -- keys --------------------------------------------------------------------------

    def _context(self, key: SessionKey) -> str:
        parts = [key.principal, key.definition, key.context_id]
        return json.dumps(parts, separators=(",", ":"))

    def stream_key(self, key: SessionKey, run_id: str) -> str:
        """The Redis stream of one run."""
        return f"{self.prefix}run:{self._context(key)}:{run_id}"

    def pointer_key(self, key: SessionKey) -> str:
        """The key naming a context's latest run."""
        return f"{self.prefix}latest:{self._context(key)}"

    # -- the writer --------------------------------------------------------------------

    def _queue(self, op: Op) -> None:
        self._ops.append(op)
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
            self._wake.clear()
            ops, self._ops = self._ops, []
            if ops:
                await self._send(ops)
            async with self._done:
                self._written += len(ops)
                self._done.notify_all()

    async def _send(self, ops: list[Op]) -> None:
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for op in ops:
                    op(pipe)
                results = await pipe.execute(raise_on_error=False)
        except (RedisError, OSError) as exc:
            if self.degraded is None:
                logger.warning(
                    "redis | frames are not fanned out (storage still has them): %s", exc
                )
            self.degraded = f"redis: {type(exc).__name__}: {exc}"
            return
        self.degraded = None
        for result in results:
            if isinstance(result, Exception):
                logger.warning("redis | a fan-out write was refused: %s", result)

    def _sent(self, channel: RedisRunChannel, frame: Frame) -> None:
        stream, retention = self.stream_key(channel.key, channel.run_id), self.retention
        pointer = None
        if frame.done:
            pointer = self._pointer(channel, active=False)

        def op(pipe: Any) -> None:
            pipe.xadd(stream, {"e": frame.encoded}, id=f"{frame.id}-0")
            if pointer is not None:
                pipe.set(self.pointer_key(channel.key), pointer, ex=_seconds(retention))
                if retention is not None:
                    pipe.expire(stream, _seconds(retention))

        self._queue(op)

    def _pointer(self, channel: RunChannel, *, active: bool) -> str:
        data = {"run": channel.run_id, "seg": channel.latest_segment_start(), "active": active}
        return json.dumps(data, separators=(",", ":"))

    # -- the Protocol ------------------------------------------------------------------

    async def run(self, key: SessionKey, run_id: str, *, resumed: bool) -> RunStream:
        """The stream of a starting run: new, or a resumed run's, continuing its ids."""
        found = await self.local.run(key, run_id, resumed=resumed)
        if isinstance(found, RedisRunChannel):
            return found
        channel = RedisRunChannel(key, run_id, list(found.frames), self._sent)
        channel.ended_at = found.ended_at
        return channel

    def put(self, stream: RunStream) -> None:
        """Make `stream` its context's latest run, here and in Redis."""
        self.local.put(stream)
        if not isinstance(stream, RedisRunChannel) or not stream.active:
            return
        pointer = self._pointer(stream, active=True)
        stream_key, pointer_key = (
            self.stream_key(stream.key, stream.run_id),
            self.pointer_key(stream.key),
        )
        retention = self.retention

        def op(pipe: Any) -> None:
            # a running segment's keys outlive it by the retention: a dead holder's expire
            pipe.set(pointer_key, pointer, ex=_seconds(retention, running=True))
            pipe.expire(stream_key, _seconds(retention, running=True))

        self._queue(op)

    def on_segment(self, listener: Callable[[RunStream], None]) -> Callable[[], None]:
        """Call `listener` as each segment of a run starts here."""
        return self.local.on_segment(listener)

    async def latest(self, key: SessionKey) -> RunStream | None:
        """The context's latest run: here, followed from Redis, or read from storage."""
        await self.flush()
        try:
            pointer = await self._read_pointer(key)
        except RedisError as exc:
            self.degraded = f"redis: {type(exc).__name__}: {exc}"
            return await self.local.latest(key)
        if pointer is None:
            return await self.local.latest(key)
        run_id, active = str(pointer.get("run")), pointer.get("active") is True
        here = self.local._latest.get(key)
        if isinstance(here, RedisRunChannel) and here.run_id == run_id:
            return await self.local.latest(key)
        try:
            entries = await self.redis.xrange(self.stream_key(key, run_id)) or []
        except RedisError:
            entries = []
        frames = [frame for entry in entries if (frame := decode_entry(*entry)) is not None]
        whole = [frame.id for frame in frames] == list(range(1, len(frames) + 1))
        if not whole:
            frames = []
            stored = await self.local._load(key, run_id)
            if stored is not None and (not active or stored.last_id > pointer_seg(pointer)):
                return stored
        active = active and not (frames and frames[-1].done)
        return self._remote(key, run_id, frames, active=active)

    def _remote(
        self, key: SessionKey, run_id: str, frames: list[Frame], *, active: bool
    ) -> RemoteRunChannel:
        async def still_latest() -> bool:
            try:
                pointer = await self._read_pointer(key)
            except RedisError:
                return True
            return pointer is None or pointer.get("run") == run_id

        return RemoteRunChannel(
            key,
            run_id,
            frames,
            active=active,
            client=self.follower_client,
            stream_key=self.stream_key(key, run_id),
            stored=lambda: self.local._load(key, run_id),
            still_latest=still_latest,
        )

    async def _read_pointer(self, key: SessionKey) -> dict[str, object] | None:
        raw = await self.redis.get(self.pointer_key(key))
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    async def next_segment(self, key: SessionKey, run_id: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a segment of `run_id` to run, on any replica."""
        with anyio.move_on_after(timeout):
            while True:
                try:
                    pointer = await self._read_pointer(key)
                except RedisError:
                    pointer = None
                if pointer is not None and pointer.get("run") == run_id and pointer.get("active"):
                    return True
                await anyio.sleep(_POLL_SECONDS)
        return False

    async def persist(self, stream: RunStream, done: Frame) -> None:
        """Save the run's frames, `done` included, in storage before `done` is published."""
        await self.local.persist(stream, done)

    def drop(self, key: SessionKey) -> None:
        """Forget the context's latest run here and in Redis (the context was deleted)."""
        self.local.drop(key)
        pointer = self.pointer_key(key)
        self._queue(lambda pipe: pipe.delete(pointer))

    def sweep(self) -> int:
        """Forget expired runs here (Redis expires its keys by itself)."""
        return self.local.sweep()


def pointer_seg(pointer: dict[str, object]) -> int:
    """Where the pointer's latest segment starts (0 when it does not say)."""
    value = pointer.get("seg")
    return value if isinstance(value, int) else 0


def _seconds(retention: float | None, *, running: bool = False) -> int | None:
    """Seconds a key lives: the retention (plus an hour for a running segment's keys)."""
    if retention is None:
        return 86_400 if running else None
    return max(1, round(retention + (3600 if running else 0)))
