"""The optional capabilities of PostgresStorage: frames, documents, task index, usage.

Each is one statement; frames and documents hang off the session row (and go when it
is deleted), the task index is keyed by (principal, definition, index, task id).
"""

from __future__ import annotations

import time

from agentkeel.keys import SessionKey, require_key
from agentkeel.messages import JSONObject
from agentkeel.result import Usage
from agentkeel.storage._history import encode_json
from agentkeel.storage.postgres_pool import PostgresPool, from_text_key, json_object, text_key, who
from agentkeel.storage.postgres_schema import USAGE_COLUMNS

__all__ = ["PostgresCapabilities"]


class PostgresCapabilities(PostgresPool):
    """RunEventStorage, SessionDocumentStorage, TaskIndexStorage, UsageStorage on a pool."""

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
            (*who(key), time.time(), time.time(), text_key(run_id), bytes(body), time.time()),
        )

    async def get_frames(self, key: SessionKey, run_id: str) -> bytes | None:
        """The kept frames when they are `run_id`'s (RunEventStorage)."""
        row = await self._one(
            "SELECT f.body FROM {s}.frames f JOIN {s}.sessions s ON s.id = f.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " AND f.run_id = %s",
            (*who(require_key(key, "get_frames")), text_key(run_id)),
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
            (*who(key), time.time(), time.time(), text_key(name), body),
        )

    async def get_document(self, key: SessionKey, name: str) -> JSONObject | None:
        """The session's document `name`, or None (SessionDocumentStorage)."""
        row = await self._one(
            "SELECT d.body::text FROM {s}.documents d JOIN {s}.sessions s"
            " ON s.id = d.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " AND d.name = %s",
            (*who(require_key(key, "get_document")), text_key(name)),
        )
        return None if row is None else json_object(row[0])

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
            (*who(index), text_key(task_id), text_key(context_id), body),
        )

    async def get_task(self, index: SessionKey, task_id: str) -> JSONObject | None:
        """One task's document, or None (TaskIndexStorage)."""
        row = await self._one(
            "SELECT body::text FROM {s}.tasks WHERE principal = %s AND definition = %s"
            " AND index_name = %s AND task_id = %s",
            (*who(require_key(index, "get_task")), text_key(task_id)),
        )
        return None if row is None else json_object(row[0])

    async def list_tasks(self, index: SessionKey) -> list[tuple[str, JSONObject]]:
        """Every task of the index, in the order they were first put (TaskIndexStorage)."""
        rows = await self._all(
            "SELECT task_id, body::text FROM {s}.tasks WHERE principal = %s"
            " AND definition = %s AND index_name = %s ORDER BY position",
            who(require_key(index, "list_tasks")),
        )
        return [(from_text_key(task_id), json_object(body)) for task_id, body in rows]

    async def delete_tasks(self, index: SessionKey, context_id: str) -> int:
        """Forget every task of `context_id` (TaskIndexStorage)."""
        rows = await self._all(
            "DELETE FROM {s}.tasks WHERE principal = %s AND definition = %s"
            " AND index_name = %s AND context_id = %s RETURNING 1",
            (*who(require_key(index, "delete_tasks")), text_key(context_id)),
        )
        return len(rows)

    # -- usage (UsageStorage) ------------------------------------------------------------

    async def add_usage(self, key: SessionKey, usage: Usage, *, day: str) -> None:
        """Add to the context's row and the principal's day in one statement (UsageStorage).

        The context's total lives on its session row (created unsaved when new), so a
        DELETE forgets it; the day's total is a row of its own, which no DELETE touches.
        """
        require_key(key, "add_usage")
        counts = [getattr(usage, name) for name in USAGE_COLUMNS]
        await self._one(
            "WITH ctx AS (INSERT INTO {s}.sessions (principal, definition, context_id,"
            " created_at, updated_at, input_tokens, output_tokens, cached_tokens,"
            " reasoning_tokens) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (principal, definition, context_id) DO UPDATE SET"
            " input_tokens = {s}.sessions.input_tokens + EXCLUDED.input_tokens,"
            " output_tokens = {s}.sessions.output_tokens + EXCLUDED.output_tokens,"
            " cached_tokens = {s}.sessions.cached_tokens + EXCLUDED.cached_tokens,"
            " reasoning_tokens = {s}.sessions.reasoning_tokens + EXCLUDED.reasoning_tokens"
            " RETURNING 1)"
            " INSERT INTO {s}.usage_days (principal, day, input_tokens, output_tokens,"
            " cached_tokens, reasoning_tokens) SELECT %s, %s, %s, %s, %s, %s FROM ctx"
            " ON CONFLICT (principal, day) DO UPDATE SET"
            " input_tokens = {s}.usage_days.input_tokens + EXCLUDED.input_tokens,"
            " output_tokens = {s}.usage_days.output_tokens + EXCLUDED.output_tokens,"
            " cached_tokens = {s}.usage_days.cached_tokens + EXCLUDED.cached_tokens,"
            " reasoning_tokens = {s}.usage_days.reasoning_tokens + EXCLUDED.reasoning_tokens"
            " RETURNING 1",
            (*who(key), time.time(), time.time(), *counts, who(key)[0], day, *counts),
        )

    async def context_usage(self, key: SessionKey) -> Usage:
        """The context's total (UsageStorage); zero for an unknown context."""
        row = await self._one(
            "SELECT input_tokens, output_tokens, cached_tokens, reasoning_tokens"
            " FROM {s}.sessions WHERE principal = %s AND definition = %s AND context_id = %s",
            who(require_key(key, "context_usage")),
        )
        return Usage() if row is None else Usage(**dict(zip(USAGE_COLUMNS, row, strict=True)))

    async def principal_usage(self, principal: str | None, day: str) -> Usage:
        """The principal's total of `day` (UsageStorage)."""
        row = await self._one(
            "SELECT input_tokens, output_tokens, cached_tokens, reasoning_tokens"
            " FROM {s}.usage_days WHERE principal = %s AND day = %s",
            (text_key(principal or ""), day),
        )
        return Usage() if row is None else Usage(**dict(zip(USAGE_COLUMNS, row, strict=True)))
