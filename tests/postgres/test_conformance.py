"""The storage and checkpointer conformance suites of `agentkeel.testing` on PostgreSQL.

Each call of the factory is a new storage object over the same pool and schema, so every
read reaches the database, never an object's memory.
"""

from __future__ import annotations

import pytest

from agentkeel.checkpoint.postgres import PostgresCheckpointer
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.testing import (
    CheckpointerFactory,
    CheckpointerSuite,
    SessionStorageSuite,
    StorageFactory,
)

pytestmark = [pytest.mark.postgres]


class TestPostgresStorage(SessionStorageSuite):
    @pytest.fixture
    def reopen_storage(self, pg_storage: PostgresStorage) -> StorageFactory:
        return pg_storage.sharing


class TestPostgresCheckpointer(CheckpointerSuite):
    @pytest.fixture
    def reopen_checkpointer(self, pg_storage: PostgresStorage) -> CheckpointerFactory:
        return lambda: PostgresCheckpointer(pg_storage.sharing())
