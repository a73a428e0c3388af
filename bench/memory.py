"""Memory search over 10,000 and 100,000 items, per backend, beside a brute-force baseline.

For each size, random unit vectors of 384 dimensions (MiniLM's) are stored in each
backend (in-memory; file, under a temporary folder, written in batches of 1,000), then
200 queries ask each for its top 5. The baseline, measured in the same run on the same
vectors, is plain numpy: one matrix product and an argpartition per query. The ratio
says what the store adds on top (scope lookup, namespace handling, building records);
both are exact searches, and "same top5" is the share of queries whose top 5 equals the
baseline's.

Also printed: the file backend's write time per 1,000 items and its reopen time (the
log is read once per scope). Embedding is left out (it is the embedder's cost).

Run ``.venv/bin/python bench/memory.py [--sizes 10000,100000] [--queries 200]``. Prints
figures; never asserts.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import numpy as np

from agentkeel.memory import FileMemoryStore, InMemoryMemoryStore, MemoryItem, MemoryScope
from agentkeel.memory.store import MemoryStore

DIM = 384
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


async def run(sizes: list[int], count: int) -> None:
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
            notes = []
            for name, store in backends:
                wrote = await fill(store, records)
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
            for note in notes:
                print(f"{'':>8} {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    anyio.run(run, [int(s) for s in args.sizes.split(",")], args.queries)


if __name__ == "__main__":
    main()
