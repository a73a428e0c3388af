"""The transcript rows of bench/serve.py: one page of a conversation's transcript, read over
HTTP from a served agent, for a conversation of 10 messages and one of 10,000; and one
page of the context list, over `LISTED` conversations of 10 messages each and of 10,000.

The histories are written into the server's storage before it starts (the file backend's
session folder, or the PostgreSQL schema), so the server reads them cold: the first read
of each builds the file backend's page index from one scan, and is left out as warm-up.
Each measured read asks for the last page of the history (the page a client that
follows a conversation asks for), `PAGE` messages after a message near the end, so
that both pages hold the same messages. The target: the 10,000-message page
costs about what the 10-message page costs (server CPU per read within 1.5x), and so
does a list of conversations of 10,000 messages against one of 10-message ones (the
list reads summaries, not histories).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx

from agentkeel.messages import Message
from agentkeel.storage import SessionKey
from agentkeel.storage.base import SessionStorage

__all__ = ["TranscriptFigures", "fill_histories", "measure_pages", "report_pages"]

SIZES = (10, 10_000)
LISTED = 10
"""Conversations per listed definition (each of one size)."""
READS = 200
PAGE = 8
WARMUP = 5
BATCH = 200


@dataclass(frozen=True, slots=True)
class TranscriptFigures:
    scenario: str
    messages: int
    latencies: list[float]
    cpu_seconds: float | None

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1000

    @property
    def cpu_ms(self) -> float | None:
        return None if self.cpu_seconds is None else self.cpu_seconds / len(self.latencies) * 1000


def context_of(size: int) -> str:
    return f"ctx-transcript-{size}"


def listed_definition(size: int) -> str:
    """The definition whose `LISTED` conversations all hold `size` messages."""
    return f"bench-list-{size}"


async def fill_histories(storage: SessionStorage) -> dict[int, str]:
    """Write each size's history (in batches: the bench is of reads); the id to read after."""
    await storage.open()
    marks: dict[int, str] = {}
    try:
        for size in SIZES:
            key = SessionKey(definition="bench", context_id=context_of(size))
            history = [
                Message.user(f"question {i}") if i % 2 == 0 else Message.assistant(f"answer {i}")
                for i in range(size)
            ]
            for start in range(0, size, BATCH):
                await storage.append(key, history[start : start + BATCH], None)
            marks[size] = history[size - PAGE - 1].id
            for number in range(LISTED):
                listed = SessionKey(definition=listed_definition(size), context_id=f"ctx-{number}")
                for start in range(0, size, BATCH):
                    await storage.append(listed, history[start : start + BATCH], None)
    finally:
        await storage.close()
    return marks


async def measure_pages(
    url: str, scenario: str, marks: dict[int, str], cpu: Callable[[], float | None]
) -> list[TranscriptFigures]:
    rows = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for size in SIZES:
            path = f"/agents/bench/contexts/{context_of(size)}/messages"
            params = {"after": marks[size], "limit": str(PAGE)}
            for _ in range(WARMUP):
                (await client.get(path, params=params)).raise_for_status()
            latencies = []
            before = cpu()
            for _ in range(READS):
                start = time.perf_counter()
                response = await client.get(path, params=params)
                latencies.append(time.perf_counter() - start)
                response.raise_for_status()
                if len(response.json()["messages"]) != PAGE:
                    raise RuntimeError("a transcript page came back with the wrong messages")
            after = cpu()
            spent = None if before is None or after is None else after - before
            rows.append(TranscriptFigures(scenario, size, latencies, spent))
        for size in SIZES:
            rows.append(await _measure_list(client, scenario, size, cpu))
    return rows


async def _measure_list(
    client: httpx.AsyncClient, scenario: str, size: int, cpu: Callable[[], float | None]
) -> TranscriptFigures:
    """One page of the context list of `LISTED` conversations of `size` messages."""
    path = f"/agents/{listed_definition(size)}/contexts"
    params = {"limit": str(LISTED)}
    for _ in range(WARMUP):
        (await client.get(path, params=params)).raise_for_status()
    latencies = []
    before = cpu()
    for _ in range(READS):
        start = time.perf_counter()
        response = await client.get(path, params=params)
        latencies.append(time.perf_counter() - start)
        response.raise_for_status()
        counts = {item["messageCount"] for item in response.json()["contexts"]}
        if len(response.json()["contexts"]) != LISTED or counts != {size}:
            raise RuntimeError("a context list came back with the wrong conversations")
    after = cpu()
    spent = None if before is None or after is None else after - before
    return TranscriptFigures(f"{scenario}/list", size, latencies, spent)


def report_pages(rows: list[TranscriptFigures]) -> None:
    print(
        f"\ntranscript page (the last {PAGE} messages, by id) and context list page"
        f" (/list: {LISTED} conversations of that many messages), {READS} reads per row"
    )
    print(f"{'scenario':<12} {'messages':>8} {'p50 ms':>8} {'CPU ms/read':>12}")
    for row in rows:
        cpu = "n/a" if row.cpu_ms is None else f"{row.cpu_ms:.2f}"
        print(f"{row.scenario:<12} {row.messages:>8} {row.p50_ms:>8.2f} {cpu:>12}")
    by_key = {(row.scenario, row.messages): row for row in rows}
    for scenario in sorted({row.scenario for row in rows}):
        small, large = by_key[(scenario, SIZES[0])], by_key[(scenario, SIZES[1])]
        ratio = large.p50_ms / small.p50_ms
        line = f"{scenario}: 10,000/10 messages, page read p50 = {ratio:.2f}x"
        if small.cpu_ms and large.cpu_ms is not None:
            line += f", server CPU = {large.cpu_ms / small.cpu_ms:.2f}x (target about 1x)"
        print(line)


def run_pages(
    url: str, scenario: str, marks: dict[int, str], cpu: Callable[[], float | None]
) -> list[TranscriptFigures]:
    """`measure_pages` from synchronous code."""
    return anyio.run(measure_pages, url, scenario, marks, cpu)


def file_marks(folder: Path) -> dict[int, str]:
    """Fill the file backend's folder that the ``agentkeel`` server will serve."""
    from agentkeel.storage.file import LocalFileStorage

    return anyio.run(fill_histories, LocalFileStorage(folder))
