"""PostgresStorage: sessions, run records, frames, documents and tasks in PostgreSQL.

Installed by the ``postgres`` extra (psycopg 3 and psycopg_pool), raw SQL, no ORM. The
pool, its lifecycle and the migrations are `postgres_pool`'s (opened in the server's
lifespan, never in a constructor); the optional capabilities are `postgres_extras`'s.

Saving a turn to a saved session is one statement (one round trip): an ``UPDATE`` whose
``WHERE`` checks the expected version and the fencing token, with a data-modifying CTE
that inserts the turn's messages one row each. When it updates nothing (a new session,
or a refused write) a transaction locks or creates the row and checks it with the same
`check_commit` as every other backend. It never reads the history, so its cost does not
grow with it (guarantee 8). A stale writer updates nothing and gets
ConcurrentWriteError (guarantee 10). Deleting a session is one ``DELETE`` of its row;
every other table cascades from it, so nothing of it survives (guarantee 13).

A database that cannot be reached raises StorageUnavailableError (the server answers
``503 storage_unavailable``); the pool replaces broken connections by itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from psycopg import AsyncConnection

from agentkeel.errors import ConfigurationError, StorageError
from agentkeel.keys import SessionKey, require_key
from agentkeel.messages import JSONObject, Message
from agentkeel.storage._history import encode_json, encode_messages
from agentkeel.storage.base import RunRecord, SessionSnapshot
from agentkeel.storage.bundled import CommitExtras
from agentkeel.storage.guard import check_commit
from agentkeel.storage.postgres_bundled import (
    extras_ctes,
    extras_params,
    put_extras_locked,
    session_tokens,
)
from agentkeel.storage.postgres_extras import PostgresCapabilities
from agentkeel.storage.postgres_listing import listing_params, listing_sets
from agentkeel.storage.postgres_pool import Row, redact, text_key, who
from agentkeel.storage.postgres_retention import PostgresRetention
from agentkeel.storage.postgres_runs import PUT_RUN, PostgresRuns, run_columns
from agentkeel.storage.postgres_since import SNAPSHOT_COLUMNS, PostgresSince
from agentkeel.storage.postgres_transcript import PostgresTranscript

if TYPE_CHECKING:
    from agentkeel.checkpoint.postgres import PostgresCheckpointer

__all__ = ["PostgresStorage", "from_url", "redact", "text_key"]

_OWN_PARAMETERS = ("schema", "prepare_threshold", "pool_size")


class PostgresStorage(
    PostgresCapabilities, PostgresRetention, PostgresRuns, PostgresSince, PostgresTranscript
):
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

    def sharing(self) -> PostgresStorage:
        """Another storage object over this one's pool (a checkpointer, a second view)."""
        other = PostgresStorage(self.dsn, schema=self.schema, pool_size=self.pool_size)
        other._owner = self
        return other

    def checkpointer(self) -> PostgresCheckpointer:
        """The Checkpointer over this storage's pool and schema (framework.json uses it)."""
        from agentkeel.checkpoint.postgres import PostgresCheckpointer

        return PostgresCheckpointer(self.sharing())

    # -- history and state -------------------------------------------------------------

    async def load(self, key: SessionKey) -> SessionSnapshot | None:
        """The session and its history in one statement (one snapshot), or None."""
        require_key(key, "load")
        row = await self._one(
            f"SELECT {SNAPSHOT_COLUMNS},"
            " coalesce((SELECT json_agg(m.body ORDER BY m.seq) FROM {s}.messages m"
            "           WHERE m.session_id = s.id), '[]')::text"
            " FROM {s}.sessions s"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s AND s.saved",
            who(key),
        )
        return None if row is None else self._snapshot(key, row[:5], 0, row[5])

    async def version(self, key: SessionKey) -> int:
        """The session row's version (0 when there is none); one indexed read."""
        row = await self._one(
            "SELECT version FROM {s}.sessions"
            " WHERE principal = %s AND definition = %s AND context_id = %s",
            who(require_key(key, "version")),
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
            who(require_key(key, "exists")),
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
        cut: int | None = None,
        run: RunRecord | None = None,
    ) -> int:
        """Append one turn (and its run record) in one transaction; the history is never read.

        A saved session whose version and fence let the write through takes one
        statement (one round trip); a new session, or a write the checks refuse, takes
        the locking transaction, which creates the row or raises ConcurrentWriteError.
        A turn with a `cut` takes `PostgresTranscript._append_cut`'s transaction.
        """
        return await self.append_bundled(
            key, messages, state, extras=None, expected_version=expected_version,
            fence=fence, cut=cut, run=run,
        )  # fmt: skip

    async def append_bundled(
        self,
        key: SessionKey,
        messages: Sequence[Message],
        state: JSONObject | None,
        *,
        extras: CommitExtras | None,
        expected_version: int | None = None,
        fence: int | None = None,
        cut: int | None = None,
        run: RunRecord | None = None,
    ) -> int:
        """`append`, with the turn's usage and frames in its statement (BundledCommitStorage).

        The extras are more CTEs of the same statement (`postgres_bundled`), so a plain
        turn's whole commit stays one round trip, and a refused one writes none of them.
        """
        require_key(key, "append")
        bodies = [line.decode("utf-8") for line in encode_messages(messages)]
        encoded_state = None if state is None else encode_json(state).decode("utf-8")
        ran = run_columns(run)
        listed = listing_params(messages)
        if cut is not None:
            checks = (expected_version, fence, cut)
            turn = (bodies, encoded_state, listed)
            return await self._append_cut(key, turn, checks, ran, extras)
        fast = await self._one(
            "WITH moved AS (UPDATE {s}.sessions SET"
            "  version = version + CASE WHEN %(n)s > 0 OR (%(state)s::text IS NOT NULL"
            "    AND state::text IS DISTINCT FROM %(state)s::text) THEN 1 ELSE 0 END,"
            "  state = coalesce(%(state)s::json, state),"
            "  message_count = message_count + %(n)s,"
            "  fence = greatest(fence, coalesce(%(fence)s::bigint, 0)), updated_at = %(now)s"
            + listing_sets("message_count")
            + session_tokens(extras)
            + " WHERE principal = %(p)s AND definition = %(d)s AND context_id = %(c)s AND saved"
            "  AND (%(fence)s::bigint IS NULL OR fence <= %(fence)s::bigint)"
            "  AND (%(expected)s::bigint IS NULL OR version = %(expected)s::bigint)"
            " RETURNING id, message_count - %(n)s AS base, version),"
            " added AS (INSERT INTO {s}.messages (session_id, seq, body)"
            "  SELECT moved.id, moved.base + n.ord, n.body::json"
            "  FROM moved, unnest(%(bodies)s::text[]) WITH ORDINALITY AS n(body, ord)),"
            f" ran AS ({PUT_RUN.format(owner='moved')})"
            + extras_ctes(extras, "moved")
            + " SELECT version FROM moved",
            dict(
                zip(("p", "d", "c"), who(key), strict=True),
                bodies=bodies,
                n=len(bodies),
                state=encoded_state,
                fence=fence,
                expected=expected_version,
                now=time.time(),
                **ran,
                **extras_params(extras),
                **listed,
            ),  # fmt: skip
        )
        if fast is not None:
            return int(fast[0])
        async with self._connection() as conn, conn.transaction():
            session_id, count, highest = await self._lock(conn, key, expected_version, fence)
            await self._put_run_locked(conn, session_id, ran)
            await put_extras_locked(self, conn, session_id, who(key)[0], extras)
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
                    + listing_sets("%(base)s")
                    + " WHERE id = %(id)s RETURNING version"
                ),
                {
                    **listed,
                    "id": session_id,
                    "base": count,
                    "bodies": bodies,
                    "n": len(bodies),
                    "state": encoded_state,
                    "fence": highest,
                    "now": time.time(),
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
        run: RunRecord | None = None,
    ) -> int:
        """Replace the whole history (the state unless None, and `run`) in one transaction."""
        require_key(key, "rewrite")
        bodies = [line.decode("utf-8") for line in encode_messages(messages)]
        encoded_state = None if state is None else encode_json(state).decode("utf-8")
        ran = run_columns(run)
        async with self._connection() as conn, conn.transaction():
            session_id, _, highest = await self._lock(conn, key, expected_version, fence)
            await self._put_run_locked(conn, session_id, ran)
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
                    + listing_sets("0", shown="0")
                    + " WHERE id = %(id)s RETURNING version"
                ),
                {
                    **listing_params(messages),
                    "id": session_id,
                    "bodies": bodies,
                    "n": len(bodies),
                    "state": encoded_state,
                    "fence": highest,
                    "now": time.time(),
                },  # fmt: skip
            )
            row = await cursor.fetchone()
        assert row is not None
        return int(row[0])

    async def _lock(
        self,
        conn: AsyncConnection[Row],
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
            (*who(key), now, now),
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
        """Delete the session row; every row of the context cascades with it.

        Messages, runs, frames, documents and checkpoints go in the same statement, so
        in one transaction (guarantee 13).
        """
        row = await self._one(
            "DELETE FROM {s}.sessions"
            " WHERE principal = %s AND definition = %s AND context_id = %s RETURNING id",
            who(require_key(key, "delete")),
        )
        return row is not None


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
