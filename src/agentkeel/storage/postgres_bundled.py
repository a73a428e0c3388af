"""The SQL of `BundledCommitStorage` on PostgreSQL: a commit's usage and frames.

A turn's commit on a saved session is one statement (`PostgresStorage.append`); its
extras join it as more of the same statement, so they cost no round trip of their own:

- the tokens go onto the session row in the ``UPDATE`` that moves its version
  (`SESSION_TOKENS`), and into the principal's day (the ``daily`` CTE);
- the frames replace the session's row in ``frames`` (the ``kept`` CTE);
- a lease's release frees its row (`RidingRelease`: the lease writes that CTE).

Each CTE reads its session id from the CTE that moved (or created) the session row, so
a commit the checks refuse writes none of them. The locking transaction of a new
session, a cut or a rewrite adds them in one more statement (`put_extras_locked`). The
SQL only names what there is to write: a commit without usage has no ``daily`` CTE.
"""

from __future__ import annotations

import time

from psycopg import AsyncConnection

from agentkeel.storage.bundled import CommitExtras
from agentkeel.storage.postgres_pool import PostgresPool, Row, text_key
from agentkeel.storage.postgres_schema import USAGE_COLUMNS

__all__ = ["extras_ctes", "extras_params", "put_extras_locked", "session_tokens"]


def session_tokens(extras: CommitExtras | None, table: str = "") -> str:
    """The ``SET`` items adding `extras`' tokens to a session row (empty without usage).

    `table` qualifies the column read (an upsert's ``ON CONFLICT`` needs the table name).
    """
    if extras is None or not extras.usage.total_tokens:
        return ""
    prefix = f"{table}." if table else ""
    return "".join(f", {name} = {prefix}{name} + %(u_{name})s" for name in USAGE_COLUMNS)


def extras_ctes(extras: CommitExtras | None, owner: str) -> str:
    """The CTEs writing the principal's day, the frames and a release, each ``FROM`` `owner`.

    They start with a comma, to follow the statement's other CTEs.
    """
    if extras is None:
        return ""
    parts = []
    if extras.usage.total_tokens:
        added = ", ".join(
            f"{name} = {{s}}.usage_days.{name} + EXCLUDED.{name}" for name in USAGE_COLUMNS
        )
        parts.append(
            " daily AS (INSERT INTO {s}.usage_days (principal, day, "
            + ", ".join(USAGE_COLUMNS)
            + ") SELECT %(p)s, %(day)s, "
            + ", ".join(f"%(u_{name})s" for name in USAGE_COLUMNS)
            + f" FROM {owner} ON CONFLICT (principal, day) DO UPDATE SET {added})"
        )
    if extras.frames is not None:
        parts.append(
            " kept AS (INSERT INTO {s}.frames (session_id, run_id, body, written_at)"
            f" SELECT {owner}.id, %(frames_run)s, %(frames_body)s, %(now)s FROM {owner}"
            " ON CONFLICT (session_id) DO UPDATE SET run_id = EXCLUDED.run_id,"
            " body = EXCLUDED.body, written_at = EXCLUDED.written_at)"
        )
    if extras.release is not None:
        parts.append(" " + extras.release.cte.replace("{owner}", owner))
    return "".join("," + part for part in parts)


def extras_params(extras: CommitExtras | None) -> dict[str, object]:
    """The parameters `session_tokens` and `extras_ctes` name (none for nothing)."""
    if extras is None:
        return {}
    params: dict[str, object] = {f"u_{name}": getattr(extras.usage, name) for name in USAGE_COLUMNS}
    params["day"] = extras.day
    run_id, body = extras.frames if extras.frames is not None else ("", b"")
    params["frames_run"] = text_key(run_id)
    params["frames_body"] = bytes(body)
    if extras.release is not None:
        params.update(extras.release.params)
    return params


async def put_extras_locked(
    pool: PostgresPool,
    conn: AsyncConnection[Row],
    session_id: int,
    principal: str,
    extras: CommitExtras | None,
) -> None:
    """Write `extras` in the caller's transaction, which holds the session row's lock."""
    if extras is None or extras.empty:
        return
    tokens = session_tokens(extras)
    owner = (
        f"UPDATE {{s}}.sessions SET {tokens[2:]} WHERE id = %(id)s RETURNING id"
        if tokens
        else "SELECT %(id)s::bigint AS id"
    )
    await conn.execute(
        pool._sql(f"WITH owner AS ({owner}){extras_ctes(extras, 'owner')} SELECT 1"),
        {"id": session_id, "p": principal, "now": time.time(), **extras_params(extras)},
    )
