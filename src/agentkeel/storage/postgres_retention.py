"""Retention on PostgreSQL (RetentionStorage): bounded deletes that replicas never share.

Each batch locks the rows it takes with ``FOR UPDATE SKIP LOCKED``, so sweepers on
several replicas split the work instead of deleting the same rows twice. An idle
session is *claimed* (its ``sweep_claimed_at`` set) in the same statement that finds
it, so that no other sweeper names it again for `CLAIM_SECONDS` while the server
deletes it through its DELETE path.
"""

from __future__ import annotations

import time

from agentkeel.keys import SessionKey
from agentkeel.storage.postgres_pool import PostgresPool, from_text_key
from agentkeel.storage.retention import PROTECTED_STATUSES

__all__ = ["CLAIM_SECONDS", "PostgresRetention"]

CLAIM_SECONDS = 300.0


class PostgresRetention(PostgresPool):
    """RetentionStorage on a PostgresPool."""

    async def sweep_runs(self, ended_before: float, limit: int) -> int:
        """Delete up to `limit` run records that ended before `ended_before`."""
        rows = await self._all(
            "DELETE FROM {s}.runs r USING (SELECT session_id, run_id FROM {s}.runs"
            " WHERE ended_at < %s AND status <> ALL(%s) LIMIT %s FOR UPDATE SKIP LOCKED) d"
            " WHERE r.session_id = d.session_id AND r.run_id = d.run_id RETURNING 1",
            (ended_before, list(PROTECTED_STATUSES), limit),
        )
        return len(rows)

    async def sweep_frames(self, written_before: float, limit: int) -> int:
        """Delete up to `limit` sessions' frames written before `written_before`."""
        rows = await self._all(
            "DELETE FROM {s}.frames f USING (SELECT session_id FROM {s}.frames"
            " WHERE written_at < %s LIMIT %s FOR UPDATE SKIP LOCKED) d"
            " WHERE f.session_id = d.session_id RETURNING 1",
            (written_before, limit),
        )
        return len(rows)

    async def idle_sessions(self, updated_before: float, limit: int) -> list[SessionKey]:
        """Claim up to `limit` idle sessions that may be deleted; their keys.

        A session whose latest run is running or suspended, or that holds a checkpoint,
        is never named.
        """
        now = time.time()
        rows = await self._all(
            "UPDATE {s}.sessions s SET sweep_claimed_at = %s FROM ("
            " SELECT x.id FROM {s}.sessions x WHERE x.updated_at < %s"
            " AND (x.sweep_claimed_at IS NULL OR x.sweep_claimed_at < %s)"
            " AND NOT EXISTS (SELECT 1 FROM {s}.checkpoints c WHERE c.session_id = x.id)"
            " AND NOT EXISTS (SELECT 1 FROM {s}.runs r WHERE r.session_id = x.id"
            "   AND r.status = ANY(%s) AND r.written = (SELECT max(written) FROM {s}.runs l"
            "   WHERE l.session_id = x.id))"
            " ORDER BY x.updated_at LIMIT %s FOR UPDATE SKIP LOCKED) d"
            " WHERE s.id = d.id RETURNING s.principal, s.definition, s.context_id",
            (now, updated_before, now - CLAIM_SECONDS, list(PROTECTED_STATUSES), limit),
        )
        return [
            SessionKey(
                definition=definition,
                context_id=context_id,
                principal=from_text_key(principal) if principal else None,
            )
            for principal, definition, context_id in rows
        ]
