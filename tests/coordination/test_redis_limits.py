"""RedisLimitCounters: the LimitCounters conformance suite against a real Redis, and its
own promises: slots of a process that stopped renewing them free themselves, held ones
do not, the clock is Redis's, and an unreachable Redis admits (the limits fail open)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from redis.asyncio import Redis

from agentkeel.errors import ConfigurationError
from agentkeel.runtime.limits_registry import limit_counters_url, open_limit_counters
from agentkeel.runtime.quotas import InProcessLimitCounters
from agentkeel.runtime.redis_quotas import RedisLimitCounters, from_url
from agentkeel.testing.limits import CounterHandles, LimitCountersConformance

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client(redis_db_url: str) -> AsyncIterator[Redis]:
    redis = Redis.from_url(redis_db_url)
    yield redis
    await redis.aclose()


class TestRedisLimitCounters(LimitCountersConformance):
    """Two replicas: two counters objects, each with a client of its own, on one database."""

    @pytest.fixture
    async def counters(self, redis_db_url: str, redis_prefix: str) -> AsyncIterator[CounterHandles]:
        one = RedisLimitCounters(redis_db_url, prefix=redis_prefix)
        two = RedisLimitCounters(redis_db_url, prefix=redis_prefix)
        async with one.running(), two.running():
            yield one, two


async def test_slots_of_a_process_that_stopped_renewing_free_themselves(
    client: Redis, redis_prefix: str
) -> None:
    dead = RedisLimitCounters(lambda: client, prefix=redis_prefix, slot_ttl=0.4)
    alive = RedisLimitCounters(lambda: client, prefix=redis_prefix, slot_ttl=0.4)
    assert await dead.hold("streams:p", 1)  # never renewed: no running()
    assert not await alive.hold("streams:p", 1)
    await anyio.sleep(0.6)
    assert await alive.hold("streams:p", 1), "a dead replica's slot must expire"


async def test_a_running_process_keeps_its_slots(client: Redis, redis_prefix: str) -> None:
    holder = RedisLimitCounters(lambda: client, prefix=redis_prefix, slot_ttl=0.4)
    other = RedisLimitCounters(lambda: client, prefix=redis_prefix, slot_ttl=0.4)
    async with holder.running():
        assert await holder.hold("streams:p", 1)
        await anyio.sleep(1.0)  # more than twice the ttl: only renewals keep it
        assert not await other.hold("streams:p", 1), "a renewed slot must stay taken"
        await holder.release("streams:p")
        assert await other.hold("streams:p", 1)


async def test_every_key_expires_with_its_window(client: Redis, redis_prefix: str) -> None:
    counters = RedisLimitCounters(lambda: client, prefix=redis_prefix, slot_ttl=5.0)
    assert await counters.hit("turns:p", 3, 60.0) == 0.0
    assert await counters.hold("streams:p", 3)
    keys = [key async for key in client.scan_iter(match=f"{redis_prefix}*")]
    assert len(keys) == 2
    for key in keys:
        assert 0 < await client.pttl(key) <= 60_000, f"{key!r} must expire by itself"
    assert counters.sweep() == 0


async def test_the_window_is_counted_on_redis_time(client: Redis, redis_prefix: str) -> None:
    """The wait is computed by Redis from its own clock: it is at most the window."""
    counters = RedisLimitCounters(lambda: client, prefix=redis_prefix)
    assert await counters.hit("t", 1, 30.0) == 0.0
    wait = await counters.hit("t", 1, 30.0)
    assert 29.0 < wait <= 30.0


async def test_an_unreachable_redis_admits_and_says_so() -> None:
    counters = RedisLimitCounters("redis://127.0.0.1:1/0", prefix="x:")
    async with counters.running():
        assert await counters.health() is None
        assert await counters.hold("s", 1)
        assert await counters.hold("s", 1), "fail open: nothing can be counted"
        assert await counters.hit("t", 1, 60.0) == 0.0
        await counters.release("s")
        detail = await counters.health()
        assert detail is not None and "unreachable" in detail


def test_the_url_parameters_are_agentkeels_own() -> None:
    counters = from_url("redis://127.0.0.1:6379/3?prefix=app:&slotTtl=10s&socket_timeout=2")
    assert counters.prefix == "app:"
    assert counters.url == "redis://127.0.0.1:6379/3?socket_timeout=2"
    with pytest.raises(ConfigurationError, match="slotTtl"):
        from_url("redis://127.0.0.1:6379/3?slotTtl=soon")


def test_the_registry_opens_counters_by_scheme() -> None:
    def refuse(key: str, message: str) -> ConfigurationError:
        return ConfigurationError(f"{key}: {message}")

    assert isinstance(open_limit_counters("memory:"), InProcessLimitCounters)
    assert isinstance(open_limit_counters("rediss://cache:6380/1"), RedisLimitCounters)
    assert limit_counters_url(None, refuse) is None
    with pytest.raises(ConfigurationError, match="unknown counters scheme 'etcd'"):
        limit_counters_url("etcd://x", refuse)
