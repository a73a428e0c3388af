"""PostgresCheckpointer: suspended runs in the same schema as the sessions.

A checkpoint row belongs to its session's row (same key: principal, definition,
contextId), so deleting the context deletes its checkpoints in the same statement. The
sequence of a thread is a counter on the session row, bumped under the row's lock: it
only grows, whatever the clocks say, and survives the thread's last checkpoint going.

It shares the pool of a `PostgresStorage`, which the server's lifespan opens.
"""

from __future__ import annotations

import json
from dataclasses import replace

from agentkeel.checkpoint.base import Checkpoint
from agentkeel.errors import CorruptSessionError, StorageError
from agentkeel.keys import SessionKey, require_key
from agentkeel.storage._history import encode_json
from agentkeel.storage.postgres import PostgresStorage
from agentkeel.storage.postgres_pool import text_key, who

__all__ = ["PostgresCheckpointer"]

_SEQUENCE = '"sequence":0,'
"""The sequence in a checkpoint's compact JSON: a top-level key's, as a quote inside a
string is always escaped. The statement writes the row's sequence in its place."""


class PostgresCheckpointer:
    """A Checkpointer over a `PostgresStorage`'s pool and schema.

    Args:
        storage: The storage whose (opened) pool and schema hold the checkpoints.
    """

    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage

    def shares_schema_with(self, storage: object) -> bool:
        """Whether `storage` reads this checkpointer's rows (same database and schema).

        Then its catch-up read can say whether a session holds a checkpoint at all
        (`PostgresSince.load_since_noting_checkpoints`), and `latest` is asked only when
        it may.
        """
        return (
            isinstance(storage, PostgresStorage)
            and storage.dsn == self.storage.dsn
            and storage.schema == self.storage.schema
        )

    async def put(self, key: SessionKey, checkpoint: Checkpoint) -> int:
        """Store `checkpoint` as the thread's latest; one statement (one round trip).

        The session row's counter gives the sequence, which the same statement writes
        into the document (`_SEQUENCE`), so nothing waits for it to come back first.
        """
        require_key(key, "put")
        try:
            json.dumps(checkpoint.payload, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise StorageError(f"checkpoint is not JSON-serializable: {exc}") from exc
        body = encode_json(replace(checkpoint, sequence=0).to_json(), "checkpoint")
        head, marker, tail = body.decode("utf-8").partition(_SEQUENCE)
        assert marker, "a checkpoint document always has its sequence"
        row = await self.storage._one(
            "WITH owner AS (INSERT INTO {s}.sessions (principal, definition, context_id,"
            " created_at, updated_at, checkpoint_seq) VALUES (%s, %s, %s, %s, %s, 1)"
            " ON CONFLICT (principal, definition, context_id) DO UPDATE"
            " SET checkpoint_seq = {s}.sessions.checkpoint_seq + 1"
            " RETURNING id, checkpoint_seq)"
            " INSERT INTO {s}.checkpoints (session_id, checkpoint_id, sequence, body)"
            " SELECT id, %s, checkpoint_seq, (%s::text || checkpoint_seq || %s::text)::json"
            " FROM owner"
            " ON CONFLICT (session_id, checkpoint_id)"
            " DO UPDATE SET sequence = EXCLUDED.sequence, body = EXCLUDED.body"
            " RETURNING sequence",
            (
                *who(key),
                checkpoint.created_at,
                checkpoint.created_at,
                text_key(checkpoint.id),
                head + '"sequence":',
                "," + tail,
            ),
        )
        assert row is not None
        sequence = int(row[0])
        return sequence

    async def latest(self, key: SessionKey) -> Checkpoint | None:
        """The thread's checkpoint with the highest sequence, or None."""
        row = await self.storage._one(
            "SELECT c.body::text FROM {s}.checkpoints c JOIN {s}.sessions s"
            " ON s.id = c.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " ORDER BY c.sequence DESC LIMIT 1",
            who(require_key(key, "latest")),
        )
        if row is None:
            return None
        try:
            return Checkpoint.from_json(json.loads(row[0]))
        except (ValueError, KeyError, TypeError) as exc:
            where = f"postgresql:{self.storage.schema}.checkpoints[{key.session_id}]"
            raise CorruptSessionError(f"{where}: cannot decode: {exc}", path=where) from None

    async def delete(self, key: SessionKey, checkpoint_id: str) -> None:
        """Remove one checkpoint; unknown ids are ignored."""
        await self.storage._all(
            "DELETE FROM {s}.checkpoints c USING {s}.sessions s WHERE s.id = c.session_id"
            " AND s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " AND c.checkpoint_id = %s RETURNING 1",
            (*who(require_key(key, "delete")), text_key(checkpoint_id)),
        )

    async def delete_thread(self, key: SessionKey) -> None:
        """Remove every checkpoint of the thread."""
        await self.storage._all(
            "DELETE FROM {s}.checkpoints c USING {s}.sessions s WHERE s.id = c.session_id"
            " AND s.principal = %s AND s.definition = %s AND s.context_id = %s RETURNING 1",
            who(require_key(key, "delete_thread")),
        )
