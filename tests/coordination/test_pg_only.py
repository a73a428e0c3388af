"""The PostgreSQL-only coordination parts: fan-out (NOTIFY per batch) and claims.

The StreamFanout and IdempotencyStore conformance suites, and a run followed from a
second replica, each on a schema of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import IdempotencyStore, StreamFanout
from agentkeel.runtime.pg_claims import PgClaimTable
from agentkeel.runtime.pg_fanout import PgStreams
from agentkeel.runtime.shared_claims import SharedClaims, ValueCodec
from agentkeel.storage import InMemoryStorage
from agentkeel.storage.base import SessionKey, SessionStorage
from agentkeel.storage.postgres_pool import PostgresPool
from agentkeel.testing.coordination import IdempotencyConformance, StreamFanoutConformance
from coordination.shared_checks import check_announced_segment, check_claim_owner_and_takeover

pytestmark = pytest.mark.anyio

KEY = SessionKey(definition="chat", context_id="ctx-pg-fan")


def _streams(url: str, schema: str, storage: SessionStorage) -> PgStreams:
    return PgStreams(PostgresPool(url, schema=schema, pool_size=3), storage, 3600.0)


class TestPgStreams(StreamFanoutConformance):
    @pytest.fixture
    async def fanout(self, pg_database: str, pg_schema: str) -> AsyncIterator[StreamFanout]:
        streams = _streams(pg_database, pg_schema, InMemoryStorage())
        async with streams.running():
            yield streams


class TestPgClaims(IdempotencyConformance):
    @pytest.fixture
    async def store(self, pg_database: str, pg_schema: str) -> AsyncIterator[IdempotencyStore[str]]:
        pool = PostgresPool(pg_database, schema=pg_schema, pool_size=3)
        await pool.open()
        claims: SharedClaims[str] = SharedClaims(PgClaimTable(pool), ValueCodec(), 60.0)
        try:
            async with claims.running():
                yield claims
        finally:
            await pool.close()


def _data(index: int, *, done: bool = False) -> JSONObject:
    data: JSONObject = {"runId": "run-1", "n": index}
    if done:
        data["done"] = True
    return data


async def test_a_run_is_followed_from_another_replica(pg_database: str, pg_schema: str) -> None:
    """B follows A's run from the middle: the rest, once, in order, woken by NOTIFY."""
    storage = InMemoryStorage()
    first = _streams(pg_database, pg_schema, storage)
    second = _streams(pg_database, pg_schema, storage)
    async with first.running(), second.running():
        stream = await first.run(KEY, "run-1", resumed=False)
        stream.begin()
        first.put(stream)
        for index in range(3):
            stream.publish(_data(index))
        await first.flush()
        remote = await second.latest(KEY)
        assert remote is not None and remote.active
        got: list[int] = []

        async def follow() -> None:
            with anyio.fail_after(15):
                async for batch in remote.batches(2, heartbeat=0.5):
                    got.extend(frame.id for frame in batch)

        async with anyio.create_task_group() as group:
            group.start_soon(follow)
            await anyio.sleep(0.2)
            for index in range(3, 6):
                stream.publish(_data(index))
                await anyio.sleep(0.02)
            done = stream.next_frame(_data(6, done=True))
            await first.persist(stream, done)
            stream.append(done)
    assert got == [3, 4, 5, 6, 7]


async def test_a_segment_start_is_notified_to_other_replicas(
    pg_database: str, pg_schema: str
) -> None:
    """A request waiting on B for a run to resume is woken by A's NOTIFY."""
    storage = InMemoryStorage()
    first = _streams(pg_database, pg_schema, storage)
    second = _streams(pg_database, pg_schema, storage)
    async with first.running(), second.running():
        await check_announced_segment(first, second, KEY)


async def test_only_the_owner_writes_and_one_takeover_wins(
    pg_database: str, pg_schema: str
) -> None:
    """The claim's compare-and-set writes, on PostgreSQL (one conditional UPDATE each)."""
    pool = PostgresPool(pg_database, schema=pg_schema, pool_size=3)
    await pool.open()
    table = PgClaimTable(pool)
    try:
        async with table.running():
            await check_claim_owner_and_takeover(table)
    finally:
        await pool.close()
