"""PostgresRunLease against a real PostgreSQL: the RunLease conformance suite, two replicas.

Each test gets a schema of its own (`pg_schema`); the two handles are two lease objects
with pools and listening connections of their own, as two processes would have.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from agentkeel.errors import ConcurrentWriteError
from agentkeel.messages import Message
from agentkeel.runtime.pg_lease import PostgresRunLease
from agentkeel.storage.base import SessionKey
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.storage.postgres_pool import PostgresPool
from agentkeel.testing.coordination import LeaseHandles, RunLeaseConformance

pytestmark = pytest.mark.anyio


class TestPostgresRunLease(RunLeaseConformance):
    @pytest.fixture
    async def leases(self, pg_database: str, pg_schema: str) -> AsyncIterator[LeaseHandles]:
        first = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=4))
        second = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=4))
        async with first.running(), second.running():
            yield first, second


async def test_a_taken_over_holder_cannot_commit(pg_database: str, pg_schema: str) -> None:
    """The grant's fence, passed to storage, refuses the paused holder's late commit."""
    key = SessionKey(definition="chat", context_id="ctx-fenced")
    storage = PostgresStorage(pg_database, schema=pg_schema, pool_size=2)
    await storage.open()
    first = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    second = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    try:
        async with first.running(), second.running():
            stale = await first.acquire(key, ttl=0.2)
            with anyio.fail_after(10):
                fresh = await second.acquire(key, ttl=30)
            assert fresh.fence > stale.fence
            version = await storage.append(
                key,
                [Message.user("from the new holder")],
                None,
                expected_version=0,
                fence=fresh.fence,
            )
            with pytest.raises(ConcurrentWriteError):
                await storage.append(
                    key,
                    [Message.user("late")],
                    None,
                    expected_version=version,
                    fence=stale.fence,
                )
            snapshot = await storage.load(key)
            assert snapshot is not None
            assert [message.text for message in snapshot.messages] == ["from the new holder"]
            assert await second.release(fresh)
    finally:
        await storage.close()
