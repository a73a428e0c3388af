"""RedisStreams: the runs' frames fanned out to every replica through Redis Streams.

One stream per run; each frame is one stream entry whose id is the frame id
(``<id>-0``), so a duplicate or a lower id (a second writer, say a holder that lost
its lease) is refused by Redis itself. The writer sends each batch as one pipeline,
in which what concerns one run in a row goes as one ``EVALSHA`` of a script that runs
it in order: each frame's ``XADD``, the context's pointer (``SET``, and the stream's
``EXPIRE``) at a segment's start and end and once a second, and the segment's
announcement (``PUBLISH``). What a client pays per command, encoding it and parsing
its reply, was most of what fanning a turn out cost: a batch of one run's writes is
one command (`SharedStreams` has the rest). A Redis that forgot the script (a restart)
answers ``NOSCRIPT`` without running any of it; the script is loaded again and the
batch sent again. Streams and pointers expire after ``retention.events``. A follower
on another replica reads with ``XREAD BLOCK`` on a connection of its own.
Announcements are ``PUBLISH``ed, and each replica listens on one pub/sub connection
(reopened after a loss; what was published meanwhile is lost, and every listener has a
fallback of its own). A segment's start goes to a channel of its run's, which only a
replica with a request waiting for that run subscribes to (while it waits): every turn
starts a segment, and each replica parsing each one's announcement was a cost per turn
that grew with the replicas. The other topics (an A2A task's push configs changed) go
to the deployment's announce channel, which every replica hears.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import NoScriptError, RedisError, ResponseError

from agentkeel.keys import SessionKey
from agentkeel.runtime.announcements import SEGMENT_TOPIC, AnnounceWrite
from agentkeel.runtime.channels import Frame
from agentkeel.runtime.remote_channel import frame_of
from agentkeel.runtime.shared_streams import (
    FrameWrite,
    PointerWrite,
    SharedRunChannel,
    SharedStreams,
    Write,
    context_name,
)
from agentkeel.storage.base import SessionStorage

__all__ = ["RedisRunChannel", "RedisStreams"]

logger = logging.getLogger(__name__)

RedisRunChannel = SharedRunChannel
_RELISTEN_SECONDS = 0.5

_WRITE_RUN = """
local function fence_of(pointer)
  if not pointer then return 0 end
  local ok, value = pcall(cjson.decode, pointer)
  if ok and type(value) == 'table' and type(value.fence) == 'number' then
    return value.fence
  end
  return 0
end
local refused = false
local function note(done)
  if type(done) == 'table' and done.err and not refused then refused = done.err end
end
for i = 1, #ARGV, 3 do
  local op, first, second = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local done
  if op == 'x' then
    local at = 1
    for id, size in string.gmatch(first, '([^:,]+):(%d+)') do
      local stop = at + tonumber(size)
      note(redis.pcall('XADD', KEYS[1], id, 'e', string.sub(second, at, stop - 1)))
      at = stop
    end
  elseif op == 'p' then
    local newer = fence_of(first) >= fence_of(redis.call('GET', KEYS[2]))
    if second == '' then
      if newer then done = redis.pcall('SET', KEYS[2], first) end
    else
      if newer then done = redis.pcall('SET', KEYS[2], first, 'EX', second) end
      redis.pcall('EXPIRE', KEYS[1], second)
    end
  else
    done = redis.pcall('PUBLISH', first, second)
  end
  note(done)
end
return refused
"""
"""Run a run's writes in order, each as three ARGV entries: ``x`` (``id:size`` of each
frame in a row, comma-separated; their bodies end to end) an ``XADD`` per frame to the
stream KEYS[1] (one argument for many frames: encoding each argument was most of what
the client spent on a batch); ``p`` (value, seconds or empty) the pointer KEYS[2]
set, unless it holds a higher lease fence (a later turn's run), with the stream's
expiry; ``b`` (channel, message) a ``PUBLISH``. A refused one
(a frame's lower id) does not stop the others. Returns the first refusal's error, or
nil."""


class RedisStreams(SharedStreams):
    """`StreamFanout` over Redis Streams, shared by every replica on one Redis database.

    Args:
        url: The ``redis://`` URL (its database number selects the database).
        storage: Where segments' frames persist, and are read back from.
        retention: Seconds a finished run's frames stay (None: no expiry).
        prefix: Put before every key, so that deployments can share a database.
    """

    backend = "redis"

    def __init__(
        self,
        url: str,
        storage: SessionStorage,
        retention: float | None,
        *,
        prefix: str = "agentkeel:",
    ) -> None:
        super().__init__(storage, retention)
        self.url = url
        self.prefix = prefix
        self._redis: Redis | None = None
        self._script: str | None = None
        """The SHA1 of `_WRITE_RUN` once loaded (again after a ``NOSCRIPT``)."""
        self._waited: dict[str, int] = {}
        """The segment channels requests here wait on, with how many wait on each."""
        self._pubsub: PubSub | None = None
        """The listener's pub/sub while it is subscribed."""

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        """One client (and its pool) for every non-blocking command; one listener."""
        self._redis = Redis.from_url(self.url)
        listener = asyncio.get_running_loop().create_task(self._listen_forever())
        try:
            yield
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            redis, self._redis = self._redis, None
            await redis.aclose()

    @property
    def announce_channel(self) -> str:
        """Where announcements are published."""
        return f"{self.prefix}announce"

    def segment_channel(self, context: str, run_id: str) -> str:
        """Where a segment's start of one run is announced (`context`: `context_name`)."""
        return f"{self.prefix}announce:{context}:{run_id}"

    def _channel_of(self, write: AnnounceWrite) -> str:
        if write.topic == SEGMENT_TOPIC:
            return self.segment_channel(write.context, write.run_id)
        return self.announce_channel

    async def _listen_forever(self) -> None:
        while True:
            client = Redis.from_url(self.url, single_connection_client=True)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(self.announce_channel)
                    self._pubsub = pubsub  # from now on a new wait subscribes itself
                    if self._waited:  # the waits that began before
                        await pubsub.subscribe(*self._waited)
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            self._heard(message.get("data"))
            except (RedisError, OSError) as exc:
                logger.debug("redis | the announce listener reconnects: %s", exc)
            finally:
                self._pubsub = None
                with contextlib.suppress(RedisError, OSError):
                    await client.aclose()
            await asyncio.sleep(_RELISTEN_SECONDS)

    def _heard(self, data: object) -> None:
        try:
            announced = json.loads(data)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return
        self.announced.heard(announced)

    async def next_segment(self, key: SessionKey, run_id: str, timeout: float) -> bool:
        """Subscribe to the run's segment channel while waiting (see `SharedStreams`)."""
        channel = self.segment_channel(context_name(key), run_id)
        self._waited[channel] = self._waited.get(channel, 0) + 1
        if self._waited[channel] == 1:
            await self._subscription(channel, subscribe=True)
        try:
            return await super().next_segment(key, run_id, timeout)
        finally:
            self._waited[channel] -= 1
            if not self._waited[channel]:
                del self._waited[channel]
                with anyio.CancelScope(shield=True):
                    await self._subscription(channel, subscribe=False)

    async def _subscription(self, channel: str, *, subscribe: bool) -> None:
        """(Un)subscribe the listener; while it reconnects it subscribes `_waited` itself."""
        pubsub = self._pubsub
        if pubsub is None:
            return
        try:
            with anyio.fail_after(1):
                if subscribe:
                    await pubsub.subscribe(channel)
                else:
                    await pubsub.unsubscribe(channel)
        except (RedisError, OSError, TimeoutError) as exc:  # the wait rechecks once a second
            logger.debug("redis | the segment channel was not (un)subscribed: %s", exc)

    @property
    def redis(self) -> Redis:
        """The shared client."""
        if self._redis is None:
            raise RuntimeError("RedisStreams is not running (enter `running()` first)")
        return self._redis

    def stream_key(self, key: SessionKey, run_id: str) -> str:
        """The Redis stream of one run."""
        return f"{self.prefix}run:{context_name(key)}:{run_id}"

    def pointer_key(self, key: SessionKey) -> str:
        """The key naming a context's latest run."""
        return f"{self.prefix}latest:{context_name(key)}"

    async def ping(self) -> None:
        """PING."""
        await self.redis.ping()

    async def send_batch(self, writes: list[Write]) -> None:
        """One pipeline; a refused frame (a lower id: a second writer) is only logged."""
        results = await self._pipeline(writes)
        if any(isinstance(result, NoScriptError) for result in results):
            self._script = None
            results = await self._pipeline(writes)
        for result in results:
            if isinstance(result, Exception):
                logger.warning("redis | a fan-out write was refused: %s", result)
            elif isinstance(result, bytes | str):  # the script's first refusal
                logger.warning("redis | a fan-out write was refused: %s", _text(result))

    async def _pipeline(self, writes: list[Write]) -> list[object]:
        """Send the batch's commands; each reply, or the error Redis answered instead.

        A batch of one command (the common one: a run's frames, one script call) goes
        without a pipeline, whose own bookkeeping showed in a turn's profile.
        """
        if self._script is None:
            self._script = _text(await self.redis.script_load(_WRITE_RUN))
        commands = self._commands(writes)
        if len(commands) == 1:
            try:
                return [await self.redis.execute_command(*commands[0])]  # type: ignore[no-untyped-call]
            except ResponseError as exc:  # as the pipeline hands it back
                return [exc]
        async with self.redis.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            return list(await pipe.execute(raise_on_error=False))

    def _commands(self, writes: list[Write]) -> list[tuple[str | int | bytes, ...]]:
        commands: list[tuple[str | int | bytes, ...]] = []
        run: list[Write] = []  # consecutive writes about one run: one EVALSHA
        about: tuple[SessionKey, str] | None = None
        for write in [*writes, None]:
            this = None if write is None else _run_of(write)
            if isinstance(write, AnnounceWrite) and run and _about(write, about):
                this = about  # the segment's announcement goes with its run's writes
            if run and this != about:
                commands.append(self._write_run(run))
                run = []
            if write is None:
                break
            if this is not None:
                run.append(write)
                about = this
            elif isinstance(write, AnnounceWrite):
                encoded = json.dumps(write.encoded())
                commands.append(("PUBLISH", self._channel_of(write), encoded))
            elif isinstance(write, PointerWrite) and write.value is not None:
                pointer = ("SET", self.pointer_key(write.key), write.value)  # no run
                commands.append(pointer if write.ttl is None else (*pointer, "EX", write.ttl))
            elif isinstance(write, PointerWrite):
                commands.append(("DEL", self.pointer_key(write.key)))
        return commands

    def _write_run(self, writes: list[Write]) -> tuple[str | int | bytes, ...]:
        """One EVALSHA running `writes` (about one run, in order): see `_WRITE_RUN`."""
        assert self._script is not None
        first = writes[0]
        assert isinstance(first, FrameWrite | PointerWrite) and first.run_id is not None
        args: list[str | bytes] = []
        frames: list[Frame] = []  # frames in a row: one ``x`` entry
        for write in [*writes, None]:
            if isinstance(write, FrameWrite):
                frames.append(write.frame)
                continue
            if frames:
                args += _frames_entry(frames)
                frames = []
            if write is None:
                break
            if isinstance(write, PointerWrite):
                args += ("p", write.value or "", "" if write.ttl is None else str(write.ttl))
            else:
                args += ("b", self._channel_of(write), json.dumps(write.encoded()))
        keys = (self.stream_key(first.key, first.run_id), self.pointer_key(first.key))
        return ("EVALSHA", self._script, 2, *keys, *args)

    async def read_pointer(self, key: SessionKey) -> str | None:
        """GET the pointer."""
        raw = await self.redis.get(self.pointer_key(key))
        return None if raw is None else raw.decode() if isinstance(raw, bytes) else str(raw)

    async def read_frames(self, key: SessionKey, run_id: str) -> list[Frame]:
        """XRANGE the run's stream."""
        entries = await self.redis.xrange(self.stream_key(key, run_id)) or []
        return [frame for entry in entries if (frame := _decode(*entry)) is not None]

    def reader(self, key: SessionKey, run_id: str) -> _RedisReader:
        """A follower's reader, on a connection of its own."""
        client = Redis.from_url(self.url, single_connection_client=True)
        return _RedisReader(client, self.stream_key(key, run_id))


class _RedisReader:
    def __init__(self, client: Redis, stream: str) -> None:
        self.client = client
        self.stream = stream

    async def read(self, after: int, block: float) -> list[Frame]:
        reply: Any = await self.client.xread(
            {self.stream: f"{after}-0"}, block=max(1, int(block * 1000)), count=512
        )
        frames: list[Frame] = []
        for _, entries in reply or ():
            for entry in entries:
                frame = _decode(*entry)
                if frame is None:
                    return frames
                frames.append(frame)
        return frames

    async def close(self) -> None:
        await self.client.aclose()


def _frames_entry(frames: list[Frame]) -> tuple[str, str, bytes]:
    """The script's ``x`` entry for `frames`: their ids and sizes, and their bodies."""
    sizes = ",".join([f"{frame.id}-0:{len(frame.encoded)}" for frame in frames])
    return "x", sizes, b"".join([frame.encoded for frame in frames])


def _run_of(write: Write) -> tuple[SessionKey, str] | None:
    """(context, run id) of a frame or a pointer write its run's script carries.

    The key itself, not its `context_name`: comparing keys is cheaper than encoding one
    per frame, which showed in a turn's profile.
    """
    if isinstance(write, FrameWrite):
        return write.key, write.run_id
    if isinstance(write, PointerWrite) and write.value is not None and write.run_id is not None:
        return write.key, write.run_id
    return None


def _about(write: AnnounceWrite, run: tuple[SessionKey, str] | None) -> bool:
    """Whether `write` announces the run `run` names (then its script carries it)."""
    return run is not None and write.run_id == run[1] and write.context == context_name(run[0])


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _decode(entry_id: object, fields: object) -> Frame | None:
    try:
        text = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        encoded = fields[b"e"]  # type: ignore[index]
        return frame_of(int(text.split("-")[0]), encoded)
    except (KeyError, TypeError, ValueError):
        return None
