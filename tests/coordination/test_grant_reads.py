"""A stale turn's catch-up read rides in the statement that grants its PostgreSQL lease.

Two Agents on one context, each with a PostgresStorage and a PostgresRunLease of its
own, stand in for two replicas. The storage counts its own catch-up reads (a real
PostgresStorage, its calls counted, not a mock): a turn that takes its lease through
`take_lease` makes none when the grant's statement caught it up, and still runs on the
whole conversation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace

import anyio
import psycopg
import pytest
from psycopg import sql

from agentkeel import Agent, ScriptedModel, SessionManager
from agentkeel.errors import CorruptSessionError
from agentkeel.keys import SessionKey
from agentkeel.runtime.grant_reads import forget, take_lease
from agentkeel.runtime.pg_lease import PostgresRunLease
from agentkeel.storage.base import SessionSnapshot
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.storage.postgres_pool import PostgresPool

pytestmark = pytest.mark.anyio

KEY = SessionKey(definition="chat", context_id="ctx-folded")


class CountingStorage(PostgresStorage):
    """PostgresStorage counting the catch-up reads it makes itself."""

    catch_ups = 0

    async def load_since(
        self, key: SessionKey, *, version: int, count: int, last_id: str | None
    ) -> SessionSnapshot | None:
        self.catch_ups += 1
        return await super().load_since(key, version=version, count=count, last_id=last_id)


@dataclass
class Replica:
    storage: CountingStorage
    lease: PostgresRunLease
    agent: Agent

    async def turn(self, text: str) -> None:
        grant = await take_lease(self.lease, self.agent, KEY, ttl=30, on_cancel=None)
        try:
            await self.agent.invoke_async(text)
        finally:
            forget(self.agent)
            await self.lease.release(grant)


@pytest.fixture
async def replicas(pg_database: str, pg_schema: str) -> AsyncIterator[tuple[Replica, Replica]]:
    async with AsyncExitStack() as stack:
        made = []
        for name in ("first", "second"):
            storage = CountingStorage(pg_database, schema=pg_schema, pool_size=2)
            await storage.open()
            stack.push_async_callback(storage.close)
            lease = PostgresRunLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
            await stack.enter_async_context(lease.running())
            model = ScriptedModel([f"{name} answer {n}" for n in range(4)])
            manager = SessionManager(KEY.session_id, storage)
            made.append(Replica(storage, lease, Agent(model, session_manager=manager)))
        yield made[0], made[1]


async def test_a_stale_agent_catches_up_in_the_grant_statement(
    replicas: tuple[Replica, Replica],
) -> None:
    first, second = replicas
    await first.turn("one")
    await second.turn("two")  # second loads whole, once
    first.storage.catch_ups = second.storage.catch_ups = 0
    await first.turn("three")  # behind by second's turn
    await second.turn("four")  # behind by first's turn
    assert (first.storage.catch_ups, second.storage.catch_ups) == (0, 0)
    expected = ["one", "first answer 0", "two", "second answer 0"]
    expected += ["three", "first answer 1", "four", "second answer 1"]
    assert [m.text for m in second.agent.messages] == expected
    model = second.agent.model
    assert isinstance(model, ScriptedModel)  # the model was sent the other's turn
    assert [m.text for m in model.requests[-1].messages] == expected[:-1]
    snapshot = await first.storage.load(KEY)
    assert snapshot is not None and [m.text for m in snapshot.messages] == expected


async def test_an_up_to_date_agent_makes_no_read_of_its_own(
    replicas: tuple[Replica, Replica],
) -> None:
    first, _ = replicas
    await first.turn("one")
    await first.turn("two")  # the first grant (no lease row yet) read on its own
    first.storage.catch_ups = 0
    held = first.agent.messages
    await first.turn("three")
    assert first.storage.catch_ups == 0
    assert first.agent.messages[: len(held)] == held
    assert [m.text for m in first.agent.messages][-2:] == ["three", "first answer 2"]


async def test_a_grant_taken_over_is_not_trusted_and_the_agent_reads(
    replicas: tuple[Replica, Replica],
) -> None:
    """The row was still held in the grant's snapshot: the taker reads on its own."""
    first, second = replicas
    await first.turn("one")
    await second.turn("two")
    stale = await first.lease.acquire(KEY, ttl=0.3)  # first's grant is never released
    await first.agent.invoke_async("three")
    second.storage.catch_ups = 0
    with anyio.fail_after(10):
        grant = await take_lease(second.lease, second.agent, KEY, ttl=30, on_cancel=None)
    assert grant.taken_over and grant.fence > stale.fence
    manager = second.agent.session_manager
    assert manager is not None and manager.prefetched is None
    await second.agent.invoke_async("four")
    await second.lease.release(grant)
    assert second.storage.catch_ups == 1
    assert [m.text for m in second.agent.messages][-4:] == [
        "three",
        "first answer 1",
        "four",
        "second answer 1",
    ]


async def test_a_context_without_a_lease_row_is_not_trusted(
    replicas: tuple[Replica, Replica], pg_database: str, pg_schema: str
) -> None:
    """No row in the snapshot: a first holder may have committed and released after it."""
    first, second = replicas
    await first.turn("one")
    await second.turn("two")
    await first.turn("three")
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(sql.SQL("DELETE FROM {}.lease_rows").format(sql.Identifier(pg_schema)))
    second.storage.catch_ups = 0
    await second.turn("four")
    assert second.storage.catch_ups == 1
    assert [m.text for m in second.agent.messages][-4:] == [
        "three",
        "first answer 1",
        "four",
        "second answer 1",
    ]


async def test_a_prefetch_made_at_another_point_is_not_used(
    replicas: tuple[Replica, Replica],
) -> None:
    first, second = replicas
    await first.turn("one")
    await second.turn("two")
    await first.turn("three")
    manager = first.agent.session_manager
    assert manager is not None
    grant = await take_lease(first.lease, first.agent, KEY, ttl=30, on_cancel=None)
    fetched = manager.prefetched
    assert fetched is not None  # up to date: the folded read found nothing new
    assert fetched.snapshot is not None and not fetched.snapshot.messages
    forget(first.agent)
    assert manager.prefetched is None
    await first.lease.release(grant)
    await second.turn("four")  # moves the context on
    version, known = fetched.point
    manager.prefetched = replace(fetched, point=(version - 1, known))
    first.storage.catch_ups = 0
    await first.agent.invoke_async("five")  # not at the manager's point: read again
    assert first.storage.catch_ups == 1
    assert manager.prefetched is None
    assert [m.text for m in first.agent.messages][-4:] == [
        "four",
        "second answer 1",
        "five",
        "first answer 2",
    ]


async def test_a_folded_read_that_does_not_decode_leaves_the_grant_to_release(
    replicas: tuple[Replica, Replica],
    pg_database: str,
    pg_schema: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A corrupt row behind the folded read: the grant comes back, nothing is prefetched.

    The Agent's own read then says what is wrong, and the released lease lets the next
    turn in: a decoding error raised while the grant is held would have kept the context
    locked until its lease expired.
    """
    first, second = replicas
    await first.turn("one")
    await second.turn("two")
    await first.turn("three")  # second is behind by this turn, which is then corrupted
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {s}.messages SET body = %s::json"
                " WHERE seq = (SELECT max(seq) FROM {s}.messages)"
            ).format(s=sql.Identifier(pg_schema)),
            ('{"not": "a message"}',),
        )
    with anyio.fail_after(10):
        grant = await take_lease(second.lease, second.agent, KEY, ttl=30, on_cancel=None)
    assert "a folded catch-up did not decode" in caplog.text  # it was made, and failed
    manager = second.agent.session_manager
    assert manager is not None and manager.prefetched is None
    with pytest.raises(CorruptSessionError):
        await second.agent.invoke_async("four")
    assert await second.lease.release(grant)
    with anyio.fail_after(10):
        again = await first.lease.acquire(KEY, ttl=30)
    assert again.fence > grant.fence
    await first.lease.release(again)
