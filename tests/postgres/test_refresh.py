"""A cached Agent on PostgreSQL checks for a newer version with the catch-up read itself.

Two Agents on one context over one PostgresStorage stand in for two replicas. The
storage below counts its version reads and catch-up reads (a real PostgresStorage, its
calls counted, not a mock): a turn on a context the other moved on costs one read
before the model is called, the catch-up, never a version read first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentkeel import Agent, ScriptedModel, SessionManager
from agentkeel.keys import SessionKey
from agentkeel.storage.base import SessionSnapshot
from agentkeel.storage.postgres import PostgresStorage

pytestmark = pytest.mark.anyio


class CountingStorage(PostgresStorage):
    """PostgresStorage counting the reads a cached Agent makes before a turn."""

    versions = 0
    catch_ups = 0

    async def version(self, key: SessionKey) -> int:
        self.versions += 1
        return await super().version(key)

    async def load_since(
        self, key: SessionKey, *, version: int, count: int, last_id: str | None
    ) -> SessionSnapshot | None:
        self.catch_ups += 1
        return await super().load_since(key, version=version, count=count, last_id=last_id)


@pytest.fixture
async def storage(pg_database: str, pg_schema: str) -> AsyncIterator[CountingStorage]:
    opened = CountingStorage(pg_database, schema=pg_schema, pool_size=2)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def replica(storage: PostgresStorage, name: str) -> Agent:
    model = ScriptedModel([f"{name} answer {n}" for n in range(3)])
    return Agent(model, session_manager=SessionManager("chat:ctx-refresh", storage))


async def test_a_stale_agent_catches_up_without_a_version_read(
    storage: CountingStorage,
) -> None:
    first, second = replica(storage, "first"), replica(storage, "second")
    await first.invoke_async("one")  # first loads: nothing stored yet
    await second.invoke_async("two")  # second loads whole, once
    storage.versions = storage.catch_ups = 0
    await first.invoke_async("three")  # behind by second's turn
    await second.invoke_async("four")  # behind by first's turn
    assert (storage.versions, storage.catch_ups) == (0, 2)
    expected = ["one", "first answer 0", "two", "second answer 0"]
    expected += ["three", "first answer 1", "four", "second answer 1"]
    assert [m.text for m in second.messages] == expected
    model = second.model
    assert isinstance(model, ScriptedModel)  # the model was sent the other's turn
    assert [m.text for m in model.requests[-1].messages] == expected[:-1]


async def test_an_unchanged_context_costs_one_read_and_keeps_its_history(
    storage: CountingStorage,
) -> None:
    agent = replica(storage, "only")
    await agent.invoke_async("one")
    held = agent.messages
    storage.versions = storage.catch_ups = 0
    await agent.invoke_async("two")
    assert (storage.versions, storage.catch_ups) == (0, 1)
    assert agent.messages[: len(held)] == held
    snapshot = await storage.load(SessionKey.parse("chat:ctx-refresh"))
    assert snapshot is not None
    assert [m.text for m in snapshot.messages] == ["one", "only answer 0", "two", "only answer 1"]


async def test_a_deleted_and_restarted_context_is_loaded_whole(
    storage: CountingStorage,
) -> None:
    first, second = replica(storage, "first"), replica(storage, "second")
    await first.invoke_async("one")
    await second.invoke_async("two")
    manager = second.session_manager
    assert manager is not None
    await manager.delete()
    await second.invoke_async("fresh start")  # the other's cache does not know
    await first.invoke_async("after")
    assert [m.text for m in first.messages] == [
        "fresh start",
        "second answer 1",
        "after",
        "first answer 1",
    ]
