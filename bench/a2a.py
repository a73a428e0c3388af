"""What an A2A streaming turn costs the server, beside a native-wire turn in the same run.

One server process per row (uvicorn, one worker, loopback), serving one ScriptedModel
agent that answers every turn with 50 tokens; the load generator (httpx, this process)
sends turns over one of the two wires of that same app:

- native: ``POST /agents/bench/stream``, read to the ``done`` frame (as bench/serve.py);
- a2a: JSON-RPC ``SendStreamingMessage`` to ``/agents/bench/a2a``, read to the end of
  the SSE stream (the Task, status updates, artifact chunks, the final status).

Two token paces, because the A2A binding turns every batch of token frames that arrive
together into one artifact chunk (the native wire writes such a batch in one write too):

- burst: the model yields its 50 deltas without pausing (a fast local model), so a
  turn's tokens mostly travel as one chunk on both wires;
- paced: the model sleeps 0.2 ms between deltas (tokens arriving one by one, as from a
  remote model), so each token is its own frame and its own A2A artifact update.

Storage is in memory by default (the server's own cost); ``--storage file`` adds the
fsynced session writes of a LocalFileStorage (and, for A2A, the task index line, which
is appended without an fsync so that it never delays the first frame).
Each client worker keeps its own context, so at concurrency 32 no turn waits for another.

Server CPU per turn is utime + stime of the server process (all threads) from
``/proc/<pid>/stat`` around the measured turns, divided by the turns; n/a without /proc.

Run ``.venv/bin/python bench/a2a.py [--turns N] [--storage memory|file]``. Prints the
figures and the a2a/native CPU ratio per pace and concurrency (target: <= 1.3x) and the
time to the first frame (which no fsync may delay); never
asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx

from agentkeel.sse import aiter_sse

TOKENS = 50
TOKEN_TEXT = "tok "
WARMUP_TURNS = 30
PACES = {"burst": 0.0, "paced": 0.0002}
WIRES = ("native", "a2a")
VERSION = {"A2A-Version": "1.0"}


# -- the server (in the subprocess) -------------------------------------------------------


def serve(pace: str, storage_kind: str, folder: Path) -> None:
    """The subprocess: serve the bench agent on a free loopback port; print the URL."""
    here = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != here]
    # (this file is named a2a.py: its folder on sys.path would shadow the a2a SDK)
    import asyncio

    import uvicorn

    from agentkeel import Agent, ScriptedModel, ScriptedTurn
    from agentkeel.framework import AgentDefinition, Catalog, Framework
    from agentkeel.server import create_app
    from agentkeel.storage.file import LocalFileStorage
    from agentkeel.storage.memory import InMemoryStorage

    turn = ScriptedTurn(text=TOKEN_TEXT * TOKENS, delay=PACES[pace])

    def factory(context_id: str) -> Agent:
        del context_id
        return Agent(ScriptedModel([turn], chunk_size=len(TOKEN_TEXT), repeat=True), name="bench")

    definition = AgentDefinition(
        name="bench", factory=factory, catalog=Catalog(description="bench")
    )
    storage = LocalFileStorage(folder) if storage_kind == "file" else InMemoryStorage()
    app = create_app(Framework(definitions={"bench": definition}, storage=storage))
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, workers=1, lifespan="on", log_level="warning"
    )
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"http://127.0.0.1:{port}", flush=True)

    async def main() -> None:
        watcher = asyncio.ensure_future(announce())
        await server.serve()
        watcher.cancel()

    asyncio.run(main())


# -- the load generator ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Figures:
    wire: str
    pace: str
    concurrency: int
    turns: int
    seconds: float
    latencies: list[float]
    cpu_seconds: float | None
    events_per_turn: float
    firsts: list[float]
    """Seconds from sending the request to the first SSE frame, per turn."""

    @property
    def per_second(self) -> float:
        return self.turns / self.seconds

    def percentile(self, fraction: float, values: list[float] | None = None) -> float:
        ordered = sorted(self.latencies if values is None else values)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000

    @property
    def cpu_ms_per_turn(self) -> float | None:
        return None if self.cpu_seconds is None else self.cpu_seconds / self.turns * 1000


def process_cpu(pid: int) -> float | None:
    """utime + stime of `pid` (all its threads) in seconds, from /proc; None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Turn = tuple[float, int, float]
"""(seconds for the turn, frames received, seconds to the first frame)."""


async def native_turn(client: httpx.AsyncClient, context_id: str) -> Turn:
    start = time.perf_counter()
    body = {"message": "go", "contextId": context_id}
    frames, first = 0, 0.0
    async with client.stream("POST", "/agents/bench/stream", json=body) as response:
        async for frame in aiter_sse(response.aiter_bytes()):
            first = first or time.perf_counter() - start
            frames += 1
            if '"done":true' in frame.data:
                break
    if frames < TOKENS + 1:
        raise RuntimeError(f"a native turn streamed only {frames} frames")
    return time.perf_counter() - start, frames, first


async def a2a_turn(client: httpx.AsyncClient, context_id: str) -> Turn:
    start = time.perf_counter()
    message = {
        "role": "ROLE_USER",
        "messageId": f"m-{time.monotonic_ns()}",
        "contextId": context_id,
        "parts": [{"text": "go"}],
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message},
    }
    events, last, first = 0, "", 0.0
    async with client.stream("POST", "/agents/bench/a2a", json=body, headers=VERSION) as response:
        async for frame in aiter_sse(response.aiter_bytes()):
            first = first or time.perf_counter() - start
            events += 1
            last = frame.data
    if "TASK_STATE_COMPLETED" not in last:
        raise RuntimeError(f"an A2A turn did not end completed: {last[:200]}")
    text = json.loads(last)["result"]
    assert "statusUpdate" in text
    return time.perf_counter() - start, events, first


async def load(url: str, wire: str, pace: str, concurrency: int, turns: int, pid: int) -> Figures:
    turn = native_turn if wire == "native" else a2a_turn
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        for index in range(min(WARMUP_TURNS, turns)):
            await turn(client, f"ctx-warmup-{index % 4}")
        latencies: list[float] = []
        firsts: list[float] = []
        counts: list[int] = []
        per_worker = max(1, turns // concurrency)

        async def worker(number: int) -> None:
            context_id = f"ctx-{wire}-{concurrency}-{number}"
            for _ in range(per_worker):
                seconds, events, first = await turn(client, context_id)
                latencies.append(seconds)
                firsts.append(first)
                counts.append(events)

        cpu_before = process_cpu(pid)
        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for number in range(concurrency):
                group.start_soon(worker, number)
        seconds = time.perf_counter() - start
        cpu_after = process_cpu(pid)
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    events = sum(counts) / len(counts)
    return Figures(wire, pace, concurrency, len(latencies), seconds, latencies, cpu, events, firsts)


def measure(
    wire: str, pace: str, storage: str, folder: Path, concurrency: int, turns: int
) -> Figures:
    target = folder / f"{wire}-{pace}-{concurrency}"
    command = [
        sys.executable,
        __file__,
        "--serve",
        pace,
        "--storage",
        storage,
        "--dir",
        str(target),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    try:
        if not url.startswith("http://"):
            raise RuntimeError("the bench server did not start")
        return anyio.run(load, url, wire, pace, concurrency, turns, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)


def report(rows: list[Figures]) -> None:
    print(
        f"{'wire':<7} {'pace':<6} {'conc':>4} {'turns':>6} {'turns/s':>9} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'first p50':>10} {'events':>7} {'CPU ms/turn':>12}"
    )
    for row in rows:
        cpu = row.cpu_ms_per_turn
        shown = "n/a" if cpu is None else f"{cpu:.2f}"
        print(
            f"{row.wire:<7} {row.pace:<6} {row.concurrency:>4} {row.turns:>6} "
            f"{row.per_second:>9.1f} {row.percentile(0.5):>8.2f} {row.percentile(0.99):>8.2f} "
            f"{row.percentile(0.5, row.firsts):>10.2f} {row.events_per_turn:>7.1f} {shown:>12}"
        )
    print()
    by_key = {(row.wire, row.pace, row.concurrency): row for row in rows}
    for pace in PACES:
        for concurrency in sorted({row.concurrency for row in rows}):
            native = by_key.get(("native", pace, concurrency))
            a2a = by_key.get(("a2a", pace, concurrency))
            if native is None or a2a is None:
                continue
            if a2a.cpu_ms_per_turn is None or not native.cpu_ms_per_turn:
                print(f"{pace} concurrency {concurrency}: CPU ratio n/a (no /proc)")
                continue
            ratio = a2a.cpu_ms_per_turn / native.cpu_ms_per_turn
            print(
                f"{pace:<6} concurrency {concurrency:>2}: a2a/native server CPU per turn = "
                f"{ratio:.2f}x (target <= 1.3x); turns/s {a2a.per_second / native.per_second:.2f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=320, help="measured turns per row")
    parser.add_argument("--storage", choices=("memory", "file"), default="memory")
    parser.add_argument("--dir", type=Path, default=None, help="session folder (default: temp)")
    parser.add_argument("--serve", choices=tuple(PACES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.storage, args.dir)
        return
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        rows = [
            measure(wire, pace, args.storage, Path(tmp), concurrency, args.turns)
            for pace in PACES
            for concurrency in (1, 32)
            for wire in WIRES
        ]
    print(
        f"{TOKENS} tokens per turn, {args.turns} measured turns per row, storage "
        f"{args.storage}, {os.cpu_count()} CPUs"
    )
    report(rows)


if __name__ == "__main__":
    main()
