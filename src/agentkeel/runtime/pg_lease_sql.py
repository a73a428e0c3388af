"""The statements of PostgresRunLease, and the payloads of its lease channel.

Kept apart from the lease's control flow so that each statement can be read whole, with
what makes it safe beside it. ``{s}`` is the schema (`PostgresPool._sql` fills it in).
"""

from __future__ import annotations

import json

from agentkeel.errors import AgentkeelError
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.runtime.coordination import LeaseGrant, LeaseLostError
from agentkeel.storage.base import SessionKey

__all__ = [
    "ENTER",
    "KEY",
    "LIVE",
    "RELEASE",
    "TABLES",
    "TRY",
    "key_of",
    "lost",
    "message",
    "payload",
]

TABLES = (
    "CREATE TABLE IF NOT EXISTS {s}.lease_rows ("
    " principal text NOT NULL, definition text NOT NULL, context_id text NOT NULL,"
    " fence bigint NOT NULL DEFAULT 0, held boolean NOT NULL DEFAULT false,"
    " expires_at timestamptz, PRIMARY KEY (principal, definition, context_id))",
    "CREATE TABLE IF NOT EXISTS {s}.lease_line ("
    " ticket bigserial PRIMARY KEY, principal text NOT NULL, definition text NOT NULL,"
    " context_id text NOT NULL, arrived double precision NOT NULL,"
    " seen_at timestamptz NOT NULL DEFAULT clock_timestamp())",
    "CREATE INDEX IF NOT EXISTS lease_line_context"
    " ON {s}.lease_line (principal, definition, context_id, arrived, ticket)",
)
KEY = "principal = %s AND definition = %s AND context_id = %s"
LIVE = "(expires_at IS NULL OR expires_at > clock_timestamp())"

_HEAD = (
    "head AS (SELECT ticket FROM {s}.lease_line l WHERE l.principal = %(p)s"
    " AND l.definition = %(d)s AND l.context_id = %(c)s"
    " AND l.seen_at > clock_timestamp() - %(stale)s * interval '1 second'"
    " ORDER BY l.arrived, l.ticket LIMIT 1), prior AS (SELECT held FROM {s}.lease_rows"
    " WHERE principal = %(p)s AND definition = %(d)s AND context_id = %(c)s)"
)
"""The head of the context's line (waiters that stopped refreshing are skipped)."""


def _grant(allowed: str) -> str:
    # the upsert locks the context's row, and its WHERE is checked again on the row's
    # latest version, so two replicas trying at once never both get it; every grant
    # bumps the fence
    return (
        "granted AS (INSERT INTO {s}.lease_rows AS r"
        " (principal, definition, context_id, fence, held, expires_at)"
        " SELECT %(p)s, %(d)s, %(c)s, 1, true, CASE WHEN %(ttl)s::float8 IS NULL THEN NULL"
        " ELSE clock_timestamp() + %(ttl)s::float8 * interval '1 second' END"
        f" WHERE {allowed}"
        " ON CONFLICT (principal, definition, context_id) DO UPDATE"
        " SET fence = r.fence + 1, held = true, expires_at = excluded.expires_at"
        " WHERE NOT (r.held AND (r.expires_at IS NULL OR r.expires_at > clock_timestamp()))"
        " RETURNING r.fence)"
    )


TRY = (
    f"WITH {_HEAD}, "
    + _grant(
        "CASE WHEN %(ticket)s::bigint IS NULL THEN NOT EXISTS (SELECT 1 FROM head)"
        " ELSE coalesce((SELECT ticket FROM head) = %(ticket)s::bigint, true) END"
    )
    + ", gone AS (DELETE FROM {s}.lease_line WHERE ticket = %(ticket)s::bigint"
    " AND EXISTS (SELECT 1 FROM granted))"
    " SELECT fence, coalesce((SELECT held FROM prior), false) FROM granted"
)
"""One attempt: with a ticket, only at the head of the line; without, only for an empty line."""

ENTER = (
    f"WITH {_HEAD}, "
    + _grant("NOT EXISTS (SELECT 1 FROM head)")
    + ", joined AS (INSERT INTO {s}.lease_line (principal, definition, context_id, arrived)"
    " SELECT %(p)s, %(d)s, %(c)s, %(arrived)s WHERE NOT EXISTS (SELECT 1 FROM granted)"
    " RETURNING ticket)"
    " SELECT (SELECT fence FROM granted), coalesce((SELECT held FROM prior), false),"
    " (SELECT ticket FROM joined)"
)
"""Arriving, in one round trip: the grant when nobody waits and the row is free, else a
ticket at the end of the line. Taking a free context at once is what taking a ticket
and being its head would give, minus the second trip."""

RELEASE = (
    "WITH released AS (UPDATE {s}.lease_rows SET held = false, expires_at = NULL"
    f" WHERE {KEY} AND fence = %s AND held RETURNING fence)"
    " SELECT CASE WHEN EXISTS (SELECT 1 FROM {s}.lease_line"
    f" WHERE {KEY}) THEN pg_notify(%s, %s) END FROM released"
)
"""Free the row (keeping its fence); wake the line only when somebody is in it: every
replica hears every notification, and the common turn has nobody waiting. A waiter
whose ticket the release did not see still finds the row free on its next poll."""


def message(kind: str, key: SessionKey, **fields: JSONValue) -> JSONObject:
    """A lease-channel payload about `key`."""
    return {"t": kind, "k": [key.principal, key.definition, key.context_id], **fields}


def payload(kind: str, key: SessionKey) -> str:
    """`message` as the compact JSON text `pg_notify` sends."""
    return json.dumps(message(kind, key), separators=(",", ":"))


def key_of(data: JSONObject) -> SessionKey | None:
    """The context a payload names (None for one that names none)."""
    parts = data.get("k")
    if not isinstance(parts, list) or len(parts) != 3:
        return None
    principal, definition, context_id = parts
    try:
        return SessionKey(
            definition=str(definition),
            context_id=str(context_id),
            principal=None if principal is None else str(principal),
        )
    except AgentkeelError:
        return None


def lost(grant: LeaseGrant) -> LeaseLostError:
    """The error of a grant that no longer holds its row."""
    return LeaseLostError(
        f"the lease on context {grant.key.context_id} (fence {grant.fence}) was lost"
    )
