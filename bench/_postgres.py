"""The PostgreSQL rows of bench/persist.py: save cost by history length, restore, bytes
per message and round trips per save, on a schema of its own that is dropped after.

Round trips are counted by a loopback forwarder between the pool and the server: each
burst the client sends before it waits for an answer is one trip.
"""

from __future__ import annotations

import secrets
import socket
import statistics
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from agentkeel.messages import JSONObject, Message
from agentkeel.result import Usage
from agentkeel.storage import RunRecord, SessionKey
from agentkeel.storage.bundled import CommitExtras
from agentkeel.storage.postgres import PostgresStorage

__all__ = ["CountingForwarder", "bench_postgres", "through"]

FRAMES = b"".join(
    b'id: %d\ndata: {"contextId":"ctx","runId":"run-1","event":{"type":"token","text":"tok "}}\n\n'
    % index
    for index in range(1, 52)
)
"""The retained frames of a 50-token turn, about the size a served turn stores."""


class CountingForwarder:
    """Forwards loopback TCP to PostgreSQL and counts trips: client bursts after an answer."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.sends = 0
        self._answered = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while chunk := source.recv(1 << 16):
                if counted and self._answered:
                    self.sends += 1  # the client speaks after an answer: a new trip
                self._answered = not counted
                sink.sendall(chunk)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


def through(url: str, forwarder: CountingForwarder) -> str:
    """`url` pointed at `forwarder`'s loopback port instead of the server's."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}{netloc[1]}127.0.0.1:{forwarder.port}"))


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def bench_postgres(
    url: str,
    rounds: int,
    make_history: Callable[[int], list[list[Message]]],
    make_turn: Callable[[int], list[Message]],
    state_for: Callable[[int], JSONObject],
    file_saves: dict[int, float],
) -> None:
    """Print the PostgreSQL rows beside the file backend's `file_saves` (ms by size)."""
    schema = f"bench_{secrets.token_hex(4)}"
    parts = urlsplit(url)
    forwarder = CountingForwarder(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = parts.netloc.rpartition("@")
    storage = PostgresStorage(through(url, forwarder), schema=schema, pool_size=2)
    await storage.open()
    try:
        sizes = sorted(file_saves)
        keys = {size: SessionKey(definition="bench", context_id=f"ctx-{size}") for size in sizes}
        for size, key in keys.items():
            for index, batch in enumerate(make_history(size)):
                await storage.append(key, batch, state_for(index))
        restores = []
        for _ in range(30):
            start = time.perf_counter()
            snapshot = await storage.load(keys[1_000])
            restores.append(time.perf_counter() - start)
        assert snapshot is not None
        print(f"PostgreSQL ({urlunsplit(parts._replace(netloc=netloc[2]))}, schema {schema}):")
        restore_ms = _median_ms(restores)
        print(f"  restore a {len(snapshot.messages):,}-message session: {restore_ms:.3f} ms")
        saves: dict[int, list[float]] = {size: [] for size in sizes}
        trips: list[int] = []
        for round_index in range(rounds):
            for size, key in keys.items():
                batch = make_turn(1 + round_index * 3)
                run = RunRecord(
                    run_id=f"run-{size}-{round_index}",
                    status="completed",
                    input="bench",
                    started_at=time.time(),
                    ended_at=time.time(),
                    text="done",
                )
                extras = CommitExtras(
                    usage=Usage(input_tokens=1_200, output_tokens=150),
                    day="2026-12-01",
                    frames=(run.run_id, FRAMES),
                )
                before = forwarder.sends
                start = time.perf_counter()
                await storage.append_bundled(
                    key, batch, state_for(100_000 + round_index), run=run, extras=extras
                )
                saves[size].append(time.perf_counter() - start)
                trips.append(forwarder.sends - before)
        print(
            f"  save one turn (2 messages + state + run record + tokens + {len(FRAMES):,}"
            f" bytes of frames, as a served turn does), median of {rounds}:"
        )
        for size in sizes:
            print(
                f"    history {size:>6,} messages: {_median_ms(saves[size]):7.3f} ms"
                f"   | files (with the run record), same run: {file_saves[size]:7.3f} ms"
            )
        ratio = _median_ms(saves[sizes[-1]]) / _median_ms(saves[sizes[0]])
        verdict = "ok" if ratio <= 1.3 else "MISSED"
        print(
            f"    ratio save@{sizes[-1]:,} / save@{sizes[0]} = {ratio:.2f}"
            f" (target <= 1.3: {verdict})"
        )
        print(
            f"  round trips per save (append_bundled: record, tokens, frames), median:"
            f" {statistics.median(trips):.0f}, most: {max(trips)}"
        )
        with psycopg.connect(url) as conn:
            row = conn.execute(
                sql.SQL(
                    "SELECT count(*), sum(pg_column_size(body)), pg_total_relation_size("
                    "'{}.messages') FROM {}.messages"
                ).format(sql.SQL(schema), sql.Identifier(schema))
            ).fetchone()
        assert row is not None
        count, payload, total = int(row[0]), int(row[1]), int(row[2])
        print(
            f"  bytes per message: {payload / count:.1f} in the body column,"
            f" {total / count:.1f} with row overhead and indexes ({count:,} rows)"
        )
    finally:
        await storage.close()
        forwarder.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
