"""RedisStreams against a real Redis: the StreamFanout conformance suite, and two replicas.

Each test holds a Redis database number of its own (`redis_db_url`); the frames persist
in an InMemoryStorage shared by both replicas, standing for their shared database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
import redis.asyncio

from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import RunStream, StreamFanout
from agentkeel.runtime.redis_fanout import RedisStreams
from agentkeel.storage import InMemoryStorage
from agentkeel.storage.base import SessionKey
from agentkeel.testing.coordination import StreamFanoutConformance
from coordination.shared_checks import check_announced_segment

pytestmark = pytest.mark.anyio

KEY = SessionKey(definition="chat", context_id="ctx-fan")


class TestRedisStreams(StreamFanoutConformance):
    @pytest.fixture
    async def fanout(self, redis_db_url: str, redis_prefix: str) -> AsyncIterator[StreamFanout]:
        streams = RedisStreams(redis_db_url, InMemoryStorage(), 3600.0, prefix=redis_prefix)
        async with streams.running():
            yield streams


@pytest.fixture
async def two(
    redis_db_url: str, redis_prefix: str
) -> AsyncIterator[tuple[RedisStreams, RedisStreams]]:
    storage = InMemoryStorage()
    first = RedisStreams(redis_db_url, storage, 3600.0, prefix=redis_prefix)
    second = RedisStreams(redis_db_url, storage, 3600.0, prefix=redis_prefix)
    async with first.running(), second.running():
        yield first, second


def _data(index: int, *, done: bool = False) -> JSONObject:
    data: JSONObject = {"runId": "run-1", "n": index}
    if done:
        data["done"] = True
    return data


async def _start(fanout: RedisStreams) -> RunStream:
    stream = await fanout.run(KEY, "run-1", resumed=False)
    stream.begin()
    fanout.put(stream)
    return stream


async def _collect(stream: RunStream, after: int) -> list[int]:
    got: list[int] = []
    with anyio.fail_after(15):
        async for batch in stream.batches(after, heartbeat=0.5):
            got.extend(frame.id for frame in batch)
    return got


async def _finish(fanout: RedisStreams, stream: RunStream, index: int) -> None:
    done = stream.next_frame(_data(index, done=True))
    await fanout.persist(stream, done)
    stream.append(done)


async def test_a_run_here_is_followed_from_another_replica(
    two: tuple[RedisStreams, RedisStreams],
) -> None:
    """B follows A's run from a Last-Event-ID in the middle: the rest, once, in order."""
    first, second = two
    stream = await _start(first)
    for index in range(3):
        stream.publish(_data(index))
    await first.flush()
    remote = await second.latest(KEY)
    assert remote is not None and remote.run_id == "run-1" and remote.active
    got: list[int] = []

    async def follow() -> None:
        got.extend(await _collect(remote, 2))

    async with anyio.create_task_group() as group:
        group.start_soon(follow)
        await anyio.sleep(0.2)
        for index in range(3, 6):
            stream.publish(_data(index))
            await anyio.sleep(0.02)
        await _finish(first, stream, 6)
    assert got == [3, 4, 5, 6, 7]


async def test_a_batch_of_frames_arrives_whole_and_in_order(
    two: tuple[RedisStreams, RedisStreams],
) -> None:
    """Frames sent in one script call (one argument for all of them) are split back exactly:
    each is its own stream entry, with its bytes, multi-byte text included."""
    first, second = two
    stream = await _start(first)
    texts = ["plain", "é ü 日本語 🚀", "", "a:b,c", "x" * 5000]
    sent = [stream.publish({"runId": "run-1", "text": text}) for text in texts]
    await first.flush()
    entries = await second.redis.xrange(second.stream_key(KEY, "run-1")) or []
    assert [entry_id for entry_id, _ in entries] == [f"{f.id}-0".encode() for f in sent]
    assert [(fields or {}).get(b"e") for _, fields in entries] == [f.encoded for f in sent]
    remote = await second.latest(KEY)
    assert remote is not None
    assert [frame.data.get("text") for frame in remote.frames] == texts


async def test_a_second_writer_of_the_same_ids_is_refused(
    two: tuple[RedisStreams, RedisStreams], redis_prefix: str
) -> None:
    """Redis refuses an entry id that is not above the last: a stale writer adds nothing."""
    first, second = two
    stream = await _start(first)
    stream.publish(_data(0))
    stream.publish(_data(1))
    await first.flush()
    stale = await second.run(KEY, "run-1", resumed=False)  # a writer that starts over at 1
    stale.begin()
    stale.publish({"runId": "run-1", "n": "stale"})
    await second.flush()
    entries = await second.redis.xrange(second.stream_key(KEY, "run-1")) or []
    assert [entry_id for entry_id, _ in entries] == [b"1-0", b"2-0"]


async def test_frames_redis_forgot_come_from_storage(
    two: tuple[RedisStreams, RedisStreams], redis_db_url: str, redis_prefix: str
) -> None:
    """A follower on B whose frames Redis lost mid-run gets the rest from storage, once."""
    first, second = two
    stream = await _start(first)
    for index in range(3):
        stream.publish(_data(index))
    await first.flush()
    remote = await second.latest(KEY)
    assert remote is not None
    got: list[int] = []

    async def follow() -> None:
        got.extend(await _collect(remote, 1))

    async with anyio.create_task_group() as group:
        group.start_soon(follow)
        await anyio.sleep(0.2)
        client = redis.asyncio.Redis.from_url(redis_db_url)
        await client.delete(first.stream_key(KEY, "run-1"))  # Redis forgets the stream
        await client.aclose()
        stream.publish(_data(3))
        await first.flush()
        await second.redis.delete(first.stream_key(KEY, "run-1"))  # and forgets again
        stream.publish(_data(4))
        await _finish(first, stream, 5)
    assert got == [2, 3, 4, 5, 6]
    reconnect = await second.latest(KEY)
    assert reconnect is not None
    assert await _collect(reconnect, 0) == [1, 2, 3, 4, 5, 6]


async def test_a_segment_start_is_announced_to_other_replicas(
    two: tuple[RedisStreams, RedisStreams],
) -> None:
    """A request waiting on B for a run to resume is woken by A's PUBLISH."""
    first, second = two
    await check_announced_segment(first, second, KEY)


async def test_a_script_redis_forgot_is_loaded_again(
    two: tuple[RedisStreams, RedisStreams], redis_db_url: str
) -> None:
    """After a restart Redis knows no script: the batch is sent again, no frame twice."""
    first, second = two
    stream = await _start(first)
    stream.publish(_data(0))
    await first.flush()
    client = redis.asyncio.Redis.from_url(redis_db_url)
    try:
        await client.script_flush()  # what a restarted Redis forgot
        for index in range(1, 4):
            stream.publish(_data(index))
        await first.flush()
        entries = await client.xrange(first.stream_key(KEY, "run-1")) or []
    finally:
        await client.aclose()
    assert [entry_id for entry_id, _ in entries] == [b"1-0", b"2-0", b"3-0", b"4-0"]
    remote = await second.latest(KEY)
    assert remote is not None and [frame.id for frame in remote.frames] == [1, 2, 3, 4]


async def _heard(fanout: RedisStreams, topic: str) -> list[str]:
    """The runs `fanout` hears announced on `topic`, once its listener is subscribed."""
    heard: list[str] = []
    fanout.on_announcement(topic, lambda context, run_id: heard.append(run_id))
    with anyio.fail_after(5):
        while fanout._pubsub is None:
            await anyio.sleep(0.01)
    return heard


async def test_a_segment_start_is_heard_only_where_a_request_waits_for_it(
    two: tuple[RedisStreams, RedisStreams],
) -> None:
    """Each turn starts a segment: a replica waiting for none does not hear it at all."""
    first, second = two
    segments = await _heard(second, "segment")
    others = await _heard(second, "other")
    await _start(first)  # announces run-1's segment
    first.announce("other", KEY, "after")  # published after it, on one connection
    await first.flush()
    with anyio.fail_after(5):
        while not others:
            await anyio.sleep(0.01)
    assert others == ["after"] and segments == []


async def test_another_runs_announcement_in_a_batch_with_frames_is_sent(
    two: tuple[RedisStreams, RedisStreams],
) -> None:
    """Frames of a run, then a word about another run, in one batch: both go out."""
    first, second = two
    heard = await _heard(second, "a2a-push")
    stream = await _start(first)
    await first.flush()
    stream.publish(_data(0))
    first.announce("a2a-push", SessionKey(definition="chat", context_id="index"), "task-1")
    await first.flush()
    with anyio.fail_after(5):
        while not heard:
            await anyio.sleep(0.01)
    assert heard == ["task-1"]
    remote = await second.latest(KEY)
    assert remote is not None and [frame.id for frame in remote.frames] == [1]


async def test_a_wait_subscribes_a_listener_already_listening(
    two: tuple[RedisStreams, RedisStreams],
) -> None:
    """B's listener is in its blocking read when B starts to wait: the wait still wakes."""
    first, second = two
    await _heard(second, "segment")  # the listener is subscribed and reading
    await check_announced_segment(first, second, KEY)
    assert second._waited == {}  # the run's channel is given up after the wait
