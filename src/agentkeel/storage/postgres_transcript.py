"""The transcript capability of PostgresStorage: a page of a history, and a context list.

A page is one statement: the message named by ``after`` is found through the
``messages_id`` index (a row written before ids existed through its position, which is
its id), and the page is the next rows by ``seq``; nothing else of the history is read.
The list is one statement over ``sessions_listed``; each listed session's title and
transcript count are columns of its row, which the commits keep (`postgres_listing`),
so a list reads no history.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from agentkeel.errors import CorruptSessionError, MessageNotFoundError, StorageError
from agentkeel.keys import SessionKey, require_key
from agentkeel.messages import (
    MESSAGE_ID_PATTERN,
    MessageDecodeError,
    messages_from_json,
)
from agentkeel.storage.base import SessionMetadata
from agentkeel.storage.postgres_bundled import put_extras_locked
from agentkeel.storage.postgres_listing import (
    DROPPED_SHOWN,
    LAZY_COLUMNS,
    fill_lazily,
    listing_sets,
)
from agentkeel.storage.postgres_pool import PostgresPool, Row, text_key, who
from agentkeel.storage.postgres_schema import MESSAGE_ID_SQL
from agentkeel.storage.transcript import (
    ContextListing,
    HistoryPage,
    decode_cursor,
    encode_cursor,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from agentkeel.storage.bundled import CommitExtras

__all__ = ["PostgresTranscript"]

_ID = MESSAGE_ID_SQL.replace("body", "m.body")


def _legacy_seq(after: str | None) -> int:
    """The seq of a message whose id is its position (`messages.position_message_id`)."""
    if after is None or not MESSAGE_ID_PATTERN.fullmatch(after):
        return -1
    position = int(after[4:], 16)
    return position + 1 if position < 2**31 - 1 else -1


class PostgresTranscript(PostgresPool):
    """`TranscriptStorage` on the pool, and the transaction of a turn that cuts."""

    if TYPE_CHECKING:

        async def _lock(
            self,
            conn: AsyncConnection[Row],
            key: SessionKey,
            expected_version: int | None,
            fence: int | None,
        ) -> tuple[int, int, int]: ...

        async def _put_run_locked(
            self, conn: AsyncConnection[Row], session_id: int, ran: dict[str, object]
        ) -> None: ...

    async def _append_cut(
        self,
        key: SessionKey,
        turn: tuple[list[str], str | None, dict[str, object]],
        checks: tuple[int | None, int | None, int],
        ran: dict[str, object],
        extras: CommitExtras | None = None,
    ) -> int:
        """The turn of an edit or a regenerate, in one transaction.

        The rows after `cut` go, the turn's come, the session row moves on: the cost is
        the cut's and the turn's, never the history's. The ``DELETE`` counts the shown
        rows it drops, for the listing (`postgres_listing`).
        """
        bodies, state, listed = turn
        expected_version, fence, cut = checks
        async with self._connection() as conn, conn.transaction():
            session_id, count, highest = await self._lock(conn, key, expected_version, fence)
            if not 0 <= cut <= count:
                raise StorageError(f"cannot cut {key.session_id} at {cut}: beyond its history")
            await self._put_run_locked(conn, session_id, ran)
            await put_extras_locked(self, conn, session_id, who(key)[0], extras)
            dropped = await conn.execute(self._sql(DROPPED_SHOWN), (session_id, cut))
            counted = await dropped.fetchone()
            cursor = await conn.execute(
                self._sql(
                    "WITH added AS (INSERT INTO {s}.messages (session_id, seq, body)"
                    "  SELECT %(id)s, %(cut)s + n.ord, n.body::json"
                    "  FROM unnest(%(bodies)s::text[]) WITH ORDINALITY AS n(body, ord))"
                    " UPDATE {s}.sessions SET"
                    "  version = version + CASE WHEN %(n)s > 0 OR %(cuts)s"
                    "    OR (%(state)s::text IS NOT NULL"
                    "    AND state::text IS DISTINCT FROM %(state)s::text) THEN 1 ELSE 0 END,"
                    "  state = coalesce(%(state)s::json, state),"
                    "  message_count = %(cut)s + %(n)s, fence = %(fence)s,"
                    "  created_at = CASE WHEN saved THEN created_at ELSE %(now)s END,"
                    "  updated_at = %(now)s, saved = true"
                    + listing_sets("%(cut)s", shown="shown - %(dropped)s")
                    + " WHERE id = %(id)s RETURNING version"
                ),
                {
                    **listed,
                    "dropped": 0 if counted is None else int(counted[0]),
                    "id": session_id,
                    "cut": cut,
                    "cuts": cut < count,
                    "bodies": bodies,
                    "n": len(bodies),
                    "state": state,
                    "fence": highest,
                    "now": time.time(),
                },
            )
            row = await cursor.fetchone()
        if row is None:
            raise StorageError(f"the session row of {key.session_id} went away mid-turn")
        return int(row[0])

    async def read_messages(
        self, key: SessionKey, *, after: str | None, limit: int
    ) -> HistoryPage | None:
        """A page of the history in one statement (TranscriptStorage)."""
        require_key(key, "read_messages")
        row = await self._one(
            "WITH owner AS (SELECT id FROM {s}.sessions"
            "  WHERE principal = %(p)s AND definition = %(d)s AND context_id = %(c)s AND saved),"
            " mark AS (SELECT coalesce("
            "  (SELECT m.seq FROM {s}.messages m JOIN owner ON m.session_id = owner.id"
            f"   WHERE {_ID} = %(after)s LIMIT 1),"
            "  (SELECT m.seq FROM {s}.messages m JOIN owner ON m.session_id = owner.id"
            f"   WHERE m.seq = %(legacy)s AND {_ID} IS NULL)) AS seq),"
            " page AS (SELECT m.seq, m.body FROM {s}.messages m JOIN owner"
            "  ON m.session_id = owner.id"
            "  WHERE m.seq > coalesce((SELECT seq FROM mark), 0)"
            "  ORDER BY m.seq LIMIT %(n)s)"
            " SELECT EXISTS (SELECT 1 FROM owner), (SELECT seq FROM mark),"
            " (SELECT min(seq) FROM page), coalesce((SELECT json_agg(body ORDER BY seq)"
            " FROM page), '[]')::text",
            dict(
                zip(("p", "d", "c"), who(key), strict=True),
                after=after,
                legacy=_legacy_seq(after),
                n=limit + 1,
            ),
        )
        if row is None or not row[0]:
            return None
        mark, first, bodies = row[1], row[2], row[3]
        if after is not None and mark is None:
            raise MessageNotFoundError(f"the conversation holds no message {after!r}")
        start = (int(first) if first is not None else int(mark or 0) + 1) - 1
        try:
            messages = messages_from_json(json.loads(bodies), start=start)
        except (ValueError, MessageDecodeError) as exc:
            where = f"postgresql:{self.schema}.messages[{key.session_id}]"
            raise CorruptSessionError(f"{where}: cannot decode: {exc}", path=where) from None
        return HistoryPage(messages=messages[:limit], more=len(messages) > limit, start=start)

    async def list_sessions(
        self, principal: str | None, definition: str, *, limit: int, cursor: str | None
    ) -> tuple[list[ContextListing], str | None]:
        """The principal's saved sessions of `definition`, newest first (TranscriptStorage)."""
        after = decode_cursor(cursor)
        rows = await self._all(
            "SELECT s.id, s.context_id, s.created_at, s.updated_at, s.message_count, "
            + LAZY_COLUMNS
            + " FROM {s}.sessions s"
            " WHERE s.principal = %s AND s.definition = %s AND s.saved"
            "  AND (%s::double precision IS NULL"
            "   OR (s.updated_at, s.context_id) < (%s::double precision, %s::text))"
            " ORDER BY s.updated_at DESC, s.context_id DESC LIMIT %s",
            (
                text_key(principal or ""),
                definition,
                None if after is None else after[0],
                None if after is None else after[0],
                None if after is None else after[1],
                limit + 1,
            ),
        )
        listings = []
        shown_of = await fill_lazily(self, rows[:limit])
        for row, (title, shown) in zip(rows[:limit], shown_of, strict=True):
            context_id, created, updated, count = row[1:5]
            listings.append(
                ContextListing(
                    metadata=SessionMetadata(
                        definition=definition,
                        context_id=str(context_id),
                        owner=principal,
                        created_at=float(created),
                        updated_at=float(updated),
                        message_count=int(count),
                    ),
                    title=title,
                    transcript_count=int(shown),
                )
            )
        if len(rows) <= limit:
            return listings, None
        last = listings[-1].metadata
        return listings, encode_cursor(last.updated_at, last.context_id)
