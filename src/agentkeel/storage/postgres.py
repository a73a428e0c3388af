"""PostgresStorage: sessions, run records, frames, documents and tasks in PostgreSQL.

Installed by the ``postgres`` extra (psycopg 3 and psycopg_pool), raw SQL, no ORM. The
pool is opened by `open` (the server's lifespan calls it, on the loop that will use it:
a pool made in a constructor binds to whatever loop happens to be running, a known
psycopg pitfall) and `open` also migrates the schema (`postgres_schema`).

Saving a turn is one transaction of two statements: the session row is locked (created
when new) and its version and fence checked with the same `check_commit` as every other
backend, then the turn's messages are inserted one row each and the row's version,
fence, count and state updated in one statement. It never reads the history, so its
cost does not grow with it (guarantee 8). A stale writer updates nothing and gets
ConcurrentWriteError (guarantee 10). Deleting a session is one ``DELETE`` of its row;
every other table cascades from it, so nothing of it survives (guarantee 13).

A database that cannot be reached raises StorageUnavailableError (the server answers
``503 storage_unavailable``); the pool replaces broken connections by itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from agentkeel.errors import ConfigurationError, CorruptSessionError, StorageError
from agentkeel.errors import StorageUnavailableError as _Unavailable
from agentkeel.keys import SessionKey, require_key
from agentkeel.messages import JSONObject, Message, MessageDecodeError, messages_from_json
from agentkeel.storage._history import encode_json, encode_messages
from agentkeel.storage.base import RunRecord, SessionMetadata, SessionSnapshot, StorageHealth
from agentkeel.storage.guard import check_commit
from agentkeel.storage.postgres_schema import migrate, schema_identifier

if TYPE_CHECKING:
    from agentkeel.checkpoint.postgres import PostgresCheckpointer

__all__ = ["PostgresStorage", "from_url", "redact", "text_key"]

_OWN_PARAMETERS = ("schema", "prepare_threshold", "pool_size")
_Row = tuple[Any, ...]


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


def _who(key: SessionKey) -> tuple[str, str, str]:
    return (text_key(key.principal or ""), key.definition, key.context_id)


class PostgresStorage:
    """A SessionStorage (with every optional capability) in one PostgreSQL schema.

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
        self._pool: AsyncConnectionPool[AsyncConnection[_Row]] | None = None
        self._owner: PostgresStorage | None = None

    def sharing(self) -> PostgresStorage:
        """Another storage object over this one's pool (a checkpointer, a second view)."""
        other = PostgresStorage(self.dsn, schema=self.schema, pool_size=self.pool_size)
        other._owner = self
        return other

    def checkpointer(self) -> PostgresCheckpointer:
        """The Checkpointer over this storage's pool and schema (framework.json uses it)."""
        from agentkeel.checkpoint.postgres import PostgresCheckpointer

        return PostgresCheckpointer(self.sharing())

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        """Migrate the schema, then open the pool; StorageUnavailableError when unreachable.

        The migration runs on a connection of its own, made first, so that an unreachable
        or misconfigured server fails here with libpq's reason (never the password).
        """
        if self._owner is not None or self._pool is not None:
            return
        await self.migrate()
        pool: AsyncConnectionPool[AsyncConnection[_Row]] = AsyncConnectionPool(
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
            raise StorageError(f"storage: migrating {self.schema!r} failed: {_reason(exc)}") from None

    def _unreachable(self, exc: BaseException) -> _Unavailable:
        return _Unavailable(f"storage: cannot reach PostgreSQL at {redact(self.dsn)}: {_reason(exc)}")

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

    # -- history and state -------------------------------------------------------------

    async def load(self, key: SessionKey) -> SessionSnapshot | None:
        """The session and its history in one statement (one snapshot), or None."""
        require_key(key, "load")
        row = await self._one(
            "SELECT s.version, s.state::text, s.created_at, s.updated_at, s.message_count,"
            " coalesce((SELECT json_agg(m.body ORDER BY m.seq) FROM {s}.messages m"
            "           WHERE m.session_id = s.id), '[]')::text"
            " FROM {s}.sessions s"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s AND s.saved",
            _who(key),
        )
        if row is None:
            return None
        version, state_text, created, updated, count, history = row
        where = f"postgresql:{self.schema}.sessions[{key.session_id}]"
        try:
            messages = messages_from_json(json.loads(history))
            state = json.loads(state_text)
        except (ValueError, MessageDecodeError) as exc:
            raise CorruptSessionError(f"{where}: cannot decode: {exc}", path=where) from None
        return SessionSnapshot(
            messages=messages,
            state=state,
            metadata=SessionMetadata(
                definition=key.definition,
                context_id=key.context_id,
                owner=key.principal,
                created_at=created,
                updated_at=updated,
                message_count=count,
            ),
            version=version,
        )

    async def version(self, key: SessionKey) -> int:
        """The session row's version (0 when there is none); one indexed read."""
        row = await self._one(
            "SELECT version FROM {s}.sessions"
            " WHERE principal = %s AND definition = %s AND context_id = %s",
            _who(require_key(key, "version")),
        )
        return 0 if row is None else int(row[0])

    async def exists(self, key: SessionKey) -> bool:
        """Whether the session was saved or holds run records, frames or documents."""
        row = await self._one(
            "SELECT s.saved OR EXISTS (SELECT 1 FROM {s}.runs r WHERE r.session_id = s.id)"
            " OR EXISTS (SELECT 1 FROM {s}.frames f WHERE f.session_id = s.id)"
            " OR EXISTS (SELECT 1 FROM {s}.documents d WHERE d.session_id = s.id)"
            " FROM {s}.sessions s"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s",
            _who(require_key(key, "exists")),
        )
        return bool(row and row[0])

    async def append(
        self,
        key: SessionKey,
        messages: Sequence[Message],
        state: JSONObject | None,
        *,
        expected_version: int | None = None,
        fence: int | None = None,
    ) -> int:
        """Append one turn in one transaction; the history is never read."""
        require_key(key, "append")
        bodies = [line.decode("utf-8") for line in encode_messages(messages)]
        encoded_state = None if state is None else encode_json(state).decode("utf-8")
        async with self._connection() as conn, conn.transaction():
            session_id, count, highest = await self._lock(conn, key, expected_version, fence)
            cursor = await conn.execute(
                self._sql(
                    "WITH added AS (INSERT INTO {s}.messages (session_id, seq, body)"
                    "  SELECT %(id)s, %(base)s + n.ord, n.body::json"
                    "  FROM unnest(%(bodies)s::text[]) WITH ORDINALITY AS n(body, ord))"
                    " UPDATE {s}.sessions SET"
                    "  version = version + CASE WHEN %(n)s > 0 OR (%(state)s::text IS NOT NULL"
                    "    AND state::text IS DISTINCT FROM %(state)s::text) THEN 1 ELSE 0 END,"
                    "  state = coalesce(%(state)s::json, state),"
                    "  message_count = message_count + %(n)s, fence = %(fence)s,"
                    "  created_at = CASE WHEN saved THEN created_at ELSE %(now)s END,"
                    "  updated_at = %(now)s, saved = true"
                    " WHERE id = %(id)s RETURNING version"
                ),
                {
                    "id": session_id, "base": count, "bodies": bodies, "n": len(bodies),
                    "state": encoded_state, "fence": highest, "now": time.time(),
                },  # fmt: skip
            )
            row = await cursor.fetchone()
        assert row is not None  # the row was locked by this transaction
        return int(row[0])

    async def rewrite(
        self,
        key: SessionKey,
        messages: Sequence[Message],
        state: JSONObject | None,
        *,
        expected_version: int | None = None,
        fence: int | None = None,
    ) -> int:
        """Replace the whole history (and the state unless None) in one transaction."""
        require_key(key, "rewrite")
        bodies = [line.decode("utf-8") for line in encode_messages(messages)]
        encoded_state = None if state is None else encode_json(state).decode("utf-8")
        async with self._connection() as conn, conn.transaction():
            session_id, _, highest = await self._lock(conn, key, expected_version, fence)
            await conn.execute(
                self._sql("DELETE FROM {s}.messages WHERE session_id = %s"), (session_id,)
            )
            cursor = await conn.execute(
                self._sql(
                    "WITH added AS (INSERT INTO {s}.messages (session_id, seq, body)"
                    "  SELECT %(id)s, n.ord, n.body::json"
                    "  FROM unnest(%(bodies)s::text[]) WITH ORDINALITY AS n(body, ord))"
                    " UPDATE {s}.sessions SET version = version + 1,"
                    "  state = coalesce(%(state)s::json, state),"
                    "  message_count = %(n)s, fence = %(fence)s,"
                    "  created_at = CASE WHEN saved THEN created_at ELSE %(now)s END,"
                    "  updated_at = %(now)s, saved = true"
                    " WHERE id = %(id)s RETURNING version"
                ),
                {
                    "id": session_id, "bodies": bodies, "n": len(bodies),
                    "state": encoded_state, "fence": highest, "now": time.time(),
                },  # fmt: skip
            )
            row = await cursor.fetchone()
        assert row is not None
        return int(row[0])

    async def _lock(
        self,
        conn: AsyncConnection[_Row],
        key: SessionKey,
        expected_version: int | None,
        fence: int | None,
    ) -> tuple[int, int, int]:
        """Create or lock the session row; check the commit. (id, message count, fence)."""
        now = time.time()
        cursor = await conn.execute(
            self._sql(
                "INSERT INTO {s}.sessions (principal, definition, context_id,"
                " created_at, updated_at) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (principal, definition, context_id)"
                " DO UPDATE SET saved = {s}.sessions.saved"
                " RETURNING id, version, fence, message_count"
            ),
            (*_who(key), now, now),
        )
        row = await cursor.fetchone()
        assert row is not None
        session_id, version, highest, count = row
        highest = check_commit(
            key, version=version, highest_fence=highest,
            expected_version=expected_version, fence=fence,
        )  # fmt: skip
        return int(session_id), int(count), int(highest)

    async def delete(self, key: SessionKey) -> bool:
        """Delete the session row; its messages, runs, frames, documents and checkpoints
        go with it (one statement, so one transaction)."""
        row = await self._one(
            "DELETE FROM {s}.sessions"
            " WHERE principal = %s AND definition = %s AND context_id = %s RETURNING id",
            _who(require_key(key, "delete")),
        )
        return row is not None

    # -- run records ---------------------------------------------------------------------

    async def put_run(self, key: SessionKey, record: RunRecord) -> None:
        """Create or replace one run record (it becomes the latest); one statement."""
        require_key(key, "put_run")
        document = encode_json(record.to_json(), "run record").decode("utf-8")
        await self._one(
            self._with_session(
                "INSERT INTO {s}.runs (session_id, run_id, status, started_at, ended_at,"
                " written, record) SELECT id, %s, %s, %s, %s, nextval('{s}.run_writes'),"
                " %s::json FROM owner"
                " ON CONFLICT (session_id, run_id) DO UPDATE SET status = EXCLUDED.status,"
                " started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,"
                " written = EXCLUDED.written, record = EXCLUDED.record RETURNING 1"
            ),
            (
                *_who(key), time.time(), time.time(),
                text_key(record.run_id), record.status, record.started_at, record.ended_at, document,
            ),  # fmt: skip
        )

    async def get_run(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """One run's record, or None."""
        row = await self._one(
            "SELECT r.record::text FROM {s}.runs r JOIN {s}.sessions s ON s.id = r.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " AND r.run_id = %s",
            (*_who(require_key(key, "get_run")), text_key(run_id)),
        )
        return None if row is None else self._run(key, row[0])

    async def latest_run(self, key: SessionKey) -> RunRecord | None:
        """The record written last, or None."""
        row = await self._one(
            "SELECT r.record::text FROM {s}.runs r JOIN {s}.sessions s ON s.id = r.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " ORDER BY r.written DESC LIMIT 1",
            _who(require_key(key, "latest_run")),
        )
        return None if row is None else self._run(key, row[0])

    async def list_runs(self, key: SessionKey) -> list[RunRecord]:
        """Every run record, oldest first (start time, then id)."""
        rows = await self._all(
            "SELECT r.record::text FROM {s}.runs r JOIN {s}.sessions s ON s.id = r.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " ORDER BY r.started_at, r.run_id",
            _who(require_key(key, "list_runs")),
        )
        records = [self._run(key, row[0]) for row in rows]
        return sorted(records, key=lambda record: (record.started_at, record.run_id))

    def _run(self, key: SessionKey, text: str) -> RunRecord:
        try:
            return RunRecord.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            where = f"postgresql:{self.schema}.runs[{key.session_id}]"
            raise CorruptSessionError(f"{where}: cannot decode: {exc}", path=where) from None

    # -- capabilities: frames, documents, task index -------------------------------------

    async def put_frames(self, key: SessionKey, run_id: str, body: bytes) -> None:
        """Keep `run_id`'s frames, replacing the previous run's (RunEventStorage)."""
        require_key(key, "put_frames")
        await self._one(
            self._with_session(
                "INSERT INTO {s}.frames (session_id, run_id, body, written_at)"
                " SELECT id, %s, %s, %s FROM owner ON CONFLICT (session_id) DO UPDATE"
                " SET run_id = EXCLUDED.run_id, body = EXCLUDED.body,"
                " written_at = EXCLUDED.written_at RETURNING 1"
            ),
            (*_who(key), time.time(), time.time(), text_key(run_id), bytes(body), time.time()),
        )

    async def get_frames(self, key: SessionKey, run_id: str) -> bytes | None:
        """The kept frames when they are `run_id`'s (RunEventStorage)."""
        row = await self._one(
            "SELECT f.body FROM {s}.frames f JOIN {s}.sessions s ON s.id = f.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " AND f.run_id = %s",
            (*_who(require_key(key, "get_frames")), text_key(run_id)),
        )
        return None if row is None else bytes(row[0])

    async def put_document(self, key: SessionKey, name: str, document: JSONObject) -> None:
        """Replace the session's document `name` (SessionDocumentStorage)."""
        require_key(key, "put_document")
        body = encode_json(document, "document").decode("utf-8")
        await self._one(
            self._with_session(
                "INSERT INTO {s}.documents (session_id, name, body)"
                " SELECT id, %s, %s::json FROM owner ON CONFLICT (session_id, name)"
                " DO UPDATE SET body = EXCLUDED.body RETURNING 1"
            ),
            (*_who(key), time.time(), time.time(), text_key(name), body),
        )

    async def get_document(self, key: SessionKey, name: str) -> JSONObject | None:
        """The session's document `name`, or None (SessionDocumentStorage)."""
        row = await self._one(
            "SELECT d.body::text FROM {s}.documents d JOIN {s}.sessions s"
            " ON s.id = d.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " AND d.name = %s",
            (*_who(require_key(key, "get_document")), text_key(name)),
        )
        return None if row is None else _object(row[0])

    async def put_task(
        self, index: SessionKey, task_id: str, context_id: str, document: JSONObject
    ) -> None:
        """Create or replace one task's document; it keeps its place (TaskIndexStorage)."""
        require_key(index, "put_task")
        body = encode_json(document, "task record").decode("utf-8")
        await self._one(
            "INSERT INTO {s}.tasks (principal, definition, index_name, task_id, context_id,"
            " position, body) VALUES (%s, %s, %s, %s, %s, nextval('{s}.task_puts'), %s::json)"
            " ON CONFLICT (principal, definition, index_name, task_id) DO UPDATE"
            " SET context_id = EXCLUDED.context_id, body = EXCLUDED.body RETURNING 1",
            (*_who(index), text_key(task_id), text_key(context_id), body),
        )

    async def get_task(self, index: SessionKey, task_id: str) -> JSONObject | None:
        """One task's document, or None (TaskIndexStorage)."""
        row = await self._one(
            "SELECT body::text FROM {s}.tasks WHERE principal = %s AND definition = %s"
            " AND index_name = %s AND task_id = %s",
            (*_who(require_key(index, "get_task")), text_key(task_id)),
        )
        return None if row is None else _object(row[0])

    async def list_tasks(self, index: SessionKey) -> list[tuple[str, JSONObject]]:
        """Every task of the index, in the order they were first put (TaskIndexStorage)."""
        rows = await self._all(
            "SELECT task_id, body::text FROM {s}.tasks WHERE principal = %s"
            " AND definition = %s AND index_name = %s ORDER BY position",
            _who(require_key(index, "list_tasks")),
        )
        return [(_from_text_key(task_id), _object(body)) for task_id, body in rows]

    async def delete_tasks(self, index: SessionKey, context_id: str) -> int:
        """Forget every task of `context_id` (TaskIndexStorage)."""
        rows = await self._all(
            "DELETE FROM {s}.tasks WHERE principal = %s AND definition = %s"
            " AND index_name = %s AND context_id = %s RETURNING 1",
            (*_who(require_key(index, "delete_tasks")), text_key(context_id)),
        )
        return len(rows)

    # -- plumbing ----------------------------------------------------------------------

    def _sql(self, text: str) -> sql.Composed:
        return sql.SQL(text).format(s=schema_identifier(self.schema))

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
    def pool(self) -> AsyncConnectionPool[AsyncConnection[_Row]]:
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
    ) -> AsyncIterator[AsyncConnection[_Row]]:
        """A pooled connection; connection failures become StorageUnavailableError."""
        pool = self.pool
        try:
            async with pool.connection(timeout=timeout) as conn:
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            # the broken connection is dropped by the pool; drop its idle siblings too, so
            # that the first request after the database is back gets a working one
            await pool.check()
            raise _Unavailable(f"storage: PostgreSQL is unavailable: {_reason(exc)}") from None
        except psycopg.Error as exc:
            raise StorageError(f"storage: PostgreSQL failed: {_reason(exc)}") from None

    async def _one(self, text: str, params: Sequence[object]) -> _Row | None:
        async with self._connection() as conn:
            cursor = await conn.execute(self._sql(text), params)
            return await cursor.fetchone()

    async def _all(self, text: str, params: Sequence[object]) -> list[_Row]:
        async with self._connection() as conn:
            cursor = await conn.execute(self._sql(text), params)
            return await cursor.fetchall()


def _from_text_key(value: str) -> str:
    return value.replace("%00", "\x00").replace("%25", "%")


def _object(text: str) -> JSONObject:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise StorageError("a stored document is not a JSON object")
    return value


def _reason(exc: BaseException) -> str:
    """The first line of a driver error (psycopg's can hold the connection string's host,
    never its password)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def from_url(url: str, base: Path | None) -> PostgresStorage:
    """The storage a ``postgresql://`` URL names (the URL registry's factory).

    Query parameters ``schema``, ``prepare_threshold`` (a number, or ``none`` behind
    PgBouncer) and ``pool_size`` are agentkeel's; every other one goes to libpq.
    """
    del base
    parts = urlsplit(url)
    ours: dict[str, str] = {}
    theirs: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        (ours.__setitem__(name, value) if name in _OWN_PARAMETERS else theirs.append((name, value)))
    dsn = urlunsplit(parts._replace(query=urlencode(theirs)))
    threshold_text = ours.get("prepare_threshold", "5").lower()
    try:
        threshold = None if threshold_text in ("none", "") else int(threshold_text)
        pool_size = int(ours.get("pool_size", "10"))
        return PostgresStorage(
            dsn,
            schema=ours.get("schema", "agentkeel"),
            prepare_threshold=threshold,
            pool_size=pool_size,
        )
    except (ValueError, StorageError) as exc:
        raise ConfigurationError(f"{redact(url)}: {exc}") from None
