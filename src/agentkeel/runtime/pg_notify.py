"""PgNotifier: one LISTEN connection per process, for the PostgreSQL coordination backends.

Why a connection of its own: a pooled connection goes back to the pool between queries
and would miss what is notified meanwhile, and a LISTEN on a connection shared with
queries would block them. The notifier keeps one connection listening on one channel
(named after the schema, so two deployments, or two tests, in one database never hear
each other) and hands every payload to the listeners registered for its ``t`` field.

A lost connection is reopened (with a short pause between tries); what was notified
while it was down is lost, so every user of the notifier also polls, and a
notification only makes it react sooner.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import psycopg
from psycopg import sql

from agentkeel.messages import JSONObject
from agentkeel.storage.postgres_pool import PostgresPool

__all__ = ["PgNotifier", "channel_name"]

logger = logging.getLogger(__name__)

Listener = Callable[[JSONObject], None]
_RETRY_SECONDS = 0.5


def channel_name(schema: str, topic: str) -> str:
    """The channel of `topic` in `schema` (an identifier of at most 63 bytes)."""
    return f"agentkeel_{topic}_{schema}"[:63]


class PgNotifier:
    """Listens on one channel and dispatches its JSON payloads by their ``t`` field.

    Args:
        pool: The pool whose database (and schema) the channel belongs to.
        topic: What the channel carries (``lease``, ``frames``, ...).
    """

    def __init__(self, pool: PostgresPool, topic: str) -> None:
        self.pool = pool
        self.channel = channel_name(pool.schema, topic)
        self._listeners: dict[str, list[Listener]] = {}
        self._task: asyncio.Task[None] | None = None
        self._users = 0
        self.listening = asyncio.Event()
        """Set while the LISTEN connection is up (tests wait for it before notifying)."""

    def on(self, kind: str, listener: Listener) -> Callable[[], None]:
        """Call `listener` with every payload whose ``t`` is `kind`; returns what stops it."""
        self._listeners.setdefault(kind, []).append(listener)
        return lambda: self._listeners.get(kind, []).remove(listener)

    async def notify(self, payload: JSONObject) -> None:
        """Send `payload` to every process listening (this one too)."""
        text = json.dumps(payload, separators=(",", ":"))
        async with self.pool._connection() as conn:
            await conn.execute("SELECT pg_notify(%s, %s)", (self.channel, text))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Listen while inside; nested users share one connection."""
        self._users += 1
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen_forever())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.listening.wait(), 5)
        try:
            yield
        finally:
            self._users -= 1
            if not self._users and self._task is not None:
                task, self._task = self._task, None
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _listen_forever(self) -> None:
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.pool.dsn, autocommit=True, connect_timeout=5
                )
            except psycopg.Error as exc:
                logger.debug("channel=<%s> | cannot listen yet: %s", self.channel, exc)
                await asyncio.sleep(_RETRY_SECONDS)
                continue
            try:
                async with conn:
                    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    self.listening.set()
                    async for note in conn.notifies():
                        self._dispatch(note.payload)
            except psycopg.Error as exc:
                logger.warning(
                    "channel=<%s> | the listening connection broke: %s", self.channel, exc
                )
            finally:
                self.listening.clear()
            await asyncio.sleep(_RETRY_SECONDS)

    def _dispatch(self, text: str) -> None:
        try:
            payload = json.loads(text)
        except ValueError:
            return
        if not isinstance(payload, dict):
            return
        for listener in list(self._listeners.get(str(payload.get("t")), ())):
            try:
                listener(payload)
            except Exception:
                logger.exception("channel=<%s> | a listener failed", self.channel)
