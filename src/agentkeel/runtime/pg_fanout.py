"""PgStreams: the runs' frames fanned out through PostgreSQL alone (no Redis).

For a deployment that runs PostgreSQL only (``"coordination": "postgresql://…"``).
Frames go to a table keyed by (run, frame id); an insert whose id is not above the
run's last is skipped, so a second writer adds nothing. The writer sends each batch in
one transaction and notifies the frames channel once per batch, never once per token;
a follower on another replica waits for that notification (or a short timeout, so a
lost notification costs a fraction of a second) and reads what follows its last id.
Announcements (a segment's start, for the requests waiting for a suspended run to
resume elsewhere, ...) are notified on the same channel, once per batch too.
Rows carry their expiry (``retention.events``) and are swept by the writer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from agentkeel.keys import SessionKey
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.runtime.announcements import AnnounceWrite
from agentkeel.runtime.channels import Frame
from agentkeel.runtime.pg_notify import PgNotifier
from agentkeel.runtime.remote_channel import frame_of
from agentkeel.runtime.shared_streams import (
    FrameWrite,
    SharedStreams,
    Write,
    context_name,
)
from agentkeel.storage.base import SessionStorage
from agentkeel.storage.postgres_pool import PostgresPool

__all__ = ["PgStreams"]

_TABLES = (
    "CREATE TABLE IF NOT EXISTS {s}.live_frames ("
    " stream text NOT NULL, id integer NOT NULL, body bytea NOT NULL,"
    " expires_at timestamptz, PRIMARY KEY (stream, id))",
    "CREATE TABLE IF NOT EXISTS {s}.live_pointers ("
    " context text PRIMARY KEY, value text NOT NULL, expires_at timestamptz)",
)
_EXPIRES = (
    "CASE WHEN %s::integer IS NULL THEN NULL ELSE clock_timestamp() + %s * interval '1 second' END"
)
_FENCE = "coalesce((({t}.value)::json ->> 'fence')::bigint, 0)"
"""A pointer's lease fence: a run of a lower one never takes a context's pointer back
(`shared_streams`: the next turn may start before this one's done frame is written)."""
_SWEEP_SECONDS = 60.0


class PgStreams(SharedStreams):
    """`StreamFanout` over PostgreSQL tables and NOTIFY.

    Args:
        pool: The database and schema the tables live in.
        storage: Where segments' frames persist, and are read back from.
        retention: Seconds a finished run's frames stay (None: no expiry).
    """

    backend = "postgresql"

    def __init__(
        self, pool: PostgresPool, storage: SessionStorage, retention: float | None
    ) -> None:
        super().__init__(storage, retention)
        self.pool = pool
        self.notifier = PgNotifier(pool, "frames")
        self._arrived: dict[str, set[anyio.Event]] = {}
        self._swept_at = 0.0
        self.notifier.on("frames", self._on_frames)
        self.notifier.on("announce", self._on_announce)

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        """Open the pool, create the tables, listen for new frames."""
        await self.pool.open()
        try:
            async with self.pool._connection() as conn, conn.transaction():
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))", (self.pool.schema,)
                )
                for text in _TABLES:
                    await conn.execute(self.pool._sql(text))
            async with self.notifier.running():
                yield
        finally:
            await self.pool.close()

    @staticmethod
    def stream_name(key: SessionKey, run_id: str) -> str:
        """The rows' name of one run."""
        return f"{context_name(key)}:{run_id}"

    async def ping(self) -> None:
        """SELECT 1."""
        async with self.pool._connection(timeout=1.0) as conn:
            await conn.execute("SELECT 1")

    async def send_batch(self, writes: list[Write]) -> None:
        """One transaction, then one NOTIFY naming the runs that got frames."""
        streams: set[str] = set()
        announced: list[JSONValue] = []
        async with self.pool._connection() as conn, conn.transaction():
            for write in writes:
                if isinstance(write, AnnounceWrite):
                    announced.append(list(write.encoded()))
                elif isinstance(write, FrameWrite):
                    name = self.stream_name(write.key, write.run_id)
                    streams.add(name)
                    await conn.execute(
                        self.pool._sql(
                            "INSERT INTO {s}.live_frames (stream, id, body, expires_at)"
                            f" SELECT %s, %s, %s, {_EXPIRES} WHERE NOT EXISTS"
                            " (SELECT 1 FROM {s}.live_frames WHERE stream = %s AND id >= %s)"
                        ),
                        (
                            name,
                            write.frame.id,
                            write.frame.encoded,
                            write.ttl,
                            write.ttl,
                            name,
                            write.frame.id,
                        ),
                    )
                elif write.value is None:
                    await conn.execute(
                        self.pool._sql("DELETE FROM {s}.live_pointers WHERE context = %s"),
                        (context_name(write.key),),
                    )
                else:
                    await conn.execute(
                        self.pool._sql(
                            "INSERT INTO {s}.live_pointers (context, value, expires_at)"
                            f" VALUES (%s, %s, {_EXPIRES}) ON CONFLICT (context) DO UPDATE"
                            " SET value = excluded.value, expires_at = excluded.expires_at"
                            f" WHERE {_FENCE.format(t='excluded')}"
                            f" >= {_FENCE.format(t='{s}.live_pointers')}"
                        ),
                        (context_name(write.key), write.value, write.ttl, write.ttl),
                    )
            if streams:
                payload = json.dumps({"t": "frames", "s": sorted(streams)})
                await conn.execute("SELECT pg_notify(%s, %s)", (self.notifier.channel, payload))
            if announced:
                payload = json.dumps({"t": "announce", "s": announced})
                await conn.execute("SELECT pg_notify(%s, %s)", (self.notifier.channel, payload))
            if anyio.current_time() - self._swept_at > _SWEEP_SECONDS:
                self._swept_at = anyio.current_time()
                for table in ("live_frames", "live_pointers"):
                    await conn.execute(
                        self.pool._sql(
                            f"DELETE FROM {{s}}.{table} WHERE expires_at < clock_timestamp()"
                        )
                    )

    async def read_pointer(self, key: SessionKey) -> str | None:
        """The pointer row, unless expired."""
        async with self.pool._connection() as conn:
            cursor = await conn.execute(
                self.pool._sql(
                    "SELECT value FROM {s}.live_pointers WHERE context = %s"
                    " AND (expires_at IS NULL OR expires_at > clock_timestamp())"
                ),
                (context_name(key),),
            )
            row = await cursor.fetchone()
        return None if row is None else str(row[0])

    async def read_frames(self, key: SessionKey, run_id: str) -> list[Frame]:
        """The run's rows, in order."""
        return await self._after(self.stream_name(key, run_id), 0)

    async def _after(self, name: str, after: int) -> list[Frame]:
        async with self.pool._connection() as conn:
            cursor = await conn.execute(
                self.pool._sql(
                    "SELECT id, body FROM {s}.live_frames WHERE stream = %s AND id > %s"
                    " ORDER BY id LIMIT 512"
                ),
                (name, after),
            )
            rows = await cursor.fetchall()
        frames = []
        for frame_id, body in rows:
            frame = frame_of(int(frame_id), bytes(body))
            if frame is None:
                break
            frames.append(frame)
        return frames

    def reader(self, key: SessionKey, run_id: str) -> _PgReader:
        """A follower's reader: woken by the frames channel."""
        return _PgReader(self, self.stream_name(key, run_id))

    def _on_announce(self, payload: JSONObject) -> None:
        announced = payload.get("s")
        for item in announced if isinstance(announced, list) else ():
            self.announced.heard(item)

    def _on_frames(self, payload: JSONObject) -> None:
        names = payload.get("s")
        for name in names if isinstance(names, list) else ():
            for event in self._arrived.get(str(name), ()):
                event.set()


class _PgReader:
    def __init__(self, streams: PgStreams, name: str) -> None:
        self.streams = streams
        self.name = name
        self.event = anyio.Event()
        streams._arrived.setdefault(name, set()).add(self.event)

    async def read(self, after: int, block: float) -> list[Frame]:
        frames = await self.streams._after(self.name, after)
        if frames:
            return frames
        with anyio.move_on_after(min(block, 0.5)):  # a lost NOTIFY costs half a second
            await self.event.wait()
        self._rearm()
        return await self.streams._after(self.name, after)

    def _rearm(self) -> None:
        waiting = self.streams._arrived.setdefault(self.name, set())
        waiting.discard(self.event)
        self.event = anyio.Event()
        waiting.add(self.event)

    async def close(self) -> None:
        waiting = self.streams._arrived.get(self.name)
        if waiting is not None:
            waiting.discard(self.event)
            if not waiting:
                del self.streams._arrived[self.name]
