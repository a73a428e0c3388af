"""The context list's fields on a PostgreSQL session row: ``title``, ``title_seq``, ``shown``.

The context list shows each session's title (its first shown user message) and how many
of its messages the transcript shows. Reading them from ``messages`` made a list of long
conversations cost their whole length, so the commit statement carries them forward on
the session row, from the turn's own messages, without reading the history:

- an append adds the turn's shown count, and takes the turn's title when the session has
  none yet;
- a cut (edit, regenerate) subtracts the shown rows its ``DELETE`` dropped (it costs the
  cut) and takes the turn's title when the title's row (``title_seq``) was cut;
- a rewrite sets all three from its messages.

``shown IS NULL`` marks a row migrated from before the columns existed (migration 7
adds them without a backfill, so that upgrading a large database costs nothing at
start-up): commits leave it NULL (NULL plus a count is NULL), and the first list that
meets the row reads its history once (`LAZY_COLUMNS`) and stores the three, guarded by
the version it read, so a commit in between is never overwritten (`fill_lazily`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentkeel.messages import Message, message_from_json
from agentkeel.storage.postgres_pool import PostgresPool, from_text_key, text_key
from agentkeel.storage.transcript import in_transcript, title_of

__all__ = [
    "DROPPED_SHOWN",
    "LAZY_COLUMNS",
    "SHOWN_SQL",
    "USER_SQL",
    "fill_lazily",
    "listing_params",
    "listing_sets",
]

_HEAD = '^\\{{\\s*("id"\\s*:\\s*"msg-[0-9a-f]{{24}}"\\s*,\\s*)?"role"\\s*:\\s*'
"""A row's text up to its role: the codec writes ``id`` (when there is one) and ``role``
first."""
SHOWN_SQL = (
    f'(m.body::text ~ \'{_HEAD}"assistant"\' OR m.body::text !~ \'"kind"\\s*:\\s*"tool_result"\')'
)
"""SQL for `transcript.in_transcript` over a message row ``m``, on its text: JSON
operators fail on a row whose JSON holds ``\\u0000``, which a message may (and a
``text`` column cannot hold NUL either: ``title`` is stored through `text_key`)."""
USER_SQL = f"m.body::text ~ '{_HEAD}\"user\"'"

DROPPED_SHOWN = (
    "WITH m AS (DELETE FROM {s}.messages WHERE session_id = %s AND seq > %s RETURNING body)"
    f" SELECT count(*) FILTER (WHERE {SHOWN_SQL}) FROM m"
)
"""A cut's ``DELETE``, answering how many of the rows it dropped the transcript showed."""

LAZY_COLUMNS = (
    "s.version, s.shown, s.title,"
    " CASE WHEN s.shown IS NULL THEN (SELECT count(*) FROM {s}.messages m"
    f"  WHERE m.session_id = s.id AND {SHOWN_SQL}) END,"
    " CASE WHEN s.shown IS NULL THEN (SELECT m.seq::text || ' ' || m.body::text"
    "  FROM {s}.messages m WHERE m.session_id = s.id"
    f"  AND {USER_SQL} AND {SHOWN_SQL} ORDER BY m.seq LIMIT 1) END"
)
"""The list's columns of a session ``s``: version, shown, title, and for a row not yet
filled (``shown IS NULL``) its shown count and first shown user row (``seq body``),
read from its history; a filled row's history is never read (a CASE evaluates the
subquery of its branch only)."""


def listing_params(messages: Sequence[Message]) -> dict[str, object]:
    """The parameters of `listing_sets` for a turn of `messages`."""
    at = next((i for i, m in enumerate(messages, 1) if m.role == "user" and in_transcript(m)), None)
    return {
        "l_shown": sum(1 for m in messages if in_transcript(m)),
        "l_at": at,
        "l_title": None if at is None else text_key(messages[at - 1].text),
    }


def listing_sets(base: str, shown: str = "shown") -> str:
    """The ``SET`` items carrying the listing forward; they start with a comma.

    `base` is the SQL of the position the turn's messages follow (the old message count
    for an append, the cut, 0 for a rewrite); `shown` the SQL of the shown count they
    follow. All of it reads the row's old values, as a ``SET`` does.
    """
    moved = f"title_seq IS NULL OR title_seq > {base}"
    return (
        f", shown = {shown} + %(l_shown)s,"
        f" title = CASE WHEN {moved} THEN %(l_title)s::text ELSE title END,"
        f" title_seq = CASE WHEN {moved} THEN {base} + %(l_at)s::integer ELSE title_seq END"
    )


async def fill_lazily(pool: PostgresPool, rows: list[tuple[Any, ...]]) -> list[tuple[str, int]]:
    """Each list row's (title, shown); store those read from a history (`LAZY_COLUMNS`).

    `rows` end with the five `LAZY_COLUMNS`. The store is one statement for the page, and
    skips a row whose version moved since the read (its commit may have changed the
    history the count describes: the next list reads it again).
    """
    found: list[tuple[str, int]] = []
    filled: list[tuple[int, int, int, str | None, int | None]] = []
    for row in rows:
        ident, version, shown, title, counted, first = row[0], *row[-5:]
        if shown is not None:
            found.append((from_text_key(title or ""), int(shown)))
            continue
        seq, title = None, None
        if first is not None:
            position, body = str(first).split(" ", 1)
            seq, title = int(position), title_of([message_from_json(json.loads(body))])
        found.append((title or "", int(counted)))
        stored = None if title is None else text_key(title)
        filled.append((int(ident), int(version), int(counted), stored, seq))
    if filled:
        columns = [list(column) for column in zip(*filled, strict=True)]
        await pool._all(
            "UPDATE {s}.sessions s SET shown = f.shown, title = f.title, title_seq = f.seq"
            " FROM unnest(%s::bigint[], %s::bigint[], %s::integer[], %s::text[],"
            "  %s::integer[]) AS f(id, version, shown, title, seq)"
            " WHERE s.id = f.id AND s.version = f.version AND s.shown IS NULL RETURNING 1",
            columns,
        )
    return found
