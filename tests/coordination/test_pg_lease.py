"""PostgresRunLease against a real PostgreSQL: the RunLease conformance suite, two replicas.

Each test gets a schema of its own (`pg_schema`); the two handles are two lease objects
with pools and listening connections of their own, as two processes would have.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import psycopg
import pytest
from psycopg import sql

from agentkeel.errors import ConcurrentWriteError
from agentkeel.messages import JSONObject, Message
from agentkeel.runtime.coordination import LeaseGrant, LeaseLostError
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


async def test_a_free_context_is_taken_without_a_ticket(pg_database: str, pg_schema: str) -> None:
    """Nobody waits: the grant comes from the arriving statement, and the line stays empty."""
    key = SessionKey(definition="chat", context_id="ctx-free")
    lease = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    async with lease.running():
        first = await lease.acquire(key)
        assert await lease.release(first)
        second = await lease.acquire(key)
        assert second.fence == first.fence + 1
        assert await lease.release(second)
        assert not await _ticket_taken(pg_database, pg_schema)  # one statement each


async def test_a_renewal_after_its_release_leaves_the_next_holder_reachable(
    pg_database: str, pg_schema: str
) -> None:
    """A renewal still in flight when its turn released fails, and only for that turn.

    The next turn of the context on this process holds it now: a cancel sent for its run
    must still reach it.
    """
    key = SessionKey(definition="chat", context_id="ctx-renewed-late")
    lease = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    told: list[str] = []

    def on_cancel(run_id: str, drop: bool) -> bool:
        told.append(run_id)
        return True

    async with lease.running():
        first = await lease.acquire(key, ttl=30)
        assert await lease.release(first)
        second = await lease.acquire(key, ttl=30, on_cancel=on_cancel)
        with pytest.raises(LeaseLostError):
            await lease.renew(first)
        assert await lease.cancel(key, "run-2")
        assert await lease.release(second)
    assert told == ["run-2"]


async def _ticket_taken(database: str, schema: str) -> bool:
    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
        query = sql.SQL("SELECT is_called FROM {}.lease_line_ticket_seq").format(
            sql.Identifier(schema)
        )
        row = await (await conn.execute(query)).fetchone()
        assert row is not None
        return row[0] is True


async def test_a_release_notifies_only_when_somebody_waits(
    pg_database: str, pg_schema: str
) -> None:
    key = SessionKey(definition="chat", context_id="ctx-heard")
    first = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    second = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    heard: list[JSONObject] = []
    second.notifier.on("free", heard.append)
    async with first.running(), second.running():
        with anyio.fail_after(5):
            await second.notifier.listening.wait()
        assert await first.release(await first.acquire(key))
        await anyio.sleep(0.3)
        assert heard == []  # nobody waited: no replica was woken for nothing
        grant = await first.acquire(key)
        async with anyio.create_task_group() as group:
            taken: list[LeaseGrant] = []

            async def wait_for_it() -> None:
                taken.append(await second.acquire(key))

            group.start_soon(wait_for_it)
            with anyio.fail_after(5):
                while await _line_length(pg_database, pg_schema) == 0:
                    await anyio.sleep(0.01)
            assert await first.release(grant)
        assert [next_grant.fence for next_grant in taken] == [grant.fence + 1]
        assert [payload["t"] for payload in heard] == ["free"]
        assert await second.release(taken[0])


async def _line_length(database: str, schema: str) -> int:
    async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
        query = sql.SQL("SELECT count(*) FROM {}.lease_line").format(sql.Identifier(schema))
        row = await (await conn.execute(query)).fetchone()
        assert row is not None
        return int(row[0])
