"""The PostgreSQL schema: ordered migrations, applied under an advisory lock.

Each migration is a version number and the SQL that takes the schema from the version
before it to that one. `migrate` runs the missing ones in one transaction that holds a
transaction-level advisory lock, so two processes starting at once on an empty database
both come up: the second waits for the first, then finds nothing left to do. A database
migrated by a newer agentkeel (a version this code does not know) is refused, never
written to.

The tables (docs/sessions.md documents them for ``psql``)::

    sessions     one row per (principal, definition, context_id): version, fence, state,
                 and what the context list shows (title, shown)
    messages     one row per message of a history, in order (``seq``)
    runs         one row per run record
    frames       the latest run's retained stream frames, one row per session
    documents    named JSON documents beside a session (a swarm's record)
    checkpoints  suspended runs, keyed like the session
    tasks        the A2A task index, keyed by (principal, definition, index, task id)
    usage_days   token totals per (principal, UTC day); a context's are on its row
    memory_scopes, memory_items   memory across conversations (PostgresMemoryStore)

The principal of a session without authentication is stored as ``''`` (a principal is
never empty), so the key can be a plain unique constraint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, sql

from agentkeel.errors import StorageError

__all__ = [
    "MIGRATIONS",
    "USAGE_COLUMNS",
    "Migration",
    "SchemaTooNewError",
    "migrate",
    "schema_identifier",
]

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_LOCK_KEY = 0x616B6B6C  # "akkl": one advisory lock id for every agentkeel schema


class SchemaTooNewError(StorageError):
    """The database was migrated by a newer agentkeel than this one."""

    code = "storage_schema_too_new"


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema: `version` is reached by running `statements` in order."""

    version: int
    name: str
    statements: tuple[str, ...]


MESSAGE_ID_SQL = 'substring(body::text from \'^\\{{\\s*"id"\\s*:\\s*"(msg-[0-9a-f]{{24}})"\')'
"""A message row's id, read from its text (the codec writes ``id`` first) rather than
with a JSON operator, which fails on a row whose JSON holds ``\\u0000``."""

USAGE_COLUMNS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")
"""The token counts of a `Usage`, one column each on ``sessions`` and ``usage_days``."""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "sessions, messages, runs, frames, documents, checkpoints, tasks",
        (
            """CREATE TABLE {s}.sessions (
                id bigserial PRIMARY KEY,
                principal text NOT NULL,
                definition text NOT NULL,
                context_id text NOT NULL,
                saved boolean NOT NULL DEFAULT false,
                version bigint NOT NULL DEFAULT 0,
                fence bigint NOT NULL DEFAULT 0,
                message_count integer NOT NULL DEFAULT 0,
                state json NOT NULL DEFAULT '{{}}',
                checkpoint_seq bigint NOT NULL DEFAULT 0,
                created_at double precision NOT NULL,
                updated_at double precision NOT NULL,
                UNIQUE (principal, definition, context_id)
            )""",
            "CREATE INDEX sessions_updated ON {s}.sessions (updated_at)",
            """CREATE TABLE {s}.messages (
                session_id bigint NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
                seq integer NOT NULL,
                body json NOT NULL,
                PRIMARY KEY (session_id, seq)
            )""",
            "CREATE SEQUENCE {s}.run_writes",
            """CREATE TABLE {s}.runs (
                session_id bigint NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
                run_id text NOT NULL,
                status text NOT NULL,
                started_at double precision NOT NULL,
                ended_at double precision,
                written bigint NOT NULL,
                record json NOT NULL,
                PRIMARY KEY (session_id, run_id)
            )""",
            "CREATE INDEX runs_written ON {s}.runs (session_id, written)",
            "CREATE INDEX runs_ended ON {s}.runs (ended_at)",
            """CREATE TABLE {s}.frames (
                session_id bigint PRIMARY KEY
                    REFERENCES {s}.sessions (id) ON DELETE CASCADE,
                run_id text NOT NULL,
                body bytea NOT NULL,
                written_at double precision NOT NULL
            )""",
            "CREATE INDEX frames_written ON {s}.frames (written_at)",
            """CREATE TABLE {s}.documents (
                session_id bigint NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
                name text NOT NULL,
                body json NOT NULL,
                PRIMARY KEY (session_id, name)
            )""",
            """CREATE TABLE {s}.checkpoints (
                session_id bigint NOT NULL REFERENCES {s}.sessions (id) ON DELETE CASCADE,
                checkpoint_id text NOT NULL,
                sequence bigint NOT NULL,
                body json NOT NULL,
                PRIMARY KEY (session_id, checkpoint_id)
            )""",
            "CREATE SEQUENCE {s}.task_puts",
            """CREATE TABLE {s}.tasks (
                principal text NOT NULL,
                definition text NOT NULL,
                index_name text NOT NULL,
                task_id text NOT NULL,
                context_id text NOT NULL,
                position bigint NOT NULL,
                body json NOT NULL,
                PRIMARY KEY (principal, definition, index_name, task_id)
            )""",
        ),
    ),
    Migration(
        2,
        "retention: a sweeper's claim on an idle session, runs by status",
        (
            "ALTER TABLE {s}.sessions ADD COLUMN sweep_claimed_at double precision",
            "CREATE INDEX runs_session_status ON {s}.runs (session_id, status)",
        ),
    ),
    Migration(
        3,
        "usage: token totals per context (on its row) and per principal and UTC day",
        (
            *(
                f"ALTER TABLE {{s}}.sessions ADD COLUMN {name} bigint NOT NULL DEFAULT 0"
                for name in USAGE_COLUMNS
            ),
            """CREATE TABLE {s}.usage_days (
                principal text NOT NULL,
                day text NOT NULL,
                input_tokens bigint NOT NULL DEFAULT 0,
                output_tokens bigint NOT NULL DEFAULT 0,
                cached_tokens bigint NOT NULL DEFAULT 0,
                reasoning_tokens bigint NOT NULL DEFAULT 0,
                PRIMARY KEY (principal, day)
            )""",
        ),
    ),
    Migration(
        4,
        "memory across conversations: scopes and their items (PostgresMemoryStore)",
        (
            """CREATE TABLE {s}.memory_scopes (
                id bigserial PRIMARY KEY,
                principal text NOT NULL,
                agent text NOT NULL,
                revision bigint NOT NULL DEFAULT 0,
                UNIQUE (principal, agent)
            )""",
            """CREATE TABLE {s}.memory_items (
                scope_id bigint NOT NULL
                    REFERENCES {s}.memory_scopes (id) ON DELETE CASCADE,
                namespace text NOT NULL,
                key text NOT NULL,
                text text NOT NULL,
                value json,
                created_at timestamptz NOT NULL,
                updated_at timestamptz NOT NULL,
                context_id text,
                source_agent text,
                run_id text,
                model text NOT NULL,
                dimension integer NOT NULL,
                vector bytea NOT NULL,
                PRIMARY KEY (scope_id, namespace, key)
            )""",
            "CREATE INDEX memory_items_recent ON {s}.memory_items (scope_id, updated_at DESC,"
            ' namespace COLLATE "C", key COLLATE "C")',
        ),
    ),
    Migration(
        5,
        "transcript: messages by id, a principal's sessions by definition and update time",
        (
            "CREATE INDEX messages_id ON {s}.messages (session_id, " + MESSAGE_ID_SQL + ")",
            "CREATE INDEX sessions_listed ON {s}.sessions"
            " (principal, definition, updated_at DESC, context_id DESC) WHERE saved",
        ),
    ),
    Migration(
        6,
        "catch-up: the version of the last turn that deleted message rows (rewrite, cut)",
        (
            "ALTER TABLE {s}.sessions ADD COLUMN rewritten_at bigint NOT NULL DEFAULT 0",
            # the version the turn in progress commits (its UPDATE may come later)
            "CREATE FUNCTION {s}.history_rewritten() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN UPDATE {s}.sessions SET rewritten_at = version + 1"
            "  WHERE id IN (SELECT DISTINCT session_id FROM dropped); RETURN NULL; END $$",
            "CREATE TRIGGER messages_rewritten AFTER DELETE ON {s}.messages"
            " REFERENCING OLD TABLE AS dropped FOR EACH STATEMENT"
            " EXECUTE FUNCTION {s}.history_rewritten()",
        ),
    ),
    Migration(
        7,
        "context list: each session's title, its row, and its shown count (postgres_listing)",
        (
            # no backfill: a row from before keeps shown NULL until a list fills it
            "ALTER TABLE {s}.sessions ADD COLUMN shown integer, ADD COLUMN title text,"
            " ADD COLUMN title_seq integer",
            "ALTER TABLE {s}.sessions ALTER COLUMN shown SET DEFAULT 0",
        ),
    ),
)
"""Every migration, oldest first; the last one's version is what this code writes."""


def schema_identifier(name: str) -> sql.Identifier:
    """The schema `name` as a quoted identifier; ConfigurationError-free by validation."""
    if not _SCHEMA_NAME.fullmatch(name):
        raise StorageError(f"schema name {name!r} must match {_SCHEMA_NAME.pattern}")
    return sql.Identifier(name)


def _statement(text: str, schema: str) -> sql.Composed:
    return sql.SQL(text).format(s=schema_identifier(schema))


async def migrate(
    conn: AsyncConnection[Any], schema: str, migrations: tuple[Migration, ...] = MIGRATIONS
) -> list[int]:
    """Bring `schema` up to the last of `migrations`; the versions applied, in order.

    Raises:
        SchemaTooNewError: The database holds a version this code does not know.
    """
    ident = schema_identifier(schema)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        await conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.schema_migrations ("
                "version integer PRIMARY KEY, name text NOT NULL, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(ident)
        )
        cursor = await conn.execute(
            sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(ident)
        )
        row = await cursor.fetchone()
        current = 0 if row is None else int(row[0])
        known = migrations[-1].version if migrations else 0
        if current > known:
            raise SchemaTooNewError(
                f"storage: the database schema {schema!r} is at version {current}, newer than "
                f"this agentkeel knows ({known}); upgrade agentkeel, or point it at another "
                "schema"
            )
        applied = []
        for migration in migrations:
            if migration.version <= current:
                continue
            for text in migration.statements:
                await conn.execute(_statement(text, schema))
            await conn.execute(
                sql.SQL("INSERT INTO {}.schema_migrations (version, name) VALUES (%s, %s)").format(
                    ident
                ),
                (migration.version, migration.name),
            )
            applied.append(migration.version)
        return applied
