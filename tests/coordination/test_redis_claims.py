"""SharedClaims over Redis: the IdempotencyStore conformance suite, and two replicas."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from redis.asyncio import Redis

from agentkeel.runtime.coordination import IdempotencyScope, IdempotencyStore
from agentkeel.runtime.redis_claims import RedisClaimTable
from agentkeel.runtime.shared_claims import SharedClaims, ValueCodec
from agentkeel.storage.base import SessionKey
from agentkeel.testing.coordination import IdempotencyConformance
from coordination.shared_checks import check_claim_owner_and_takeover

pytestmark = pytest.mark.anyio

KEY = SessionKey(definition="chat", context_id="ctx-claims")


@pytest.fixture
async def client(redis_db_url: str) -> AsyncIterator[Redis]:
    redis = Redis.from_url(redis_db_url)
    yield redis
    await redis.aclose()


def _store(client: Redis, prefix: str) -> SharedClaims[str]:
    return SharedClaims(RedisClaimTable(lambda: client, prefix=prefix), ValueCodec(), 60.0)


class TestRedisClaims(IdempotencyConformance):
    @pytest.fixture
    def store(self, client: Redis, redis_prefix: str) -> IdempotencyStore[str]:
        return _store(client, redis_prefix)


async def test_one_key_on_two_replicas_runs_once(client: Redis, redis_prefix: str) -> None:
    """Simultaneous claims of one key on two replicas: one wins, both see its run."""
    first, second = _store(client, redis_prefix), _store(client, redis_prefix)
    scope = IdempotencyScope(principal=None, definition="chat", context_id=None, key="k")
    results: list[tuple[str, bool]] = []

    async def claim(store: SharedClaims[str], run: str) -> None:
        results.append(await store.claim(scope, "same", lambda: run, context=KEY))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            for index in range(10):
                group.start_soon(claim, (first, second)[index % 2], f"run-{index}")
    winners = [run for run, won in results if won]
    assert len(winners) == 1
    assert {run for run, _ in results} == set(winners)


async def test_only_the_owner_writes_and_one_takeover_wins(
    client: Redis, redis_prefix: str
) -> None:
    """The claim's compare-and-set writes, on Redis (WATCH/MULTI)."""
    await check_claim_owner_and_takeover(RedisClaimTable(lambda: client, prefix=redis_prefix))
