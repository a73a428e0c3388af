"""The run records of PostgresStorage: one row per run in ``runs``, beside its session.

`PUT_RUN` is the upsert of one record, shared by `put_run` and by a turn's commit,
which writes the record in the same statement (or transaction) as the turn's messages
and version, so that a refused or lost commit leaves no record of its run.
"""

from __future__ import annotations

import json
import time

from psycopg import AsyncConnection

from agentkeel.errors import CorruptSessionError
from agentkeel.keys import SessionKey, require_key
from agentkeel.storage._history import encode_json
from agentkeel.storage.base import RunRecord
from agentkeel.storage.bundled import CommitExtras
from agentkeel.storage.postgres_bundled import extras_ctes, extras_params
from agentkeel.storage.postgres_pool import PostgresPool, Row, text_key, who
from agentkeel.storage.postgres_schema import USAGE_COLUMNS

__all__ = ["PUT_RUN", "PostgresRuns", "run_columns"]

PUT_RUN = (
    "INSERT INTO {{s}}.runs (session_id, run_id, status, started_at, ended_at, written,"
    " record) SELECT {owner}.id, %(run_id)s, %(status)s, %(started)s, %(ended)s,"
    " nextval('{{s}}.run_writes'), %(record)s::json FROM {owner}"
    " WHERE %(record)s::text IS NOT NULL"
    " ON CONFLICT (session_id, run_id) DO UPDATE SET status = EXCLUDED.status,"
    " started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,"
    " written = EXCLUDED.written, record = EXCLUDED.record"
)
"""The upsert of a turn's run record, for a CTE or statement whose `owner` has the id."""


def run_columns(run: RunRecord | None) -> dict[str, object]:
    """The parameters of `PUT_RUN` (all None without a record: it inserts nothing)."""
    if run is None:
        return dict.fromkeys(("run_id", "status", "started", "ended", "record"))
    return {
        "run_id": text_key(run.run_id),
        "status": run.status,
        "started": run.started_at,
        "ended": run.ended_at,
        "record": encode_json(run.to_json(), "run record").decode("utf-8"),
    }


class PostgresRuns(PostgresPool):
    """put_run, get_run, latest_run and list_runs on a pool."""

    async def _put_run_locked(
        self, conn: AsyncConnection[Row], session_id: int, ran: dict[str, object]
    ) -> None:
        """Write the turn's run record (if any) in the caller's transaction."""
        if ran["record"] is not None:
            await conn.execute(
                self._sql(
                    "WITH owner AS (SELECT %(id)s::bigint AS id) " + PUT_RUN.format(owner="owner")
                ),
                {"id": session_id, **ran},
            )

    # -- run records ---------------------------------------------------------------------

    async def put_run(self, key: SessionKey, record: RunRecord) -> None:
        """Create or replace one run record (it becomes the latest); one statement."""
        require_key(key, "put_run")
        document = encode_json(record.to_json(), "run record").decode("utf-8")
        await self._one(
            self._with_session(
                "INSERT INTO {s}.runs (session_id, run_id, status, started_at, ended_at,"
                " written, record) SELECT id, %s, %s, %s, %s, nextval('{s}.run_writes'),"
                " %s::json FROM owner"
                " ON CONFLICT (session_id, run_id) DO UPDATE SET status = EXCLUDED.status,"
                " started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,"
                " written = EXCLUDED.written, record = EXCLUDED.record RETURNING 1"
            ),
            (
                *who(key),
                time.time(),
                time.time(),
                text_key(record.run_id),
                record.status,
                record.started_at,
                record.ended_at,
                document,
            ),  # fmt: skip
        )

    async def put_run_bundled(
        self, key: SessionKey, record: RunRecord, *, extras: CommitExtras
    ) -> None:
        """`put_run`, with the run's usage and frames in its statement (BundledCommitStorage).

        A suspended run, or one that ended before it answered, saves no history; its
        record, tokens and frames still take one round trip together.
        """
        require_key(key, "put_run")
        added = ", ".join(
            f"{name} = {{s}}.sessions.{name} + EXCLUDED.{name}" for name in USAGE_COLUMNS
        )
        now = time.time()
        await self._one(
            "WITH owner AS (INSERT INTO {s}.sessions (principal, definition, context_id,"
            f" created_at, updated_at, {', '.join(USAGE_COLUMNS)}) VALUES (%(p)s, %(d)s,"
            " %(c)s, %(now)s, %(now)s, "
            + ", ".join(f"%(u_{name})s" for name in USAGE_COLUMNS)
            + ") ON CONFLICT (principal, definition, context_id)"
            f" DO UPDATE SET saved = {{s}}.sessions.saved, {added} RETURNING id),"
            f" ran AS ({PUT_RUN.format(owner='owner')})"
            + extras_ctes(extras, "owner")
            + " SELECT 1",
            dict(
                zip(("p", "d", "c"), who(key), strict=True),
                now=now,
                **run_columns(record),
                **extras_params(extras),
            ),
        )

    async def get_run(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """One run's record, or None."""
        row = await self._one(
            "SELECT r.record::text FROM {s}.runs r JOIN {s}.sessions s ON s.id = r.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " AND r.run_id = %s",
            (*who(require_key(key, "get_run")), text_key(run_id)),
        )
        return None if row is None else self._run(key, row[0])

    async def latest_run(self, key: SessionKey) -> RunRecord | None:
        """The record written last, or None."""
        row = await self._one(
            "SELECT r.record::text FROM {s}.runs r JOIN {s}.sessions s ON s.id = r.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " ORDER BY r.written DESC LIMIT 1",
            who(require_key(key, "latest_run")),
        )
        return None if row is None else self._run(key, row[0])

    async def list_runs(self, key: SessionKey) -> list[RunRecord]:
        """Every run record, oldest first (start time, then id)."""
        rows = await self._all(
            "SELECT r.record::text FROM {s}.runs r JOIN {s}.sessions s ON s.id = r.session_id"
            " WHERE s.principal = %s AND s.definition = %s AND s.context_id = %s"
            " ORDER BY r.started_at, r.run_id",
            who(require_key(key, "list_runs")),
        )
        records = [self._run(key, row[0]) for row in rows]
        return sorted(records, key=lambda record: (record.started_at, record.run_id))

    def _run(self, key: SessionKey, text: str) -> RunRecord:
        try:
            return RunRecord.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            where = f"postgresql:{self.schema}.runs[{key.session_id}]"
            raise CorruptSessionError(f"{where}: cannot decode: {exc}", path=where) from None
