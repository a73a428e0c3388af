"""What serving a turn costs: agentkeel against a bare Starlette SSE endpoint (the floor).

Both servers run in a subprocess with uvicorn (one worker, the same HTTP implementation)
on loopback, and the load generator (httpx) runs in this process:

- floor: a bare Starlette route that reads the JSON body and streams 50 SSE frames of
  the same shape and size as agentkeel's token frames, then a done frame;
- agentkeel: `create_app` over a ScriptedModel that streams 50 tokens, with
  LocalFileStorage on (each turn appends its run record to runs.jsonl and its messages
  to messages.jsonl, each one fsynced write, and overwrites the retained frames in
  place, unsynced: no file is created per turn);
- ak-memory: the same with InMemoryStorage, which separates the server's own cost from
  the cost of the disk writes (on ext4 creating a file costs 0.3-0.6 ms of kernel CPU,
  which is why the file backend creates none per turn);
- one row per binding of SPEC 10 (ak-openai: a streamed Chat Completion in a
  conversation kept by X-Conversation-Id; ak-agui: an AG-UI run from a client that
  keeps and sends the thread's messages as ``HttpAgent`` does (`Copies`), so that
  the server sends a snapshot only on a thread's first run;
  ak-ai-sdk: a `DefaultChatTransport` turn, its UI message stream read to ``[DONE]``),
  the ak-memory server answering in that protocol, compared with ak-memory (target:
  within 1.3x of the native wire).

Each client worker has its own context, so at concurrency 32 there are 32 conversations
and none of their turns wait for each other.

Server CPU per turn is read from ``/proc/<pid>/stat`` (utime + stime of the whole server
process, every thread included, so the storage's worker threads count) before and after
the measured turns, divided by the number of turns. That excludes start-up and the
warm-up turns and, unlike wall-clock time, does not depend on how busy the load
generator keeps the machine. Without /proc (not Linux) CPU is reported as n/a.

With PostgreSQL (``--postgres URL``, default: the local server's ``test`` database when
one listens) the ak-postgres row runs on PostgresStorage, with the postmaster's CPU per
turn beside it (every ``postgres`` process, from /proc), and a server of its own then
counts PostgreSQL round trips per plain, tool and approval turn through a loopback
forwarder (each burst the server sends after an answer is one trip; bench/_trips.py),
apart from the CPU figures.

Every row is measured ``--rounds`` times (3 by default), round after round, each on a
fresh server (and, on PostgreSQL, a schema of its round's); a ratio is taken within its
round and the figure is the median over the rounds, printed with each round's.

Run with ``.venv/bin/python bench/serve.py [--turns N] [--rounds R] [--dir PATH]``. Prints
numbers and the agentkeel/floor CPU ratio (target: within 2x; 2.5x on PostgreSQL); never
asserts.
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
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx

from agentkeel.messages import JSONObject
from agentkeel.sse import aiter_sse, encode_frame

MEMORY = "ak-memory"
POSTGRES = "ak-postgres"
OPENAI = "ak-openai"
AGUI = "ak-agui"
AI_SDK = "ak-ai-sdk"
BINDINGS = (OPENAI, AGUI, AI_SDK)
"""Scenarios served by the ak-memory server, through another binding."""
SCENARIOS = ("floor", "agentkeel", MEMORY, POSTGRES, *BINDINGS)
TRIPS = "ak-postgres-trips"
"""Served only to count round trips (`_trips.trips_app`), never measured for CPU."""
POSTGRES_ENV = "AGENTKEEL_BENCH_POSTGRES"
LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
TOKENS = 50
TOKEN_TEXT = "tok "
WARMUP_TURNS = 30


# -- the servers (in the subprocess) ------------------------------------------------------


def floor_app() -> object:
    """A bare Starlette SSE endpoint: parse the body, stream 50 frames and a done frame."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def stream(request: Request) -> StreamingResponse:
        body = await request.json()
        context_id = body.get("contextId", "ctx-floor")

        async def frames() -> AsyncIterator[bytes]:
            run_id = "run-" + os.urandom(12).hex()
            for index in range(TOKENS):
                data = {
                    "contextId": context_id,
                    "runId": run_id,
                    "event": {"type": "token", "text": TOKEN_TEXT},
                }
                yield encode_frame(json.dumps(data, separators=(",", ":")), id=index + 1)
            done = {"contextId": context_id, "runId": run_id, "done": True, "status": "completed"}
            yield encode_frame(json.dumps(done, separators=(",", ":")), id=TOKENS + 1)

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[Route("/agents/bench/stream", stream, methods=["POST"])])


LISTED_DEFINITIONS = ("bench-list-10", "bench-list-10000")
"""The definitions of the context list rows (`_transcript.listed_definition` of each size;
the served process has no bench/ on its path to import it from)."""


def agentkeel_app(folder: Path, *, memory: bool, postgres: str = "") -> object:
    """agentkeel serving one ScriptedModel agent, with sessions saved to `folder`."""
    from agentkeel import Agent, ScriptedModel
    from agentkeel.framework import AgentDefinition, Catalog, Framework
    from agentkeel.server import create_app
    from agentkeel.storage.base import SessionStorage
    from agentkeel.storage.file import LocalFileStorage
    from agentkeel.storage.memory import InMemoryStorage

    def factory(context_id: str) -> Agent:
        del context_id
        model = ScriptedModel([TOKEN_TEXT * TOKENS], chunk_size=len(TOKEN_TEXT), repeat=True)
        return Agent(model, name="bench")

    names = ["bench", *LISTED_DEFINITIONS]
    definitions = {
        name: AgentDefinition(name=name, factory=factory, catalog=Catalog(description="bench"))
        for name in names
    }
    storage: SessionStorage = InMemoryStorage() if memory else LocalFileStorage(folder)
    if postgres:
        from agentkeel.storage.postgres import from_url

        storage = from_url(postgres, None)
    framework = Framework(definitions=definitions, storage=storage)
    return create_app(framework)


def serve(kind: str, folder: Path) -> None:
    """The subprocess: serve `kind` on a free loopback port and print the URL."""
    import asyncio

    import uvicorn

    postgres = os.environ.get(POSTGRES_ENV, "") if kind in (POSTGRES, TRIPS) else ""
    if kind == TRIPS:
        sys.path.append(str(Path(__file__).resolve().parent))  # after the a2a SDK
        from _trips import trips_app

        app = trips_app(postgres)
    elif kind == "floor":
        app = floor_app()
    else:
        app = agentkeel_app(folder, memory=kind in (MEMORY, *BINDINGS), postgres=postgres)
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host="127.0.0.1",
        port=0,
        workers=1,
        lifespan="on",
        log_level="warning",
        access_log=False,
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
    scenario: str
    concurrency: int
    turns: int
    seconds: float
    latencies: list[float]
    cpu_seconds: float | None
    db_cpu_seconds: float | None = None

    @property
    def per_second(self) -> float:
        return self.turns / self.seconds

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000

    @property
    def cpu_ms_per_turn(self) -> float | None:
        return None if self.cpu_seconds is None else self.cpu_seconds / self.turns * 1000

    @property
    def db_cpu_ms_per_turn(self) -> float | None:
        return None if self.db_cpu_seconds is None else self.db_cpu_seconds / self.turns * 1000


def process_cpu(pid: int) -> float | None:
    """utime + stime of `pid` (all its threads) in seconds, from /proc; None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu() -> float | None:
    """utime + stime of every ``postgres`` process (the postmaster's tree), from /proc."""
    total = 0.0
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, _, rest = raw.partition("(")[2].rpartition(")")
        if name == "postgres":
            fields = rest.split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


class Copies:
    """An AG-UI client's copies of its threads, kept the way ``HttpAgent`` keeps them.

    The ak-agui row sends what ``HttpAgent`` sends: the thread's whole message list (the
    server's snapshot when one came, the user's messages, the assistant texts streamed
    to it) and the new message, so that the cost per run is measured for a client in
    step with the server, as a page that stays open is. Counts the snapshots it got.
    """

    def __init__(self) -> None:
        self.threads: dict[str, list[dict[str, Any]]] = {}
        self.runs = 0
        self.snapshots = 0

    def body(self, thread: str, text: str) -> dict[str, Any]:
        """The RunAgentInput of a new user message on `thread`."""
        self.runs += 1
        messages = self.threads.setdefault(thread, [])
        messages.append({"id": os.urandom(8).hex(), "role": "user", "content": text})
        return {"threadId": thread, "runId": os.urandom(8).hex(), "messages": list(messages)}

    def apply(self, thread: str, data: str) -> None:
        """One event of a run on `thread`, applied to its copy."""
        event = json.loads(data)
        kind = event.get("type")
        messages = self.threads[thread]
        if kind == "MESSAGES_SNAPSHOT":
            self.snapshots += 1
            sent = {item["id"]: item for item in event["messages"]}
            kept = [sent[m["id"]] for m in messages if m["id"] in sent]
            held = {m["id"] for m in kept}
            self.threads[thread] = kept + [m for i, m in sent.items() if i not in held]
        elif kind == "TEXT_MESSAGE_START":
            role = event.get("role") or "assistant"
            messages.append({"id": event["messageId"], "role": role, "content": ""})
        elif kind == "TEXT_MESSAGE_CONTENT":
            found = next(m for m in reversed(messages) if m["id"] == event["messageId"])
            found["content"] += event["delta"]


AGUI_COPIES = Copies()
"""The ak-agui client's threads, each sent whole with every run (as HttpAgent does)."""


def _request(scenario: str, context_id: str) -> tuple[str, JSONObject, dict[str, str], str]:
    """Path, body, headers and the text that ends the stream, in the scenario's protocol."""
    if scenario == OPENAI:
        body: JSONObject = {
            "model": "bench",
            "messages": [{"role": "user", "content": "go"}],
            "stream": True,
        }
        return "/v1/chat/completions", body, {"x-conversation-id": context_id}, "[DONE]"
    if scenario == AGUI:
        return "/agents/bench/ag-ui", AGUI_COPIES.body(context_id, "go"), {}, '"RUN_FINISHED"'
    if scenario == AI_SDK:
        message: JSONObject = {
            "id": os.urandom(8).hex(),
            "role": "user",
            "parts": [{"type": "text", "text": "go"}],
        }
        body = {"id": context_id, "messages": [message], "trigger": "submit-message"}
        return "/agents/bench/ai-sdk", body, {}, "[DONE]"
    return "/agents/bench/stream", {"message": "go", "contextId": context_id}, {}, '"done":true'


async def one_turn(client: httpx.AsyncClient, context_id: str, scenario: str = "") -> float:
    start = time.perf_counter()
    path, body, headers, last = _request(scenario, context_id)
    async with client.stream("POST", path, json=body, headers=headers) as response:
        frames = 0
        async for frame in aiter_sse(response.aiter_bytes()):
            frames += 1
            if scenario == AGUI:
                AGUI_COPIES.apply(context_id, frame.data)
            if last in frame.data:
                break
    if frames < TOKENS + 1:
        raise RuntimeError(f"a turn streamed only {frames} frames")
    return time.perf_counter() - start


async def load(url: str, concurrency: int, turns: int, pid: int, scenario: str) -> Figures:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        for index in range(min(WARMUP_TURNS, turns)):
            await one_turn(client, f"ctx-warmup-{concurrency}-{index % 4}", scenario)
        latencies: list[float] = []
        per_worker = max(1, turns // concurrency)

        async def worker(number: int) -> None:
            context_id = f"ctx-{scenario}-{concurrency}-{number}"
            for _ in range(per_worker):
                latencies.append(await one_turn(client, context_id, scenario))

        cpu_before, db_before = process_cpu(pid), postgres_cpu()
        start = time.perf_counter()
        async with anyio.create_task_group() as group:
            for number in range(concurrency):
                group.start_soon(worker, number)
        seconds = time.perf_counter() - start
        cpu_after, db_after = process_cpu(pid), postgres_cpu()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    db = None if db_before is None or db_after is None else db_after - db_before
    db = db if scenario == POSTGRES else None
    return Figures(scenario, concurrency, len(latencies), seconds, latencies, cpu, db)


def start_server(kind: str, folder: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        # -P: bench/ must not be on sys.path, or bench/a2a.py would shadow the a2a SDK
        [sys.executable, "-P", __file__, "--serve", kind, "--dir", str(folder)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http://"):
        process.kill()
        raise RuntimeError(f"the {kind} server did not start")
    return process, url


def measure(kind: str, folder: Path, concurrency: int, turns: int) -> Figures:
    process, url = start_server(kind, folder / f"{kind}-{concurrency}")
    try:
        return anyio.run(load, url, concurrency, turns, process.pid, kind)
    finally:
        process.terminate()
        process.wait(timeout=30)


def count_trips(url: str, folder: Path) -> Any:
    """PostgreSQL round trips per kind of turn (`_trips.TripCounts`), on a server of its own."""
    from urllib.parse import urlsplit

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # `make bench` runs with -P
    from _postgres import CountingForwarder, through
    from _trips import count_turns

    parts = urlsplit(url)
    forwarder = CountingForwarder(parts.hostname or "127.0.0.1", parts.port or 5432)
    previous = os.environ[POSTGRES_ENV]
    os.environ[POSTGRES_ENV] = through(url, forwarder)
    try:
        process, server = start_server(TRIPS, folder / "trips")
        try:
            return anyio.run(count_turns, server, lambda: forwarder.sends)
        finally:
            process.terminate()
            process.wait(timeout=30)
    finally:
        os.environ[POSTGRES_ENV] = previous
        forwarder.close()


def report(rounds: list[list[Figures]]) -> None:
    """Each round's table, then each ratio per round and its median over the rounds."""
    print(
        f"{'round':>5} {'scenario':<10} {'conc':>4} {'turns':>6} {'turns/s':>9} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'CPU ms/turn':>12} {'postgres CPU':>12}"
    )
    for number, rows in enumerate(rounds, 1):
        for row in rows:
            cpu, db = row.cpu_ms_per_turn, row.db_cpu_ms_per_turn
            shown = "n/a" if cpu is None else f"{cpu:.2f}"
            db_shown = "" if db is None else f"{db:.2f}"
            print(
                f"{number:>5} {row.scenario:<11} {row.concurrency:>4} {row.turns:>6} "
                f"{row.per_second:>9.1f} {row.percentile(0.5):>8.2f} "
                f"{row.percentile(0.99):>8.2f} {shown:>12} {db_shown:>12}"
            )
    print()
    keyed = [{(row.scenario, row.concurrency): row for row in rows} for rows in rounds]
    for concurrency in sorted({row.concurrency for row in rounds[0]}):
        for scenario in SCENARIOS[1:]:
            name, target = (MEMORY, 1.3) if scenario in BINDINGS else ("floor", 2.0)
            target = 2.5 if scenario == POSTGRES else target
            pairs = [
                (by_key[(scenario, concurrency)], by_key[(name, concurrency)])
                for by_key in keyed
                if (scenario, concurrency) in by_key and (name, concurrency) in by_key
            ]
            if not pairs:
                continue
            cpus = [(ours.cpu_ms_per_turn, base.cpu_ms_per_turn) for ours, base in pairs]
            known = [(ours, base) for ours, base in cpus if ours is not None and base]
            if len(known) < len(cpus):
                print(f"concurrency {concurrency}: CPU ratio n/a (no /proc)")
                continue
            ratios = [ours / base for ours, base in known]
            ratio = statistics.median(ratios)
            latency = statistics.median(
                [ours.percentile(0.5) / base.percentile(0.5) for ours, base in pairs]
            )
            print(
                f"concurrency {concurrency:>2}: {scenario}/{name} server CPU per turn = "
                f"{ratio:.2f}x median (target <= {target:g}x: "
                f"{'ok' if ratio <= target else 'over'}; rounds "
                f"{', '.join(f'{each:.2f}' for each in ratios)}); latency p50 {latency:.2f}x"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=320, help="measured turns per scenario")
    parser.add_argument("--dir", type=Path, default=None, help="session folder (default: temp)")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL ('' for none)")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated scenarios to run (default: all of them; 'transcript': only"
        " the transcript page and context list rows)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="every row again, in order; ratios are medians"
    )
    parser.add_argument("--serve", choices=(*SCENARIOS, TRIPS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.serve:
        serve(args.serve, args.dir)
        return
    postgres = LOCAL_POSTGRES if args.postgres is None and _listening(5432) else args.postgres
    chosen = {name.strip() for name in args.only.split(",") if name.strip()} or set(SCENARIOS)
    kinds = [kind for kind in SCENARIOS if kind in chosen and (kind != POSTGRES or postgres)]
    schema = f"bench_serve_{os.getpid()}"
    if chosen == {"transcript"}:
        transcript_rows(postgres, f"{schema}_pages")
        return
    rounds, trips = [], None
    try:
        for number in range(args.rounds):
            if postgres:  # a schema per round: no round's contexts hold an earlier one's turns
                joiner = "&" if "?" in postgres else "?"
                os.environ[POSTGRES_ENV] = f"{postgres}{joiner}schema={schema}_{number}"
            with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
                rounds.append(
                    [
                        measure(kind, Path(tmp), concurrency, args.turns)
                        for concurrency in (1, 32)
                        for kind in kinds
                    ]
                )
                if postgres and trips is None:
                    trips = count_trips(os.environ[POSTGRES_ENV], Path(tmp))
    finally:
        for number in range(args.rounds) if postgres else ():
            _drop_schema(postgres, f"{schema}_{number}")
    print(
        f"{TOKENS} tokens per turn, {args.turns} measured turns per row, {args.rounds} rounds, "
        f"{os.cpu_count()} CPUs"
    )
    report(rounds)
    if AGUI in kinds:
        print(
            f"ak-agui: {AGUI_COPIES.snapshots} of {AGUI_COPIES.runs} runs (warm-up included)"
            " came with a MESSAGES_SNAPSHOT"
        )
    if trips is not None:
        from _trips import report_trips

        report_trips(trips)
    transcript_rows(postgres, f"{schema}_pages")


def transcript_rows(postgres: str, schema: str) -> None:
    """The transcript row: a page of 10 and of 10,000 messages, files and PostgreSQL."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # `make bench` runs with -P
    from _transcript import TranscriptFigures, file_marks, fill_histories, report_pages, run_pages

    rows: list[TranscriptFigures] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "transcript"
        marks = file_marks(folder)
        process, url = start_server("agentkeel", folder)
        try:
            rows += run_pages(url, "agentkeel", marks, lambda: process_cpu(process.pid))
        finally:
            process.terminate()
            process.wait(timeout=30)
    if postgres:
        from agentkeel.storage.postgres import from_url

        joiner = "&" if "?" in postgres else "?"
        os.environ[POSTGRES_ENV] = f"{postgres}{joiner}schema={schema}"
        marks = anyio.run(fill_histories, from_url(os.environ[POSTGRES_ENV], None))
        process, url = start_server(POSTGRES, Path(tempfile.gettempdir()))
        try:
            rows += run_pages(url, POSTGRES, marks, lambda: process_cpu(process.pid))
        finally:
            process.terminate()
            process.wait(timeout=30)
            _drop_schema(postgres, schema)
    report_pages(rows)


def _listening(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


if __name__ == "__main__":
    main()
