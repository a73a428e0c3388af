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


class PostgresCheckpointer:
    """A Checkpointer over a `PostgresStorage`'s pool and schema.

    Args:
        storage: The storage whose (opened) pool and schema hold the checkpoints.
    """

    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage

    async def put(self, key: SessionKey, checkpoint: Checkpoint) -> int:
        """Store `checkpoint` as the thread's latest; one statement, so one transaction."""
        require_key(key, "put")
        try:
            json.dumps(checkpoint.payload, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise StorageError(f"checkpoint is not JSON-serializable: {exc}") from exc
        store = self.storage
        async with store._connection() as conn, conn.transaction():
            cursor = await conn.execute(
                store._sql(
                    "INSERT INTO {s}.sessions (principal, definition, context_id, created_at,"
                    " updated_at, checkpoint_seq) VALUES (%s, %s, %s, %s, %s, 1)"
                    " ON CONFLICT (principal, definition, context_id) DO UPDATE"
                    " SET checkpoint_seq = {s}.sessions.checkpoint_seq + 1"
                    " RETURNING id, checkpoint_seq"
                ),
                (*who(key), checkpoint.created_at, checkpoint.created_at),
            )
            row = await cursor.fetchone()
            assert row is not None
            session_id, sequence = int(row[0]), int(row[1])
            body = encode_json(replace(checkpoint, sequence=sequence).to_json(), "checkpoint")
            await conn.execute(
                store._sql(
                    "INSERT INTO {s}.checkpoints (session_id, checkpoint_id, sequence, body)"
                    " VALUES (%s, %s, %s, %s::json) ON CONFLICT (session_id, checkpoint_id)"
                    " DO UPDATE SET sequence = EXCLUDED.sequence, body = EXCLUDED.body"
                ),
                (session_id, text_key(checkpoint.id), sequence, body.decode("utf-8")),
            )
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
