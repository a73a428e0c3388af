"""The event loop the conformance suites run on, and backends for module-level suites.

The suites of `agentkeel.testing` are classes whose subclasses give their own
`reopen_storage`; a module-level test here gets every built-in backend from this one,
PostgreSQL included (skipped with a reason when it is absent).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from agentkeel.storage import InMemoryStorage, LocalFileStorage, SessionStorage
from agentkeel.storage.postgres import PostgresStorage
from postgres.fixtures import pg_database, pg_schema

__all__ = ["pg_database", "pg_schema"]

StorageFactory = Callable[[], SessionStorage]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "file", pytest.param("postgres", marks=pytest.mark.postgres)])
async def reopen_storage(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StorageFactory]:
    if request.param == "memory":
        memory = InMemoryStorage()
        yield lambda: memory
    elif request.param == "file":
        yield lambda: LocalFileStorage(tmp_path / "sessions")
    else:  # a schema of its own (postgres.fixtures), opened on this test's loop
        database, schema = (request.getfixturevalue(name) for name in ("pg_database", "pg_schema"))
        postgres = PostgresStorage(database, schema=schema, pool_size=4)
        await postgres.open()
        try:
            yield postgres.sharing
        finally:
            await postgres.close()


@pytest.fixture
def storage(reopen_storage: StorageFactory) -> SessionStorage:
    return reopen_storage()
