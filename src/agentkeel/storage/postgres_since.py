"""The catch-up read of PostgresStorage (`IncrementalLoadStorage.load_since`), and snapshots.

A replica whose cached Agent is one or more turns behind reads, in one statement, the
session row and only the message rows after the ones it holds. That is right only while
the history since the caller's version grew by appends: migration 6's trigger records,
on the session row, the version of any turn that deleted message rows (a rewrite, a cut;
``rewritten_at``), and the caller's last message must still be the stored row at its
position (which a deleted and recreated session, with new message ids, fails). Otherwise
the same statement returns the whole history. The commit statements are not touched: the
trigger fires on ``DELETE`` only, which a plain append never runs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from agentkeel.errors import CorruptSessionError
from agentkeel.keys import SessionKey, require_key
from agentkeel.messages import MessageDecodeError, messages_from_json
from agentkeel.storage.base import SessionMetadata, SessionSnapshot
from agentkeel.storage.postgres_pool import PostgresPool, Row, who
from agentkeel.storage.postgres_schema import MESSAGE_ID_SQL

__all__ = ["SNAPSHOT_COLUMNS", "FoldedCatchUp", "PostgresSince"]

SNAPSHOT_COLUMNS = "s.version, s.state::text, s.created_at, s.updated_at, s.message_count"
"""The session row's columns a snapshot is built from, before the kept count and history."""

_ID = MESSAGE_ID_SQL.replace("body", "m.body")


@dataclass(frozen=True, slots=True)
class FoldedCatchUp:
    """A catch-up read (`PostgresSince.folded_catch_up`) that another statement runs.

    `query` selects one row of `columns` columns (none for a session not saved), with
    ``{s}`` for the schema and the named `params`; `decode` turns that row (or None)
    into what `load_since_noting_checkpoints` answers. `dsn` and `schema` say which
    database it must run on; `point` is (version, (count, last id)) it reads after.
    """

    dsn: str
    schema: str
    point: tuple[int, tuple[int, str | None]]
    query: str
    params: dict[str, object]
    columns: int
    decode: Callable[[Row | None], tuple[SessionSnapshot | None, bool]]


@functools.cache
def _since_sql(checkpoints: bool) -> str:
    """The catch-up statement (rendered once per form): the checks, then the rows."""
    noted = (
        ", EXISTS (SELECT 1 FROM {s}.checkpoints c WHERE c.session_id = s.id)"
        if checkpoints
        else ""
    )
    return (
        f"SELECT {SNAPSHOT_COLUMNS}, k.kept,"
        " coalesce((SELECT json_agg(m.body ORDER BY m.seq) FROM {s}.messages m"
        f"           WHERE m.session_id = s.id AND m.seq > k.kept), '[]')::text{noted}"
        " FROM {s}.sessions s CROSS JOIN LATERAL (SELECT CASE"
        "  WHEN s.rewritten_at <= %(v)s::bigint AND %(v)s::bigint <= s.version"
        "   AND %(n)s::integer BETWEEN 1 AND s.message_count"
        "   AND EXISTS (SELECT 1 FROM {s}.messages m WHERE m.session_id = s.id"
        f"    AND m.seq = %(n)s::integer AND {_ID} = %(last)s::text)"
        "  THEN %(n)s::integer ELSE 0 END AS kept) k"
        " WHERE s.principal = %(p)s AND s.definition = %(d)s AND s.context_id = %(c)s"
        " AND s.saved"
    )


def _since_params(
    key: SessionKey, version: int, count: int, last_id: str | None
) -> dict[str, object]:
    return dict(zip(("p", "d", "c"), who(key), strict=True), v=version, n=count, last=last_id)


class PostgresSince(PostgresPool):
    """`load_since` on the pool, and the decoding every snapshot read shares."""

    checks_by_catching_up: ClassVar[bool] = True
    """The catch-up read is one indexed statement, as cheap as the version read: a cached
    Agent asks it instead (`SessionManager.refresh`), and learns in one round trip both
    whether the conversation moved on and what it missed."""

    async def load_since(
        self, key: SessionKey, *, version: int, count: int, last_id: str | None
    ) -> SessionSnapshot | None:
        """The rows after the caller's `count` when the history since `version` only grew.

        One statement: the checks, and the history from the first row the caller lacks
        (all of it when a check fails), read in the same snapshot.
        """
        return (await self._since(key, version, count, last_id, checkpoints=False))[0]

    async def load_since_noting_checkpoints(
        self, key: SessionKey, *, version: int, count: int, last_id: str | None
    ) -> tuple[SessionSnapshot | None, bool]:
        """`load_since`, and whether the session may hold a checkpoint (False: it holds none).

        The same statement asks the checkpoints table (a `PostgresCheckpointer` on this
        schema), so a catching-up replica learns that no run waits to be resumed without
        a round trip of its own: most turns have no checkpoint. Unknown (True) when the
        session is not saved.
        """
        return await self._since(key, version, count, last_id, checkpoints=True)

    async def _since(
        self, key: SessionKey, version: int, count: int, last_id: str | None, *, checkpoints: bool
    ) -> tuple[SessionSnapshot | None, bool]:
        require_key(key, "load_since")
        row = await self._one(_since_sql(checkpoints), _since_params(key, version, count, last_id))
        return self._since_row(key, row, checkpoints=checkpoints)

    def folded_catch_up(
        self, key: SessionKey, *, version: int, count: int, last_id: str | None, checkpoints: bool
    ) -> FoldedCatchUp:
        """`load_since` (noting checkpoints when `checkpoints`) as a query another statement runs.

        The lease's grant statement runs it on the same database, so that a stale turn
        takes its lease and catches up in one round trip (`agentkeel.runtime.grant_reads`).
        """
        require_key(key, "load_since")
        return FoldedCatchUp(
            dsn=self.dsn,
            schema=self.schema,
            point=(version, (count, last_id)),
            query=_since_sql(checkpoints),
            params=_since_params(key, version, count, last_id),
            columns=8 if checkpoints else 7,
            decode=functools.partial(self._since_row, key, checkpoints=checkpoints),
        )

    def _since_row(
        self, key: SessionKey, row: Row | None, *, checkpoints: bool
    ) -> tuple[SessionSnapshot | None, bool]:
        if row is None:
            return None, True
        snapshot = self._snapshot(key, row[:5], int(row[5]), row[6])
        return snapshot, not checkpoints or row[7] is True

    def _snapshot(self, key: SessionKey, head: Row, kept: int, history: str) -> SessionSnapshot:
        """A snapshot from `SNAPSHOT_COLUMNS`, the kept count and the JSON array of bodies."""
        version, state_text, created, updated, count = head
        where = f"postgresql:{self.schema}.sessions[{key.session_id}]"
        try:
            messages = messages_from_json(json.loads(history), start=kept)
            state = json.loads(state_text)
        except (ValueError, MessageDecodeError) as exc:
            raise CorruptSessionError(f"{where}: cannot decode: {exc}", path=where) from None
        return SessionSnapshot(
            messages=messages,
            kept=kept,
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
