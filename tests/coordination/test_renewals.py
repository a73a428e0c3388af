"""One task renews every running turn's lease, and only while turns run.

Against the PostgreSQL lease (two handles stand for two replicas), its renewals counted
by a subclass (the real lease's calls, not a mock).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from agentkeel.errors import RunInProgressError
from agentkeel.runtime.coordination import LeaseGrant
from agentkeel.runtime.pg_lease import PostgresRunLease
from agentkeel.runtime.renewals import Renewals
from agentkeel.storage.base import SessionKey
from agentkeel.storage.postgres_pool import PostgresPool

pytestmark = pytest.mark.anyio

TTL = 0.6


class CountingLease(PostgresRunLease):
    renewed = 0

    async def renew(self, grant: LeaseGrant) -> LeaseGrant:
        self.renewed += 1
        return await super().renew(grant)


@pytest.fixture
async def leases(
    pg_database: str, pg_schema: str
) -> AsyncIterator[tuple[CountingLease, CountingLease]]:
    first = CountingLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    second = CountingLease(PostgresPool(pg_database, schema=pg_schema, pool_size=2))
    async with first.running(), second.running():
        yield first, second


def key(name: str) -> SessionKey:
    return SessionKey(definition="chat", context_id=name)


async def test_running_turns_keep_their_leases_past_the_ttl(
    leases: tuple[CountingLease, CountingLease],
) -> None:
    first, second = leases
    renewals = Renewals(first)
    lost: list[Exception] = []
    async with anyio.create_task_group() as group:
        held = []
        for name in ("a", "b"):
            grant = await first.acquire(key(name), ttl=TTL)
            held.append(renewals.add(grant, group, on_renewed=lambda g: None, on_lost=lost.append))
            await anyio.sleep(0.1)
        await anyio.sleep(TTL * 2.5)
        for name in ("a", "b"):  # renewed: still held
            with pytest.raises(RunInProgressError):
                await second.acquire(key(name), wait=False, ttl=TTL)
        assert first.renewed >= 4
        for entry in held:
            renewals.remove(entry)
        counted = first.renewed
        await anyio.sleep(TTL * 1.5)  # no turn runs: no renewal, and the leases expire
        assert first.renewed == counted
        taken = await second.acquire(key("a"), wait=False, ttl=TTL)
        assert taken.taken_over
        # a turn that starts later is renewed again by the same task
        grant = await first.acquire(key("c"), ttl=TTL)
        renewals.add(grant, group, on_renewed=lambda g: None, on_lost=lost.append)
        await anyio.sleep(TTL * 1.5)
        assert first.renewed > counted
        group.cancel_scope.cancel()
    assert lost == []


async def test_a_lease_taken_over_tells_its_turn(
    leases: tuple[CountingLease, CountingLease],
) -> None:
    first, second = leases
    renewals = Renewals(first)
    stale = await first.acquire(key("x"), ttl=0.2)
    await anyio.sleep(0.3)
    await second.acquire(key("x"), ttl=30)  # takes the expired lease over
    lost: list[Exception] = []
    async with anyio.create_task_group() as group:
        other = await first.acquire(key("y"), ttl=TTL)
        kept = renewals.add(other, group, on_renewed=lambda g: None, on_lost=lost.append)
        renewals.add(stale, group, on_renewed=lambda g: None, on_lost=lost.append)
        with anyio.fail_after(5):
            while not lost:
                await anyio.sleep(0.05)
        await anyio.sleep(TTL)  # the other turn is still renewed
        with pytest.raises(RunInProgressError):
            await second.acquire(key("y"), wait=False, ttl=TTL)
        renewals.remove(kept)
        group.cancel_scope.cancel()
    assert len(lost) == 1
