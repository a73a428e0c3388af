"""PostgresRunLease: the one-runner-per-context lease of many replicas, in PostgreSQL.

The fence must live where the commit is checked (SPEC guarantee 10): a lease in Redis
alone (``SET NX PX``) cannot stop a paused holder from committing after it lost the
lease. So the lease is a row per context in the storage's database, holding a fencing
counter that every grant bumps; the runtime passes the grant's fence to every storage
commit, and storage refuses a fence lower than the highest it accepted. A holder that
was paused past its lease, and then wakes, commits nothing.

- ``lease_rows``: per context, the last fence, whether it is held and until when
  (the database's clock, so the replicas' clocks never have to agree). The row stays
  after a release, so the fence only grows.
- ``lease_line``: the callers waiting, one row each, in the order they arrived (the
  time of the call, then a sequence), over all replicas. A waiter refreshes its row while it waits;
  one that stopped (its process died) is skipped after `STALE_SECONDS`.

A waiter polls; a release also notifies the lease channel, which wakes the waiters of
that context at once. A cancel for a context held by another replica is a
notification too, answered by the replica holding it (`pg_cancels.CancelRelay`).

A turn whose commit goes to the storage's own database hands that commit its release
(`riding_release`): one round trip fewer per turn, and the row is free exactly when
the turn's history is visible.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import psycopg

from agentkeel.errors import RunInProgressError
from agentkeel.messages import JSONObject
from agentkeel.runtime.coordination import CancelHandler, LeaseGrant
from agentkeel.runtime.pg_cancels import CancelRelay
from agentkeel.runtime.pg_lease_sql import (
    ENTER,
    KEY,
    LIVE,
    RELEASE,
    TABLES,
    TRY,
    Caught,
    caught,
    enter_reading,
    folded_for,
    key_of,
    lost,
    payload,
    riding_release,
    try_reading,
)
from agentkeel.runtime.pg_notify import PgNotifier
from agentkeel.storage.base import SessionKey, SessionStorage
from agentkeel.storage.bundled import RidingRelease
from agentkeel.storage.postgres_pool import PostgresPool, Row, who
from agentkeel.storage.postgres_since import FoldedCatchUp

__all__ = ["DEFAULT_LEASE_SECONDS", "STALE_SECONDS", "PostgresRunLease"]


DEFAULT_LEASE_SECONDS = 15.0
STALE_SECONDS = 5.0
"""A waiter whose row was not refreshed for this long is skipped (its process died)."""
_POLL_SECONDS = 0.05
_REFRESH_SECONDS = 1.0


@dataclass(eq=False, slots=True)
class _Held:
    grant: LeaseGrant
    on_cancel: CancelHandler | None


class PostgresRunLease:
    """`RunLease` over PostgreSQL, shared by every replica on one database and schema.

    Args:
        pool: The database and schema (its own pool, or the storage's settings).
    """

    def __init__(self, pool: PostgresPool) -> None:
        self.pool = pool
        self.notifier = PgNotifier(pool, "lease")
        self._held: dict[SessionKey, _Held] = {}
        self._wakers: dict[SessionKey, set[anyio.Event]] = {}
        self._joining = anyio.Lock()
        self._line_connection: psycopg.AsyncConnection[Row] | None = None
        self.notifier.on("free", self._on_free)
        self.cancels = CancelRelay(self.notifier, self._held, self._is_held)

    # -- lifecycle ---------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Open the pool, create the tables, and listen for releases and cancels."""
        await self.pool.open()
        await self._create_tables()
        with contextlib.suppress(psycopg.Error):  # else opened by the first caller
            self._line_connection = await psycopg.AsyncConnection.connect(
                self.pool.dsn, autocommit=True, connect_timeout=5
            )
        try:
            async with self.notifier.running():
                yield
        finally:
            conn, self._line_connection = self._line_connection, None
            if conn is not None:
                await conn.close()
            await self.pool.close()

    async def _create_tables(self) -> None:
        async with self.pool._connection() as conn, conn.transaction():
            # one process at a time: CREATE ... IF NOT EXISTS races with itself
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.pool.schema,))
            for text in TABLES:
                await conn.execute(self.pool._sql(text))

    # -- the Protocol ------------------------------------------------------------------

    async def acquire(
        self,
        key: SessionKey,
        *,
        wait: bool = True,
        ttl: float | None = None,
        on_cancel: CancelHandler | None = None,
    ) -> LeaseGrant:
        """Take a free context nobody waits for, else a ticket and wait for the head.

        Waiting ends at the head of the line with a free (or expired) row.

        The line is ordered by the time of the call (taken before anything is awaited,
        so calls made one after another are served in that order, as in one process),
        then by the ticket's sequence number. Arriving is one statement, made in call
        order in this process, that takes a free context at once only while its line is
        empty: a later caller never overtakes one whose ticket is in.
        """
        if not wait:
            won, _ = await self._try(key, None, ttl, None)
            if won is None:
                raise RunInProgressError(
                    f"context {key.context_id} is running a turn; try again when it ends"
                )
            return self._granted(won, on_cancel)
        return (await self.acquire_reading(key, lambda: None, ttl=ttl, on_cancel=on_cancel))[0]

    async def acquire_reading(
        self,
        key: SessionKey,
        read: Callable[[], FoldedCatchUp | None],
        *,
        ttl: float | None = None,
        on_cancel: CancelHandler | None = None,
    ) -> tuple[LeaseGrant, Caught]:
        """`acquire` (waiting), and `read()`'s catch-up made by the statement that grants.

        `read` is asked before each statement (what it reads from may move meanwhile).
        The read comes back only if it is of this database, and the statement's snapshot
        holds every earlier grant's commit (`pg_lease_sql._TRUSTED`); else None.
        """
        won, ticket, read_back = await self._enter(
            key, time.time(), ttl, folded_for(key, read(), self.pool)
        )
        if won is not None:
            return self._granted(won, on_cancel), read_back
        woken = anyio.Event()
        self._wakers.setdefault(key, set()).add(woken)
        try:
            refreshed = anyio.current_time()
            while True:
                won, read_back = await self._try(
                    key, ticket, ttl, folded_for(key, read(), self.pool)
                )
                if won is not None:
                    return self._granted(won, on_cancel), read_back
                with anyio.move_on_after(_POLL_SECONDS * 4):
                    await woken.wait()
                woken = self._rewake(key, woken)
                if anyio.current_time() - refreshed > _REFRESH_SECONDS:
                    await self._refresh(ticket)
                    refreshed = anyio.current_time()
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await self._leave(key, ticket)
            raise
        finally:
            waiting = self._wakers.get(key)
            if waiting is not None:
                waiting.discard(woken)
                if not waiting:
                    del self._wakers[key]

    async def renew(self, grant: LeaseGrant) -> LeaseGrant:
        """Push the expiry `grant.ttl` seconds on; LeaseLostError once taken over."""
        row = await self._one(
            "UPDATE {s}.lease_rows SET expires_at = CASE WHEN %s::float8 IS NULL THEN NULL"
            " ELSE clock_timestamp() + %s::float8 * interval '1 second' END"
            f" WHERE {KEY} AND fence = %s AND held AND {LIVE} RETURNING fence",
            (grant.ttl, grant.ttl, *who(grant.key), grant.fence),
        )
        if row is None:  # a renewal that ran past its turn's release must not drop the next's
            self.forget(grant)
            raise lost(grant)
        return grant

    async def release(self, grant: LeaseGrant) -> bool:
        """Free the row (keeping its fence) and wake the line; False for a lost grant."""
        self.forget(grant)
        row = await self._one(  # one statement: release, and wake the line if released
            RELEASE,
            (
                *who(grant.key),
                grant.fence,
                *who(grant.key),
                self.notifier.channel,
                payload("free", grant.key),
            ),
        )
        return row is not None

    def riding_release(self, grant: LeaseGrant, storage: SessionStorage) -> RidingRelease | None:
        """`grant`'s release for a commit to `storage` to make, if its database is ours."""
        return riding_release(grant, storage, self.pool, self.notifier.channel)

    def forget(self, grant: LeaseGrant) -> None:
        """Stop answering cancels for `grant` (released, by a commit or here, or lost)."""
        held = self._held.get(grant.key)
        if held is not None and held.grant == grant:
            del self._held[grant.key]

    async def check(self, grant: LeaseGrant) -> None:
        """Raise LeaseLostError unless `grant` still holds its row."""
        row = await self._one(
            f"SELECT 1 FROM {{s}}.lease_rows WHERE {KEY} AND fence = %s AND held AND {LIVE}",
            (*who(grant.key), grant.fence),
        )
        if row is None:
            raise lost(grant)

    async def cancel(self, key: SessionKey, run_id: str, *, drop: bool = False) -> bool:
        """Tell the holder, here or on another replica, to cancel `run_id` (`drop`: undo it)."""
        return await self.cancels.cancel(key, run_id, drop=drop)

    async def _is_held(self, key: SessionKey) -> bool:
        row = await self._one(
            f"SELECT 1 FROM {{s}}.lease_rows WHERE {KEY} AND held AND {LIVE}", who(key)
        )
        return row is not None

    # -- the line ----------------------------------------------------------------------

    async def _enter(
        self, key: SessionKey, arrived: float, ttl: float | None, folded: FoldedCatchUp | None
    ) -> tuple[LeaseGrant | None, int, Caught]:
        """The grant (a free context nobody waits for), or a ticket in the line.

        One statement at a time from this process, in call order (the lock is fair), on
        a connection of its own: a later caller that got a pooled connection sooner must
        not jump the line.
        """
        params = {**self._params(key, None, ttl, folded), "arrived": arrived}
        statement = self.pool._sql(ENTER if folded is None else enter_reading(folded.query))
        async with self._joining:
            conn = self._line_connection
            if conn is None or conn.closed:
                try:
                    conn = await psycopg.AsyncConnection.connect(
                        self.pool.dsn, autocommit=True, connect_timeout=5
                    )
                except psycopg.Error:
                    conn = None
                self._line_connection = conn
            row: tuple[object, ...] | None = None
            if conn is not None:
                try:
                    row = await (await conn.execute(statement, params)).fetchone()
                except psycopg.OperationalError:
                    self._line_connection = None
            if row is None:
                async with self.pool._connection() as pooled:  # the pool reports what is wrong
                    row = await (await pooled.execute(statement, params)).fetchone()
        assert row is not None
        fence, prior, ticket = row[:3]
        if fence is not None:
            grant = LeaseGrant(key=key, fence=int(str(fence)), ttl=ttl, taken_over=prior is True)
            return grant, 0, caught(folded, row, 3)
        return None, int(str(ticket)), None

    async def _refresh(self, ticket: int) -> None:
        await self._one(
            "UPDATE {s}.lease_line SET seen_at = clock_timestamp() WHERE ticket = %s"
            " RETURNING ticket",
            (ticket,),
        )

    async def _leave(self, key: SessionKey, ticket: int) -> None:
        async with self.pool._connection() as conn, conn.transaction():
            await conn.execute(
                self.pool._sql("DELETE FROM {s}.lease_line WHERE ticket = %s"), (ticket,)
            )
            await conn.execute(
                "SELECT pg_notify(%s, %s)", (self.notifier.channel, payload("free", key))
            )

    async def _try(
        self, key: SessionKey, ticket: int | None, ttl: float | None, folded: FoldedCatchUp | None
    ) -> tuple[LeaseGrant | None, Caught]:
        """One attempt, one statement: the grant, or None (held, or not our turn).

        Without a ticket it takes only a free context that nobody waits for. The upsert
        locks the context's row, and its ``WHERE`` is checked again on the row's latest
        version, so two replicas trying at once never both get it.
        """
        statement = TRY if folded is None else try_reading(folded.query)
        row = await self._one(statement, self._params(key, ticket, ttl, folded))
        if row is None:
            return None, None
        grant = LeaseGrant(key=key, fence=int(str(row[0])), ttl=ttl, taken_over=row[1] is True)
        return grant, caught(folded, row, 2)

    @staticmethod
    def _params(
        key: SessionKey, ticket: int | None, ttl: float | None, folded: FoldedCatchUp | None
    ) -> dict[str, object]:
        principal, definition, context_id = who(key)
        return {
            **({} if folded is None else folded.params),
            "p": principal,
            "d": definition,
            "c": context_id,
            "stale": STALE_SECONDS,
            "ticket": ticket,
            "ttl": ttl,
        }

    def _granted(self, grant: LeaseGrant, on_cancel: CancelHandler | None) -> LeaseGrant:
        self._held[grant.key] = _Held(grant, on_cancel)
        return grant

    def _rewake(self, key: SessionKey, woken: anyio.Event) -> anyio.Event:
        if not woken.is_set():
            return woken
        fresh = anyio.Event()
        waiting = self._wakers.setdefault(key, set())
        waiting.discard(woken)
        waiting.add(fresh)
        return fresh

    async def _one(
        self, text: str, params: tuple[object, ...] | dict[str, object]
    ) -> tuple[object, ...] | None:
        async with self.pool._connection() as conn:
            cursor = await conn.execute(self.pool._sql(text), params)
            try:
                return await cursor.fetchone()
            except psycopg.ProgrammingError:  # a statement without rows
                return None

    # -- notifications -----------------------------------------------------------------

    def _on_free(self, data: JSONObject) -> None:
        key = key_of(data)
        for woken in () if key is None else self._wakers.get(key, ()):
            woken.set()
