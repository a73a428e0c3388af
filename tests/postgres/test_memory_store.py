"""The MemoryStore conformance suite on PostgreSQL, and what only this backend does.

Each call of the factory is a new store over the same pool and schema, with an empty
cache of vectors, so every read reaches the database.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import numpy as np
import psycopg
import pytest
from psycopg import sql

from agentkeel.memory import MemoryScope, MemoryStore
from agentkeel.memory.postgres import PostgresMemoryStore
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.testing.memory_store import MEMORY_STORE_CHECKS, Reopen, make_item

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]


@pytest.mark.parametrize("check", MEMORY_STORE_CHECKS, ids=lambda c: c.__name__)
async def test_memory_store_conformance(
    check: Callable[[Reopen], Awaitable[None]], pg_storage: PostgresStorage
) -> None:
    await check(lambda: PostgresMemoryStore.over(pg_storage))


async def test_it_implements_the_protocol(pg_storage: PostgresStorage) -> None:
    assert isinstance(PostgresMemoryStore.over(pg_storage), MemoryStore)


async def test_a_write_by_another_process_is_seen_by_a_cached_search(
    pg_storage: PostgresStorage,
) -> None:
    """The cached vectors are checked against the scope's revision on every search."""
    scope = MemoryScope("dora")
    reader, writer = PostgresMemoryStore.over(pg_storage), PostgresMemoryStore.over(pg_storage)
    await writer.put(scope, [make_item("a", [1, 0])])
    query = np.array([0, 1], np.float32)
    assert [m.item.key for m in await reader.search(scope, query, model="test-model")] == ["a"]
    await writer.put(scope, [make_item("b", [0, 1])])
    found = await reader.search(scope, query, model="test-model")
    assert [m.item.key for m in found] == ["b", "a"], "a cached search missed a new item"
    await writer.delete(scope, "memories", "b")
    found = await reader.search(scope, query, model="test-model")
    assert [m.item.key for m in found] == ["a"], "a cached search returned a deleted item"


async def test_deleting_a_scope_leaves_no_row(
    pg_storage: PostgresStorage, pg_database: str, pg_schema: str
) -> None:
    store = PostgresMemoryStore.over(pg_storage)
    await store.put(MemoryScope("carol"), [make_item("a", [1, 0]), make_item("b", [0, 1])])
    await store.put(MemoryScope("carol", "helper"), [make_item("c", [1, 0])])
    assert await store.delete(MemoryScope("carol")) == 2
    with psycopg.connect(pg_database) as conn:
        counts = conn.execute(
            sql.SQL(
                "SELECT (SELECT count(*) FROM {s}.memory_scopes WHERE agent = ''),"
                " (SELECT count(*) FROM {s}.memory_items)"
            ).format(s=sql.Identifier(pg_schema))
        ).fetchone()
    assert counts == (0, 1), "the shared scope's rows stayed (or the agent scope's went)"


async def test_text_with_a_nul_character_round_trips(pg_storage: PostgresStorage) -> None:
    scope = MemoryScope("nul\x00user")
    await PostgresMemoryStore.over(pg_storage).put(scope, [make_item("k", [1, 0], text="a\x00b%")])
    got = await PostgresMemoryStore.over(pg_storage).get(scope, "memories", "k")
    assert got is not None and got.text == "a\x00b%"
