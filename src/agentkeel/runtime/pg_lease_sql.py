"""The statements of PostgresRunLease, and the payloads of its lease channel.

Kept apart from the lease's control flow so that each statement can be read whole, with
what makes it safe beside it. ``{s}`` is the schema (`PostgresPool._sql` fills it in).
"""

from __future__ import annotations

import functools
import json

from agentkeel.errors import AgentkeelError
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.runtime.coordination import LeaseGrant, LeaseLostError
from agentkeel.session_records import bundles
from agentkeel.storage.base import SessionKey, SessionStorage
from agentkeel.storage.bundled import RidingRelease
from agentkeel.storage.postgres_pool import PostgresPool, Row, who
from agentkeel.storage.postgres_since import FoldedCatchUp

__all__ = [
    "ENTER",
    "Caught",
    "KEY",
    "LIVE",
    "RELEASE",
    "TABLES",
    "TRY",
    "caught",
    "enter_reading",
    "folded_for",
    "key_of",
    "lost",
    "message",
    "payload",
    "riding_release",
    "try_reading",
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


_TRY_CTES = (
    f"WITH {_HEAD}, "
    + _grant(
        "CASE WHEN %(ticket)s::bigint IS NULL THEN NOT EXISTS (SELECT 1 FROM head)"
        " ELSE coalesce((SELECT ticket FROM head) = %(ticket)s::bigint, true) END"
    )
    + ", gone AS (DELETE FROM {s}.lease_line WHERE ticket = %(ticket)s::bigint"
    " AND EXISTS (SELECT 1 FROM granted))"
)
TRY = _TRY_CTES + " SELECT fence, coalesce((SELECT held FROM prior), false) FROM granted"
"""One attempt: with a ticket, only at the head of the line; without, only for an empty line."""

_ENTER_CTES = (
    f"WITH {_HEAD}, "
    + _grant("NOT EXISTS (SELECT 1 FROM head)")
    + ", joined AS (INSERT INTO {s}.lease_line (principal, definition, context_id, arrived)"
    " SELECT %(p)s, %(d)s, %(c)s, %(arrived)s WHERE NOT EXISTS (SELECT 1 FROM granted)"
    " RETURNING ticket)"
)
ENTER = (
    _ENTER_CTES + " SELECT (SELECT fence FROM granted), coalesce((SELECT held FROM prior), false),"
    " (SELECT ticket FROM joined)"
)
"""Arriving, in one round trip: the grant when nobody waits and the row is free, else a
ticket at the end of the line. Taking a free context at once is what taking a ticket
and being its head would give, minus the second trip."""

_TRUSTED = "coalesce((SELECT NOT held FROM prior), false)"
"""Whether a read in the grant's statement sees every commit of the previous grants.

Only when the row was free in the statement's snapshot: a holder commits before it
releases, so its commits are in that snapshot too. The upsert grants on the row's latest
version, which may be a release (or an expiry) the snapshot predates: a read in the same
statement could then miss the last holder's turn, so the caller reads again instead.
A context's first grant (no row yet) is not trusted either."""


@functools.cache
def enter_reading(query: str) -> str:
    """`ENTER`, then `query` in the same snapshot when it granted and `_TRUSTED` holds.

    Columns: fence, taken over, ticket, whether the read is there, then the read's own
    (all NULL when it found no row, or was not made).
    """
    return (
        _ENTER_CTES + ", g AS (SELECT (SELECT fence FROM granted) AS fence,"
        " coalesce((SELECT held FROM prior), false) AS prior, (SELECT ticket FROM joined)"
        f" AS ticket, {_TRUSTED} AS trusted)"
        " SELECT g.fence, g.prior, g.ticket, g.fence IS NOT NULL AND g.trusted, r.* FROM g"
        f" LEFT JOIN LATERAL (SELECT * FROM ({query}) q"
        " WHERE g.fence IS NOT NULL AND g.trusted) r ON true"
    )


@functools.cache
def try_reading(query: str) -> str:
    """`TRY`, then `query` in the same snapshot when `_TRUSTED` holds.

    Columns (a row only for a grant): fence, taken over, whether the read is there, then
    the read's own.
    """
    return (
        _TRY_CTES + ", g AS (SELECT fence, coalesce((SELECT held FROM prior), false) AS prior,"
        f" {_TRUSTED} AS trusted FROM granted)"
        " SELECT g.fence, g.prior, g.trusted, r.* FROM g"
        f" LEFT JOIN LATERAL (SELECT * FROM ({query}) q WHERE g.trusted) r ON true"
    )


Caught = tuple[FoldedCatchUp, Row | None] | None
"""A catch-up read made with a grant, and the row it found (None: no session row)."""


def folded_for(
    key: SessionKey, folded: FoldedCatchUp | None, pool: PostgresPool
) -> FoldedCatchUp | None:
    """`folded` if it is a read of `key` on `pool`'s database and schema, else None."""
    if folded is None or (folded.dsn, folded.schema) != (pool.dsn, pool.schema):
        return None
    return folded if tuple(folded.params[name] for name in "pdc") == who(key) else None


def caught(folded: FoldedCatchUp | None, row: Row, at: int) -> Caught:
    """The folded read in a grant statement's `row` (its flag at `at`), if it was made."""
    if folded is None or row[at] is not True:
        return None
    found = row[at + 1 :]
    return folded, None if found[0] is None else tuple(found)


RELEASE = (
    "WITH released AS (UPDATE {s}.lease_rows SET held = false, expires_at = NULL"
    f" WHERE {KEY} AND fence = %s AND held RETURNING fence)"
    " SELECT CASE WHEN EXISTS (SELECT 1 FROM {s}.lease_line"
    f" WHERE {KEY}) THEN pg_notify(%s, %s) END FROM released"
)
"""Free the row (keeping its fence); wake the line only when somebody is in it: every
replica hears every notification, and the common turn has nobody waiting. A waiter
whose ticket the release did not see still finds the row free on its next poll."""


_LR_KEY = "principal = %(lr_p)s AND definition = %(lr_d)s AND context_id = %(lr_c)s"
_RIDING = (
    "freed AS (UPDATE {s}.lease_rows SET held = false, expires_at = NULL"
    f" WHERE {_LR_KEY} AND fence = %(lr_fence)s AND held AND EXISTS (SELECT 1 FROM {{owner}})"
    f" RETURNING CASE WHEN EXISTS (SELECT 1 FROM {{s}}.lease_line WHERE {_LR_KEY})"
    " THEN pg_notify(%(lr_channel)s, %(lr_payload)s) END)"
)
"""`RELEASE` as a CTE of a turn's commit: it frees the row only if the commit wrote
(``{owner}`` has its row). A data-modifying CTE runs to completion, its ``RETURNING``
included, though the statement never reads it; the notification goes at commit."""


def riding_release(
    grant: LeaseGrant, storage: SessionStorage, pool: PostgresPool, channel: str
) -> RidingRelease | None:
    """The release of `grant` for a commit to `storage` to make, or None.

    Only a storage that bundles its commit in one statement, on `pool`'s database and
    schema, can free the lease's row in it (`channel`: the lease channel).
    """
    where = (getattr(storage, "dsn", None), getattr(storage, "schema", None))
    if where != (pool.dsn, pool.schema) or not bundles(type(storage)):
        return None
    principal, definition, context_id = who(grant.key)
    return RidingRelease(
        cte=_RIDING,
        params={
            "lr_p": principal,
            "lr_d": definition,
            "lr_c": context_id,
            "lr_fence": grant.fence,
            "lr_channel": channel,
            "lr_payload": payload("free", grant.key),
        },
    )


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
