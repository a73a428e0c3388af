"""What an A2A streaming turn costs the server on each transport, beside a native turn.

One server process per row (uvicorn, one worker, loopback; gRPC on a free port of its
own), serving one ScriptedModel agent that answers every turn with 50 tokens; the load
generator (this process) sends turns over one of the four wires of that same app:

- native: ``POST /agents/bench/stream``, read to the ``done`` frame (as bench/serve.py);
- jsonrpc: JSON-RPC ``SendStreamingMessage`` to ``/agents/bench/a2a``, read to the end
  of the SSE stream (the Task, status updates, artifact chunks, the final status);
- rest: HTTP+JSON ``POST /agents/bench/a2a/v1/message:stream``, the same events as
  StreamResponse objects on SSE;
- grpc: the ``SendStreamingMessage`` RPC (grpc.aio client), the same events as
  protobuf messages;
- grpc-floor (burst only): the same RPC against a bare grpc.aio servicer that streams
  four prebuilt messages, as a burst turn does (bench/_grpc_floor.py): grpcio's own
  cost per call, which the gRPC row cannot go under. What the gRPC turn costs beyond
  it is printed beside the native turn.

Two token paces, because the A2A binding turns every batch of token frames that arrive
together into one artifact chunk (the native wire writes such a batch in one write too):

- burst: the model yields its 50 deltas without pausing (a fast local model), so a
  turn's tokens mostly travel as one chunk on both wires;
- paced: the model sleeps 0.2 ms between deltas (tokens arriving one by one, as from a
  remote model), so each token is its own frame and its own A2A artifact update.

Storage is in memory by default (the server's own cost); ``--storage file`` adds the
fsynced session writes of a LocalFileStorage (and, for A2A, the task index line, which
is appended without an fsync so that it never delays the first frame).
Each client worker keeps its own context and its own connection, so at concurrency 32 no
turn waits for another.

Server CPU per turn is utime + stime of the server process (all threads) from
``/proc/<pid>/stat`` around the measured turns, divided by the turns; n/a without /proc.

Every row is measured ``--rounds`` times (3 by default), one round after another, each
row on a fresh server. A ratio is taken within its round (against that round's native
row), and the figure is the median over the rounds, printed with each round's: on a
loaded 2-core machine one round's rows swing by up to 2x, every wire alike.

Run ``.venv/bin/python bench/a2a.py [--turns N] [--rounds R] [--storage memory|file]
[--wires ...]``. Prints the figures, each A2A transport's CPU per turn as a ratio of the
native wire's at the same pace and concurrency (target: <= 1.3x), and the time to the
first frame (which no fsync may delay) beside the native wire's; never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import anyio
import httpx

from agentkeel.sse import aiter_sse

TOKENS = 50
TOKEN_TEXT = "tok "
WARMUP_TURNS = 30
PACES = {"burst": 0.0, "paced": 0.0002}
WIRES = ("native", "jsonrpc", "rest", "grpc", "grpc-floor")
A2A_WIRES = ("jsonrpc", "rest", "grpc")
VERSION = {"A2A-Version": "1.0"}
ONE = httpx.Limits(max_connections=1, max_keepalive_connections=1)
"""Each client worker has a client of its own, with one connection: httpx's shared pool
scans (and polls) every idle connection on each request, which at concurrency 32 made the
load generator, not the server, the bottleneck of a wire that keeps its connections."""


# -- the server (in the subprocess) -------------------------------------------------------


def unshadow_sdk() -> None:
    """Take this file's folder off sys.path before importing the SDK.

    This file is named a2a.py: with its folder on sys.path (as when run as a script),
    ``import a2a`` would find it instead of the a2a SDK, in the server and in the gRPC
    client alike.
    """
    here = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != here]


def serve(pace: str, storage_kind: str, folder: Path) -> None:
    """The subprocess: serve the bench agent on a free loopback port; print the URL."""
    unshadow_sdk()
    import asyncio

    import uvicorn

    from agentkeel import Agent, ScriptedModel, ScriptedTurn
    from agentkeel.framework import AgentDefinition, Catalog, Framework
    from agentkeel.server import create_app
    from agentkeel.server_settings import A2ASettings, ServerSettings
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
    settings = ServerSettings(a2a=A2ASettings(grpc_port=0))  # 0: a free port
    framework = Framework(definitions={"bench": definition}, storage=storage, server=settings)
    app = create_app(framework)
    config = uvicorn.Config(  # idle connections kept a minute: no reuse-while-closing race
        app,
        host="127.0.0.1",
        port=0,
        workers=1,
        lifespan="on",
        log_level="warning",
        timeout_keep_alive=60,
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


def a2a_message(context_id: str) -> dict[str, object]:
    """A user message in ProtoJSON, for the JSON-RPC and HTTP+JSON wires."""
    return {
        "role": "ROLE_USER",
        "messageId": f"m-{time.monotonic_ns()}",
        "contextId": context_id,
        "parts": [{"text": "go"}],
    }


async def sse_a2a_turn(
    client: httpx.AsyncClient, path: str, body: dict[str, object], unwrap: bool
) -> Turn:
    """One streamed A2A turn over SSE; `unwrap`: each event is a JSON-RPC response."""
    start = time.perf_counter()
    events, last, first = 0, "", 0.0
    async with client.stream("POST", path, json=body, headers=VERSION) as response:
        async for frame in aiter_sse(response.aiter_bytes()):
            first = first or time.perf_counter() - start
            events += 1
            last = frame.data
    if "TASK_STATE_COMPLETED" not in last:
        raise RuntimeError(f"an A2A turn did not end completed: {last[:200]}")
    final = json.loads(last)
    assert "statusUpdate" in (final["result"] if unwrap else final)
    return time.perf_counter() - start, events, first


async def jsonrpc_turn(client: httpx.AsyncClient, context_id: str) -> Turn:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": a2a_message(context_id)},
    }
    return await sse_a2a_turn(client, "/agents/bench/a2a", body, unwrap=True)


async def rest_turn(client: httpx.AsyncClient, context_id: str) -> Turn:
    body: dict[str, object] = {"message": a2a_message(context_id)}
    return await sse_a2a_turn(client, "/agents/bench/a2a/v1/message:stream", body, unwrap=False)


class GrpcWire:
    """The gRPC client of one row: one channel (HTTP/2 multiplexes the workers' calls)."""

    def __init__(self, target: str) -> None:
        unshadow_sdk()
        import grpc.aio
        from a2a.types import a2a_pb2, a2a_pb2_grpc

        self.pb = a2a_pb2
        self.channel = grpc.aio.insecure_channel(target)
        self.stub = a2a_pb2_grpc.A2AServiceStub(self.channel)  # type: ignore[no-untyped-call]

    async def turn(self, client: httpx.AsyncClient, context_id: str) -> Turn:
        del client
        pb = self.pb
        message = pb.Message(
            role=pb.ROLE_USER,
            message_id=f"m-{time.monotonic_ns()}",
            context_id=context_id,
            parts=[pb.Part(text="go")],
        )
        request = pb.SendMessageRequest(message=message, tenant="bench")
        start = time.perf_counter()
        events, first, state = 0, 0.0, 0
        call = self.stub.SendStreamingMessage(request, metadata=(("a2a-version", "1.0"),))
        async for item in call:
            first = first or time.perf_counter() - start
            events += 1
            if item.HasField("status_update"):
                state = item.status_update.status.state
        if state != pb.TASK_STATE_COMPLETED:
            raise RuntimeError(f"a gRPC turn did not end completed (state {state})")
        return time.perf_counter() - start, events, first


async def grpc_target(client: httpx.AsyncClient) -> str:
    """The gRPC address the agent card declares."""
    card = (await client.get("/agents/bench/a2a/.well-known/agent-card.json")).json()
    for interface in card["supportedInterfaces"]:
        if interface["protocolBinding"] == "GRPC":
            return str(interface["url"])
    raise RuntimeError("the bench server's card declares no gRPC interface")


async def load(url: str, wire: str, pace: str, concurrency: int, turns: int, pid: int) -> Figures:
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx.AsyncClient(base_url=url, timeout=60, limits=ONE)
        )
        grpc_wire = None
        if wire in ("grpc", "grpc-floor"):  # the floor's process prints its gRPC address
            grpc_wire = GrpcWire(url if wire == "grpc-floor" else await grpc_target(client))
        turn: Callable[[httpx.AsyncClient, str], Awaitable[Turn]] = (
            native_turn
            if wire == "native"
            else jsonrpc_turn
            if wire == "jsonrpc"
            else rest_turn
            if wire == "rest"
            else cast(GrpcWire, grpc_wire).turn
        )
        for index in range(min(WARMUP_TURNS, turns)):
            await turn(client, f"ctx-warmup-{index % 4}")
        latencies: list[float] = []
        firsts: list[float] = []
        counts: list[int] = []
        per_worker = max(1, turns // concurrency)

        # built before the clock starts: each client builds an SSL context (milliseconds)
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=60, limits=ONE))
            for _ in range(concurrency)
        ]

        async def worker(number: int) -> None:
            context_id = f"ctx-{wire}-{concurrency}-{number}"
            for _ in range(per_worker):
                seconds, events, first = await turn(clients[number], context_id)
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
        if grpc_wire is not None:
            await grpc_wire.channel.close()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    events = sum(counts) / len(counts)
    return Figures(wire, pace, concurrency, len(latencies), seconds, latencies, cpu, events, firsts)


def measure(
    wire: str, pace: str, storage: str, folder: Path, concurrency: int, turns: int
) -> Figures:
    target = folder / f"{wire}-{pace}-{concurrency}"
    serving = ["--serve", pace, "--storage", storage, "--dir", str(target)]
    command = [sys.executable, __file__, *(["--serve-floor"] if wire == "grpc-floor" else serving)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    try:
        if not url.startswith("127.0.0.1:" if wire == "grpc-floor" else "http://"):
            raise RuntimeError("the bench server did not start")
        return anyio.run(load, url, wire, pace, concurrency, turns, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)


def report(rounds: list[list[Figures]]) -> None:
    """Each round's table, then each ratio per round and its median over the rounds.

    Ratios are taken within a round (the baseline measured beside the row), then the
    median: one round's rows swing by up to 2x on a loaded 2-core machine, every wire
    alike, so a single round's ratio says less than the rounds' spread.
    """
    print(
        f"{'round':>5} {'wire':<10} {'pace':<6} {'conc':>4} {'turns':>6} {'turns/s':>9} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'first p50':>10} {'events':>7} {'CPU ms/turn':>12}"
    )
    for number, rows in enumerate(rounds, 1):
        for row in rows:
            cpu = row.cpu_ms_per_turn
            shown = "n/a" if cpu is None else f"{cpu:.2f}"
            print(
                f"{number:>5} {row.wire:<10} {row.pace:<6} {row.concurrency:>4} {row.turns:>6} "
                f"{row.per_second:>9.1f} {row.percentile(0.5):>8.2f} "
                f"{row.percentile(0.99):>8.2f} {row.percentile(0.5, row.firsts):>10.2f} "
                f"{row.events_per_turn:>7.1f} {shown:>12}"
            )
    print()
    keyed = [{(row.wire, row.pace, row.concurrency): row for row in rows} for rows in rounds]
    for pace in PACES:
        for concurrency in sorted({row.concurrency for row in rounds[0]}):
            for wire in A2A_WIRES:
                paired = [
                    (by_key[(wire, pace, concurrency)], by_key[("native", pace, concurrency)],
                     by_key.get(("grpc-floor", pace, concurrency)) if wire == "grpc" else None)
                    for by_key in keyed
                    if (wire, pace, concurrency) in by_key
                    and ("native", pace, concurrency) in by_key
                ]  # fmt: skip
                if paired:
                    print_ratios(f"{pace:<6} concurrency {concurrency:>2} {wire:<7}", paired)


def print_ratios(label: str, paired: list[tuple[Figures, Figures, Figures | None]]) -> None:
    """One wire's figures against the native wire's: the median over the rounds.

    `paired`: per round, the wire's row, the native row, and the grpcio floor's (gRPC).
    """
    median = statistics.median
    first = (
        f"first frame p50 {median([a2a.percentile(0.5, a2a.firsts) for a2a, _, _ in paired]):.2f}"
        f" ms vs native {median([n.percentile(0.5, n.firsts) for _, n, _ in paired]):.2f} ms"
    )
    cpus = [(a2a.cpu_ms_per_turn, native.cpu_ms_per_turn) for a2a, native, _ in paired]
    known = [(a2a, native) for a2a, native in cpus if a2a is not None and native]
    if len(known) < len(cpus):
        print(f"{label}: CPU ratio n/a (no /proc); {first}")
        return
    ratios = [a2a / native for a2a, native in known]
    ratio = median(ratios)
    print(
        f"{label}: server CPU per turn {median([a2a for a2a, _ in known]):.2f} ms vs native "
        f"{median([native for _, native in known]):.2f} ms = {ratio:.2f}x median (target "
        f"<= 1.3x: {'ok' if ratio <= 1.3 else 'over'}; rounds "
        f"{', '.join(f'{each:.2f}' for each in ratios)}); turns/s "
        f"{median([a2a.per_second / native.per_second for a2a, native, _ in paired]):.2f}x; "
        f"{first}"
    )
    floors = [
        (floor.cpu_ms_per_turn, a2a, native)
        for (a2a, native), (_, _, floor) in zip(known, paired, strict=True)
        if floor is not None and floor.cpu_ms_per_turn is not None
    ]
    if floors:
        print(
            f"{label}: of which grpcio's own (a bare grpc.aio servicer, the same messages) "
            f"{median([floor for floor, _, _ in floors]):.2f} ms = "
            f"{median([floor / native for floor, _, native in floors]):.2f}x native; the turn "
            f"beyond it {median([(a2a - floor) / native for floor, a2a, native in floors]):.2f}x"
            " native (medians over the rounds)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=320, help="measured turns per row")
    parser.add_argument("--storage", choices=("memory", "file"), default="memory")
    parser.add_argument("--dir", type=Path, default=None, help="session folder (default: temp)")
    parser.add_argument("--serve", choices=tuple(PACES), help=argparse.SUPPRESS)
    parser.add_argument("--serve-floor", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--wires", nargs="+", choices=WIRES, default=list(WIRES), help="native is the baseline"
    )
    parser.add_argument("--paces", nargs="+", choices=tuple(PACES), default=list(PACES))
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 32])
    parser.add_argument(
        "--rounds", type=int, default=3, help="every row again, in order; ratios are medians"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.serve:
        serve(args.serve, args.storage, args.dir)
        return
    if args.serve_floor:
        from _grpc_floor import serve_floor

        unshadow_sdk()
        serve_floor(TOKEN_TEXT * TOKENS)
        return
    rounds = []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            rounds.append(
                [
                    measure(wire, pace, args.storage, Path(tmp), concurrency, args.turns)
                    for pace in args.paces
                    for concurrency in args.concurrency
                    for wire in args.wires
                    if wire != "grpc-floor" or pace == "burst"
                ]
            )
    print(
        f"{TOKENS} tokens per turn, {args.turns} measured turns per row, {args.rounds} rounds, "
        f"storage {args.storage}, {os.cpu_count()} CPUs"
    )
    report(rounds)


if __name__ == "__main__":
    main()
