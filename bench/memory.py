"""Memory search over 10,000 and 100,000 items, per backend, beside a brute-force baseline.

For each size, random unit vectors of 384 dimensions (MiniLM's) are stored in each
backend (in-memory; file, under a temporary folder; PostgreSQL, in a schema of its own
that is dropped after; all written in batches of 1,000), then
200 queries ask each for its top 5. The baseline, measured in the same run on the same
vectors, is plain numpy: one matrix product and an argpartition per query. The ratio
says what the store adds on top (scope lookup, namespace handling, building records);
both are exact searches, and "same top5" is the share of queries whose top 5 equals the
baseline's.

Also printed: the file backend's write time per 1,000 items and its reopen time (the
log is read once per scope), and PostgreSQL's write time and its first search, which
reads the scope's vectors (later ones only check the scope's revision; each search is
two round trips). Embedding is left out (it is the embedder's cost).

Run ``.venv/bin/python bench/memory.py [--sizes 10000,100000] [--queries 200]
[--postgres URL]`` (default: the local server's ``test`` database when one listens;
``--postgres ''`` leaves it out). Prints figures; never asserts.
"""

from __future__ import annotations

import argparse
import secrets
import socket
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import numpy as np

from agentkeel.memory import FileMemoryStore, InMemoryMemoryStore, MemoryItem, MemoryScope
from agentkeel.memory.store import MemoryStore

DIM = 384
LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
SCOPE = MemoryScope("bench")


def items(vectors: np.ndarray) -> list[MemoryItem]:
    now = datetime.now(UTC)
    return [
        MemoryItem(
            namespace="memories",
            key=f"k{i}",
            text=f"fact {i}",
            created_at=now,
            updated_at=now,
            model="bench",
            vector=vectors[i],
        )
        for i in range(len(vectors))
    ]


def unit(rng: np.random.Generator, rows: int) -> np.ndarray:
    raw = rng.normal(size=(rows, DIM)).astype(np.float32)
    rows_out: np.ndarray = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    return rows_out


async def fill(store: MemoryStore, records: list[MemoryItem]) -> float:
    start = time.perf_counter()
    for offset in range(0, len(records), 1000):
        await store.put(SCOPE, records[offset : offset + 1000])
    return time.perf_counter() - start


async def timed_search(store: MemoryStore, queries: np.ndarray) -> tuple[float, list[set[str]]]:
    await store.search(SCOPE, queries[0], model="bench", limit=5)  # build the matrix once
    found = []
    start = time.perf_counter()
    for query in queries:
        matches = await store.search(SCOPE, query, model="bench", limit=5)
        found.append({m.item.key for m in matches})
    return (time.perf_counter() - start) / len(queries), found


def baseline(vectors: np.ndarray, queries: np.ndarray) -> tuple[float, list[set[str]]]:
    found = []
    start = time.perf_counter()
    for query in queries:
        scores = vectors @ query
        top = np.argpartition(-scores, 4)[:5]
        found.append({f"k{i}" for i in top.tolist()})
    return (time.perf_counter() - start) / len(queries), found


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


async def postgres_store(url: str, schema: str) -> MemoryStore:
    from agentkeel.memory.postgres import memory_store_from_url

    joiner = "&" if "?" in url else "?"
    store = memory_store_from_url(f"{url}{joiner}schema={schema}")
    await store.open()
    return store


async def drop_schema(store: MemoryStore, url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    from agentkeel.memory.postgres import PostgresMemoryStore

    if isinstance(store, PostgresMemoryStore):
        await store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


async def run(sizes: list[int], count: int, postgres: str) -> None:
    rng = np.random.default_rng(7)
    header = ("items", "backend", "search ms", "numpy ms", "ratio", "same top5")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (8, 8, 10, 9, 6, 9), strict=True)))
    for size in sizes:
        vectors = unit(rng, size)
        queries = unit(rng, count)
        records = items(vectors)
        base_time, base_found = baseline(vectors, queries)
        with tempfile.TemporaryDirectory() as folder:
            backends: list[tuple[str, MemoryStore]] = [
                ("memory", InMemoryMemoryStore()),
                ("file", FileMemoryStore(Path(folder))),
            ]
            schema = f"bench_memory_{secrets.token_hex(4)}"
            if postgres:
                backends.append(("postgres", await postgres_store(postgres, schema)))
            notes = []
            for name, store in backends:
                wrote = await fill(store, records)
                start = time.perf_counter()
                await store.search(SCOPE, queries[0], model="bench", limit=5)
                first = time.perf_counter() - start
                per, found = await timed_search(store, queries)
                same = sum(a == b for a, b in zip(found, base_found, strict=True)) / count
                print(
                    f"{size:>8} {name:>8} {per * 1000:>10.2f} {base_time * 1000:>9.2f} "
                    f"{per / base_time:>6.2f} {same:>9.0%}"
                )
                if name == "file":
                    start = time.perf_counter()
                    reopened = FileMemoryStore(Path(folder))
                    await reopened.list(SCOPE, limit=1)
                    notes.append(
                        f"file: {wrote / size * 1000 * 1000:.1f} ms per 1,000 items written, "
                        f"reopen {time.perf_counter() - start:.2f} s"
                    )
                if name == "postgres":
                    notes.append(
                        f"postgres: {wrote / size * 1000 * 1000:.1f} ms per 1,000 items written, "
                        f"first search (reads the vectors) {first * 1000:.0f} ms"
                    )
                    await drop_schema(store, postgres, schema)
            for note in notes:
                print(f"{'':>8} {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL ('' for none)")
    args = parser.parse_args()
    postgres = LOCAL_POSTGRES if args.postgres is None and listening(5432) else args.postgres
    anyio.run(run, [int(s) for s in args.sizes.split(",")], args.queries, postgres or "")


if __name__ == "__main__":
    main()
