"""The transcript capability of PostgresStorage: a page of a history, and a context list.

A page is one statement: the message named by ``after`` is found through the
``messages_id`` index (a row written before ids existed through its position, which is
its id), and the page is the next rows by ``seq``; nothing else of the history is read.
The list is one statement over ``sessions_listed``; each listed session's title and
transcript count are read from its own rows.
"""

from __future__ import annotations

import json

from agentkeel.errors import CorruptSessionError, MessageNotFoundError
from agentkeel.keys import SessionKey, require_key
from agentkeel.messages import (
    MESSAGE_ID_PATTERN,
    MessageDecodeError,
    message_from_json,
    messages_from_json,
)
from agentkeel.storage.base import SessionMetadata
from agentkeel.storage.postgres_pool import PostgresPool, text_key, who
from agentkeel.storage.transcript import (
    ContextListing,
    HistoryPage,
    decode_cursor,
    encode_cursor,
    title_of,
)

__all__ = ["PostgresTranscript"]

_SHOWN = (
    "(m.body->>'role' = 'assistant'"
    ' OR NOT m.body::jsonb @> \'{{"parts": [{{"kind": "tool_result"}}]}}\'::jsonb)'
)
"""SQL for `transcript.in_transcript` over a message row ``m``."""


def _legacy_seq(after: str | None) -> int:
    """The seq of a message whose id is its position (`messages.position_message_id`)."""
    if after is None or not MESSAGE_ID_PATTERN.fullmatch(after):
        return -1
    position = int(after[4:], 16)
    return position + 1 if position < 2**31 - 1 else -1


class PostgresTranscript(PostgresPool):
    """`TranscriptStorage` on the pool."""

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
            "   WHERE m.body->>'id' = %(after)s LIMIT 1),"
            "  (SELECT m.seq FROM {s}.messages m JOIN owner ON m.session_id = owner.id"
            "   WHERE m.seq = %(legacy)s AND m.body->>'id' IS NULL)) AS seq),"
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
            "SELECT s.context_id, s.created_at, s.updated_at, s.message_count,"
            f" (SELECT count(*) FROM {{s}}.messages m WHERE m.session_id = s.id AND {_SHOWN}),"
            " (SELECT m.body::text FROM {s}.messages m WHERE m.session_id = s.id"
            f"  AND m.body->>'role' = 'user' AND {_SHOWN} ORDER BY m.seq LIMIT 1)"
            " FROM {s}.sessions s"
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
        for context_id, created, updated, count, shown, first in rows[:limit]:
            title = "" if first is None else title_of([message_from_json(json.loads(first))])
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
