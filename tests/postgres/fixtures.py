"""PostgreSQL fixtures: a database of the tests' own, and a fresh schema for each test.

A conftest imports them (``from postgres.fixtures import *``) wherever tests need them.

The database ``agentkeel_tests`` is created on first use (beside the machine's ``test``
database, so nothing the tests do touches another's tables); every test gets a schema
named after a random token, dropped when it ends. Without PostgreSQL the tests skip
with a reason, or fail under ``AGENTKEEL_REQUIRE_SERVICES=1`` (the root conftest's
``postgres_dsn``).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from agentkeel.storage.postgres import PostgresStorage

__all__ = ["pg_database", "pg_schema", "pg_storage", "pg_url"]

DATABASE = "agentkeel_tests"
_created: set[str] = set()


def _database_url(server_dsn: str) -> str:
    """`server_dsn` pointed at the tests' own database, created when missing."""
    parts = urlsplit(server_dsn)
    url = urlunsplit(parts._replace(path=f"/{DATABASE}"))
    if url not in _created:
        with psycopg.connect(server_dsn, autocommit=True) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if found.fetchone() is None:
                try:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
                except psycopg.errors.DuplicateDatabase:
                    pass  # another test process created it first
        _created.add(url)
    return url


@pytest.fixture
def pg_database(postgres_dsn: str) -> str:
    """The URL of the tests' own database."""
    return _database_url(postgres_dsn)


@pytest.fixture
def pg_schema(pg_database: str) -> Iterator[str]:
    """A schema name no other test uses; dropped (with everything in it) afterwards."""
    name = f"t_{secrets.token_hex(6)}"
    yield name
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def pg_url(pg_database: str, pg_schema: str) -> str:
    """A ``postgresql://`` storage URL for this test's own schema."""
    return f"{pg_database}?schema={pg_schema}"


@pytest.fixture
async def pg_storage(pg_database: str, pg_schema: str) -> AsyncIterator[PostgresStorage]:
    """An opened (and so migrated) PostgresStorage on this test's schema."""
    storage = PostgresStorage(pg_database, schema=pg_schema, pool_size=4)
    await storage.open()
    try:
        yield storage
    finally:
        await storage.close()
