"""PgClaimTable: the shared Idempotency-Key claims in PostgreSQL (an insert on a unique key).

For a PostgreSQL-only deployment. The primary key decides who claimed first; an
expired claim is deleted in the same transaction before the insert, so a key comes
back once its claim outlived the ttl.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agentkeel.messages import JSONObject
from agentkeel.storage.postgres_pool import PostgresPool

__all__ = ["PgClaimTable"]

_TABLE = (
    "CREATE TABLE IF NOT EXISTS {s}.idempotency_claims ("
    " name text PRIMARY KEY, value jsonb NOT NULL, context text NOT NULL,"
    " expires_at timestamptz NOT NULL)"
)
_LIVE = "expires_at > clock_timestamp()"


class PgClaimTable:
    """`ClaimTable` in a table of the coordination's schema.

    Args:
        pool: The database and schema (the fan-out's pool: it is opened there).
    """

    def __init__(self, pool: PostgresPool) -> None:
        self.pool = pool

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Create the table (the pool is opened by its owner)."""
        async with self.pool._connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.pool.schema,))
            await conn.execute(self.pool._sql(_TABLE))
        yield

    async def insert(
        self, name: str, value: JSONObject, context: str, ttl: float
    ) -> JSONObject | None:
        """Insert unless a live claim exists; None when inserted, else the live value."""
        async with self.pool._connection() as conn, conn.transaction():
            await conn.execute(
                self.pool._sql(
                    f"DELETE FROM {{s}}.idempotency_claims WHERE name = %s AND NOT {_LIVE}"
                ),
                (name,),
            )
            cursor = await conn.execute(
                self.pool._sql(
                    "INSERT INTO {s}.idempotency_claims (name, value, context, expires_at)"
                    " VALUES (%s, %s, %s, clock_timestamp() + %s * interval '1 second')"
                    " ON CONFLICT (name) DO NOTHING RETURNING 1"
                ),
                (name, json.dumps(value), context, ttl),
            )
            if await cursor.fetchone() is not None:
                return None
        return await self.get(name) or {}

    async def get(self, name: str) -> JSONObject | None:
        """The live claim, or None."""
        async with self.pool._connection() as conn:
            cursor = await conn.execute(
                self.pool._sql(
                    f"SELECT value::text FROM {{s}}.idempotency_claims WHERE name = %s AND {_LIVE}"
                ),
                (name,),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        value = json.loads(row[0])
        return value if isinstance(value, dict) else None

    async def update(self, name: str, fields: JSONObject, *, owner: str | None = None) -> bool:
        """Merge `fields` into the claim's JSON, if `owner` still holds it (one statement)."""
        async with self.pool._connection() as conn:
            cursor = await conn.execute(
                self.pool._sql(
                    "UPDATE {s}.idempotency_claims SET value = value || %s::jsonb WHERE name = %s"
                    " AND (%s::text IS NULL OR value->>'owner' = %s::text) RETURNING 1"
                ),
                (json.dumps(fields), name, owner, owner),
            )
            return await cursor.fetchone() is not None

    async def replace(self, name: str, expected: JSONObject, value: JSONObject) -> bool:
        """Set the live claim to `value` if it still is `expected` (one statement)."""
        async with self.pool._connection() as conn:
            cursor = await conn.execute(
                self.pool._sql(
                    "UPDATE {s}.idempotency_claims SET value = %s::jsonb WHERE name = %s"
                    f" AND value = %s::jsonb AND {_LIVE} RETURNING 1"
                ),
                (json.dumps(value), name, json.dumps(expected)),
            )
            return await cursor.fetchone() is not None

    async def delete(self, name: str) -> None:
        """Drop the claim."""
        async with self.pool._connection() as conn:
            await conn.execute(
                self.pool._sql("DELETE FROM {s}.idempotency_claims WHERE name = %s"), (name,)
            )

    async def delete_context(self, context: str) -> None:
        """Drop every claim of `context`."""
        async with self.pool._connection() as conn:
            await conn.execute(
                self.pool._sql("DELETE FROM {s}.idempotency_claims WHERE context = %s"), (context,)
            )
