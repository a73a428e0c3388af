"""The connection pool and schema of the PostgreSQL backends, and the SQL plumbing.

`PostgresPool` is what `PostgresStorage` and `PostgresCheckpointer` stand on: the pool
is opened by `open` (the server's lifespan calls it, on the loop that will use it: a
pool made in a constructor binds to whatever loop happens to be running, a known
psycopg pitfall), after `migrate` brought the schema up to date on a connection of its
own. Every query goes through `_connection`, which turns a lost database into
StorageUnavailableError (the server answers ``503 storage_unavailable``) and lets the
pool replace broken connections by itself.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from agentkeel.errors import StorageError
from agentkeel.errors import StorageUnavailableError as _Unavailable
from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject
from agentkeel.storage.base import StorageHealth
from agentkeel.storage.postgres_schema import migrate, schema_identifier

__all__ = ["PostgresPool", "from_text_key", "redact", "text_key", "who"]

Row = tuple[Any, ...]


def redact(url: str) -> str:
    """`url` with its password replaced by ``***``: what an error or a log may show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[2]}"))


def text_key(value: str) -> str:
    """`value` as a text column can hold it: ``%`` and NUL percent-encoded (injective).

    Run, task and checkpoint ids and principals come from callers and may hold any
    character, but PostgreSQL text cannot hold NUL; every ordinary id is stored as is.
    """
    return value.replace("%", "%25").replace("\x00", "%00")


def who(key: SessionKey) -> tuple[str, str, str]:
    """The (principal, definition, context id) columns of `key` (no principal is ``''``)."""
    return (text_key(key.principal or ""), key.definition, key.context_id)


class PostgresPool:
    """A pool over one schema of one database: lifecycle, health and query helpers.

    Args:
        dsn: A libpq connection string or ``postgresql://`` URL.
        schema: The schema holding the tables; created and migrated by `open`.
        prepare_threshold: psycopg's ``prepare_threshold``; None prepares no statement,
            which PgBouncer in transaction mode needs.
        pool_size: The most connections the pool opens.
        connect_timeout: Seconds to wait for a connection before the storage counts as
            unavailable (at start, and for each operation).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "agentkeel",
        prepare_threshold: int | None = 5,
        pool_size: int = 10,
        connect_timeout: float = 5.0,
    ) -> None:
        schema_identifier(schema)  # refuse a bad name now, not at the first query
        self.dsn = dsn
        self.schema = schema
        self.prepare_threshold = prepare_threshold
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._pool: AsyncConnectionPool[AsyncConnection[Row]] | None = None
        self._owner: PostgresPool | None = None

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        """Migrate the schema, then open the pool; StorageUnavailableError when unreachable.

        The migration runs on a connection of its own, made first, so that an unreachable
        or misconfigured server fails here with libpq's reason (never the password).
        """
        if self._owner is not None or self._pool is not None:
            return
        await self.migrate()
        pool: AsyncConnectionPool[AsyncConnection[Row]] = AsyncConnectionPool(
            self.dsn,
            min_size=1,
            max_size=max(1, self.pool_size),
            kwargs={"autocommit": True, "prepare_threshold": self.prepare_threshold},
            timeout=self.connect_timeout,
            open=False,
            name="agentkeel",
        )
        try:
            await pool.open(wait=True, timeout=self.connect_timeout)
        except BaseException as exc:
            await pool.close()
            if isinstance(exc, psycopg.Error | PoolTimeout):
                raise self._unreachable(exc) from None
            raise
        self._pool = pool

    async def migrate(self) -> list[int]:
        """Apply the migrations this database lacks (`agentkeel migrate` runs only this).

        Returns the versions applied. Raises SchemaTooNewError for a database that a
        newer agentkeel migrated, StorageUnavailableError when it cannot be reached.
        """
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.dsn,
                autocommit=True,
                prepare_threshold=self.prepare_threshold,
                connect_timeout=max(1, round(self.connect_timeout)),
            )
        except psycopg.Error as exc:
            raise self._unreachable(exc) from None
        try:
            async with conn:
                return await migrate(conn, self.schema)
        except psycopg.OperationalError as exc:
            raise self._unreachable(exc) from None
        except psycopg.Error as exc:
            raise StorageError(
                f"storage: migrating {self.schema!r} failed: {reason(exc)}"
            ) from None

    def _unreachable(self, exc: BaseException) -> _Unavailable:
        return _Unavailable(
            f"storage: cannot reach PostgreSQL at {redact(self.dsn)}: {reason(exc)}"
        )

    async def close(self) -> None:
        """Close the pool (a storage sharing another's leaves it open)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def health(self) -> StorageHealth:
        """Whether a connection answers ``SELECT 1`` now (within a second); never raises."""
        try:
            async with self._connection(timeout=min(1.0, self.connect_timeout)) as conn:
                await conn.execute("SELECT 1")
        except StorageError as exc:
            return StorageHealth(ok=False, detail=exc.message)
        return StorageHealth(ok=True)

    # -- plumbing ----------------------------------------------------------------------

    def _sql(self, text: str) -> bytes:
        return _rendered(text, self.schema)

    @staticmethod
    def _with_session(text: str) -> str:
        """`text` behind a CTE ``owner`` that creates (or finds) the session row.

        Its parameters come first: principal, definition, context id, created, updated.
        """
        return (
            "WITH owner AS (INSERT INTO {s}.sessions (principal, definition, context_id,"
            " created_at, updated_at) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (principal, definition, context_id)"
            " DO UPDATE SET saved = {s}.sessions.saved RETURNING id) " + text
        )

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConnection[Row]]:
        """The open pool (this storage's, or the one it shares)."""
        pool = self._owner.pool if self._owner is not None else self._pool
        if pool is None:
            raise _Unavailable(
                "storage: PostgreSQL storage is not open (the server opens it at start; "
                "call `await storage.open()` first)"
            )
        return pool

    @asynccontextmanager
    async def _connection(
        self, timeout: float | None = None
    ) -> AsyncIterator[AsyncConnection[Row]]:
        """A pooled connection; connection failures become StorageUnavailableError."""
        pool = self.pool
        try:
            async with pool.connection(timeout=timeout) as conn:
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            # the broken connection is dropped by the pool; drop its idle siblings too, so
            # that the first request after the database is back gets a working one
            await pool.check()
            raise _Unavailable(f"storage: PostgreSQL is unavailable: {reason(exc)}") from None
        except psycopg.Error as exc:
            raise StorageError(f"storage: PostgreSQL failed: {reason(exc)}") from None

    async def _one(self, text: str, params: Sequence[object] | Mapping[str, object]) -> Row | None:
        async with self._connection() as conn:
            cursor = await conn.execute(self._sql(text), params)
            return await cursor.fetchone()

    async def _all(self, text: str, params: Sequence[object] | Mapping[str, object]) -> list[Row]:
        async with self._connection() as conn:
            cursor = await conn.execute(self._sql(text), params)
            return await cursor.fetchall()


@functools.lru_cache(maxsize=512)
def _rendered(text: str, schema: str) -> bytes:
    """`text` with ``{s}`` filled in by the quoted schema, as the bytes the driver sends.

    Rendered once per statement: composing an `sql.SQL` and turning it into bytes again
    on every execute cost more CPU than a catch-up read's decoding (most statements are
    the same few texts; the cache bounds the ones built per call).
    """
    return sql.SQL(text).format(s=schema_identifier(schema)).as_bytes(None)


def from_text_key(value: str) -> str:
    """The id `text_key` stored as `value`."""
    return value.replace("%00", "\x00").replace("%25", "%")


def json_object(text: str) -> JSONObject:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise StorageError("a stored document is not a JSON object")
    return value


def reason(exc: BaseException) -> str:
    """The first line of a driver error (it may name the host, never the password)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
