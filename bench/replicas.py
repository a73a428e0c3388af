"""What coordination costs per turn, and how fast a replica takes over a killed one.

Three deployments serve the same streamed turns (20 tokens each, four conversations
sent round-robin over the replicas, so that with 3 processes every turn lands on a
replica whose cached Agent is behind), each ``agentkeel serve`` in a subprocess:

- baseline: 1 process, PostgreSQL storage, in-process coordination;
- redis-1: 1 process, PostgreSQL storage, Redis coordination (lease in PostgreSQL);
- redis-3: 3 processes on one port each, the same storage and coordination;
- baseline-3: 3 processes with in-process coordination, each conversation pinned to one
  replica (as sticky sessions would route it: no context is shared, so nothing needs
  coordinating). It costs what 3 processes sharing this machine's cores cost, with no
  coordination: fewer turns in flight per process (each wakes up for every step of its
  own turns instead of serving several at once), and the processes taking turns on the
  cores. ``redis-3 / baseline-3`` is what coordination adds at the same process count;
  ``redis-3 / baseline`` (the target's ratio) holds both;
- baseline-long and redis-3-long: the first and the last again, on conversations that
  already hold ``--history`` turns (stored before the servers start): a cost per turn,
  a round-trip count or a command count that grows with the history shows here.

Each deployment has conversations of its own, and warms each of them up on every
replica before the measured turns (a replica's first sight of a conversation loads it
whole, once).

For each it prints the server CPU per turn (utime + stime of every server process from
``/proc``, around the measured turns only), PostgreSQL's and Redis's CPU per turn (their
processes' CPU over the same span: the servers are shared with whatever else runs on
the machine, so these are upper bounds), PostgreSQL round trips per turn (counted by a
loopback forwarder every replica connects through) and Redis commands per turn and
per streamed frame (``INFO`` deltas, server-wide; the XADDs, SETs, EXPIREs, PUBLISHes
and pointer GETs the fan-out's script runs count there, the commands clients sent are
the rest: these turns send nothing else of those five), each process's idle CPU (watched
for a few seconds after the warm-up, before the measured turns) and what that rate
comes to per turn over the measured span (background work, not any turn's), and the
ratio of each deployment's server CPU to the baseline's (target: at most 1.5x).

Every deployment is measured ``--rounds`` times (3 by default), round after round, each
on fresh processes. A ratio is taken within its round, against the baseline measured
beside it, and the figure is the median over the rounds, printed with each round's: on
a loaded 2-core machine one round's figures swing by up to a third, every deployment
alike.

Then the takeover: a replica runs a long tool, is SIGKILLed, and another replica runs
the context; over ``--kills`` kills it prints the distribution of the time from the
kill to the other replica's answer, against the lease time (``--lease``, short here so
the run stays short; the default deployment lease is 15 s).

Run with ``.venv/bin/python bench/replicas.py [--turns N] [--rounds R] [--kills K]
[--lease S] [--history H]``
(PostgreSQL at AGENTKEEL_BENCH_POSTGRES or 127.0.0.1:5432, Redis at
AGENTKEEL_BENCH_REDIS or 127.0.0.1:6379/14). Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
import psycopg
import redis
from psycopg import sql

from agentkeel import Agent, ScriptedModel, ScriptedToolCall, ScriptedTurn, tool
from agentkeel.models.base import ModelRequest
from agentkeel.sse import aiter_sse

HERE = Path(__file__).resolve().parent
POSTGRES = os.environ.get("AGENTKEEL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("AGENTKEEL_BENCH_REDIS", "redis://127.0.0.1:6379/14")
TOKENS = 20
CONTEXTS = 4
WARMUP_ROUNDS = 3
"""Warm-up turns per conversation and replica (the round-robin reaches every replica)."""
IDLE_SECONDS = 3.0
"""How long the warmed-up servers are watched idle, for their background CPU rate."""
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Counting(Protocol):
    """The round-trip counter every replica's PostgreSQL connections go through."""

    sends: int


# -- the agent the servers run (imported as ``replicas_bench:bench_agent``) ---------------


@tool
async def pause(seconds: float) -> str:
    """Wait, as a long tool would.

    Args:
        seconds: How long.
    """
    await anyio.sleep(seconds)
    return "paused"


def _answer(request: ModelRequest) -> ScriptedTurn:
    last = request.messages[-1]
    if last.tool_results:
        return ScriptedTurn(text="done")
    if last.text.startswith("pause"):
        return ScriptedTurn(tool_calls=[ScriptedToolCall("pause", {"seconds": 60.0})])
    return ScriptedTurn(text="".join(f"t{i:02d} " for i in range(TOKENS)))


def bench_agent(context_id: str) -> Agent:
    """A new Agent for one context: 20 token deltas per turn, or a long tool."""
    del context_id
    return Agent(ScriptedModel([_answer], repeat=True, chunk_size=4), tools=[pause], name="b")


# -- processes and counters ----------------------------------------------------------------


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of `pids` (0 for one that is gone)."""
    return sum(cpu_by_pid(pids).values())


def cpu_by_pid(pids: list[int]) -> dict[int, float]:
    """utime + stime of each of `pids` that is still there."""
    found = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (int(fields[11]) + int(fields[12])) / TICKS
    return found


def grown(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU the processes present both times used in between (one that exited counts 0)."""
    return sum(after[pid] - spent for pid, spent in before.items() if pid in after)


def named_pids(name: str) -> list[int]:
    """Every process whose command name is `name` (read only, to sum their CPU)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


SCRIPTED = ("xadd", "set", "expire", "publish", "get")
"""The commands the fan-out's script runs (counted by ``INFO`` as if a client sent them;
its ``GET`` reads the pointer it may replace: these turns send no ``GET`` of their own)."""


def redis_counters(client: redis.Redis) -> tuple[int, int, float, int]:
    """(commands processed, XADD calls, CPU seconds, calls of `SCRIPTED`) of Redis."""
    stats, commands, cpu = client.info("stats"), client.info("commandstats"), client.info("cpu")
    calls = {name: int(commands.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in SCRIPTED}
    used = float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])
    return int(stats["total_commands_processed"]), calls["xadd"], used, sum(calls.values())


class Server:
    """``agentkeel serve`` in a subprocess, stopped by its pid."""

    def __init__(self, framework: Path, index: int) -> None:
        self.out = framework.with_name(f"server-{index}.out")
        env = dict(os.environ)
        code = "import sys; from agentkeel.server.serve import serve_command; "
        code += "sys.exit(serve_command(sys.argv[1:]))"
        with self.out.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code, str(framework), "--port", "0"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = self.out.read_text()
            if " on http://" in text:
                self.url = text.split(" on ", 1)[1].split()[0]
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"the server did not start: {self.out.read_text()[-2000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def framework(folder: Path, storage: str, coordination: str | None) -> Path:
    path = folder / "framework.json"
    # the framework's folder is importable while it loads: the agent comes from a copy
    # of this file there (bench/ itself cannot be on the path: bench/a2a.py would shadow
    # the a2a package)
    shutil.copyfile(__file__, folder / "replicas_bench.py")
    document: dict[str, object] = {
        "agents": {"b": {"factory": "replicas_bench:bench_agent"}},
        "storage": storage,
        "server": {"ui": False},
    }
    if coordination is not None:
        document["coordination"] = coordination
    path.write_text(json.dumps(document))
    return path


# -- the turns -------------------------------------------------------------------------------


async def stream_turn(client: httpx.AsyncClient, url: str, context_id: str) -> int:
    """One streamed turn; returns how many frames it got."""
    body = {"message": "go", "contextId": context_id}
    async with client.stream("POST", f"{url}/agents/b/stream", json=body) as response:
        response.raise_for_status()
        return sum([1 async for _ in aiter_sse(response.aiter_bytes())])


async def drive(urls: list[str], turns: int, prefix: str, pinned: bool = False) -> int:
    """`turns` turns over CONTEXTS conversations, one at a time each, round-robin.

    Each turn goes to the next replica, or (`pinned`) every turn of a conversation to
    the same one.
    """
    frames = 0
    async with httpx.AsyncClient(timeout=60) as client:

        async def conversation(index: int) -> None:
            nonlocal frames
            for turn in range(index, turns, CONTEXTS):
                url = urls[(index if pinned else turn) % len(urls)]
                got = await stream_turn(client, url, f"{prefix}-{index}")
                frames += got  # after the await: `frames += await …` would lose updates

        async with anyio.create_task_group() as group:
            for index in range(CONTEXTS):
                group.start_soon(conversation, index)
    return frames


async def prefill(storage: str, prefix: str, history: int) -> None:
    """Store `history` turns in each of the CONTEXTS conversations named by `prefix`."""
    from agentkeel.messages import Message
    from agentkeel.storage import SessionKey
    from agentkeel.storage.postgres import PostgresStorage

    store = PostgresStorage(storage, pool_size=1)
    await store.open()
    try:
        for index in range(CONTEXTS):
            messages = []
            for number in range(history):
                messages += [Message.user(f"go {number}"), Message.assistant("t00 " * TOKENS)]
            key = SessionKey(definition="b", context_id=f"{prefix}-{index}")
            await store.append(key, messages, None)
    finally:
        await store.close()


def run_scenario(
    name: str,
    storage: str,
    coordination: str | None,
    replicas: int,
    turns: int,
    forwarder: Counting,
    rclient: redis.Redis,
    history: int = 0,
    pinned: bool = False,
) -> dict[str, float]:
    """Serve `turns` turns on `replicas` processes; print and return the figures."""
    prefix = f"{name}-{secrets.token_hex(2)}"
    with tempfile.TemporaryDirectory() as folder:
        path = framework(Path(folder), storage, coordination)
        servers = [Server(path, index) for index in range(replicas)]
        try:
            urls = [server.url for server in servers]
            if history:
                anyio.run(prefill, storage, prefix, history)
            anyio.run(drive, urls, CONTEXTS * replicas * WARMUP_ROUNDS, prefix, pinned)
            pids = [server.process.pid for server in servers]
            idle_before = cpu_seconds(pids)
            time.sleep(IDLE_SECONDS)
            idle = (cpu_seconds(pids) - idle_before) / IDLE_SECONDS / replicas
            postgres = named_pids("postgres")
            before = (cpu_seconds(pids), cpu_by_pid(postgres), redis_counters(rclient))
            sends_before = forwarder.sends
            began = time.monotonic()
            frames = anyio.run(drive, urls, turns, prefix, pinned)
            span = time.monotonic() - began
            after = (cpu_seconds(pids), cpu_by_pid(postgres), redis_counters(rclient))
            trips = forwarder.sends - sends_before
        finally:
            for server in servers:
                server.stop()
    commands = after[2][0] - before[2][0]
    row = {
        "server_ms": (after[0] - before[0]) / turns * 1000,
        "postgres_ms": grown(before[1], after[1]) / turns * 1000,
        "redis_ms": (after[2][2] - before[2][2]) / turns * 1000,
        "pg_trips": trips / turns,
        "redis_cmds": commands / turns,
        # what the fan-out's script runs is counted too: what clients sent is the rest
        "redis_sent": (commands - (after[2][3] - before[2][3])) / turns,
        "xadd_per_frame": (after[2][1] - before[2][1]) / max(1, frames),
        "idle_ms_per_s": idle * 1000,
        # what the processes' background work (their idle CPU rate) comes to over the
        # measured span, per turn: a part of the server CPU no turn's work explains
        "idle_ms": idle * replicas * span / turns * 1000,
    }
    print(
        f"{name:>13}: server CPU {row['server_ms']:6.2f} ms/turn | PostgreSQL "
        f"{row['postgres_ms']:5.2f} ms | Redis {row['redis_ms']:5.2f} ms | "
        f"{row['pg_trips']:5.1f} PG trips/turn | {row['redis_cmds']:5.1f} Redis cmds/turn, "
        f"{row['redis_sent']:4.1f} sent by clients ({row['xadd_per_frame']:.2f} XADD per frame)"
        f" | idle {row['idle_ms_per_s']:.1f} ms/s per process, {row['idle_ms']:.2f} ms/turn",
        flush=True,
    )
    return row


# -- takeover ----------------------------------------------------------------------------------


async def one_takeover(first: Server, second: Server, context_id: str) -> float:
    async with httpx.AsyncClient(timeout=120) as client:
        body = {"message": "pause", "contextId": context_id}
        async with client.stream("POST", f"{first.url}/agents/b/stream", json=body) as response:
            async for item in aiter_sse(response.aiter_bytes()):
                if '"tool_call"' in item.data:
                    first.process.send_signal(signal.SIGKILL)
                    break
        killed = time.monotonic()
        answer = await client.post(
            f"{second.url}/agents/b/send", json={"message": "after", "contextId": context_id}
        )
        answer.raise_for_status()
        return time.monotonic() - killed


def takeovers(storage: str, coordination: str, kills: int) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as folder:
        path = framework(Path(folder), storage, coordination)
        second = Server(path, 0)
        try:
            for kill in range(kills):
                first = Server(path, kill + 1)
                try:
                    times.append(anyio.run(one_takeover, first, second, f"kill-{kill}"))
                finally:
                    first.stop(signal.SIGKILL)
        finally:
            second.stop()
    return times


def print_ratios(rounds: list[dict[str, dict[str, float]]], history: int) -> None:
    """Each ratio within its round (the baseline beside it), and the median over the rounds.

    One round's figures swing by up to a third on a loaded 2-core machine, every
    deployment alike: the median over the rounds is the figure, printed with each round's.
    """

    def ratio(name: str, against: str, figure: str = "server_ms") -> tuple[float, str]:
        each = [rows[name][figure] / rows[against][figure] for rows in rounds]
        return statistics.median(each), ", ".join(f"{value:.2f}" for value in each)

    for name, against in (
        ("redis-1", "baseline"),
        ("redis-3", "baseline"),
        ("redis-3-long", "baseline-long"),
    ):
        median, each = ratio(name, against)
        verdict = "ok" if median <= 1.5 else "over"
        print(
            f"ratio {name} / {against} server CPU per turn = {median:.2f}x median "
            f"(target <= 1.5x: {verdict}; rounds {each})"
        )
    shared, shared_each = ratio("baseline-3", "baseline")
    added, added_each = ratio("redis-3", "baseline-3")
    print(
        f"of which 3 processes on {os.cpu_count()} CPUs, no coordination (baseline-3 / "
        f"baseline) = {shared:.2f}x (rounds {shared_each}), and coordination at 3 processes "
        f"(redis-3 / baseline-3) = {added:.2f}x (rounds {added_each})"
    )
    grown, grown_each = ratio("redis-3-long", "redis-3")
    last = rounds[-1]
    print(
        f"redis-3 with {history} turns of history / without: server CPU {grown:.2f}x "
        f"(rounds {grown_each}), PG trips {last['redis-3-long']['pg_trips']:.1f} vs "
        f"{last['redis-3']['pg_trips']:.1f}, Redis cmds {last['redis-3-long']['redis_cmds']:.1f} "
        f"vs {last['redis-3']['redis_cmds']:.1f} per turn (the last round)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=120)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--history", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="ratios are medians over these")
    args = parser.parse_args()
    if args.rounds < 1 or args.turns < 1:
        parser.error("--rounds and --turns must be at least 1")
    sys.path.insert(0, str(HERE))
    from _postgres import CountingForwarder

    parts = urlsplit(POSTGRES)
    database = f"bench_replicas_{secrets.token_hex(3)}"
    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    forwarder = CountingForwarder(parts.hostname or "127.0.0.1", parts.port or 5432)
    netloc = parts.netloc.rpartition("@")
    storage = urlunsplit(
        parts._replace(netloc=f"{netloc[0]}@127.0.0.1:{forwarder.port}", path=f"/{database}")
    )
    rclient = redis.Redis.from_url(REDIS)
    prefix = f"bench{secrets.token_hex(3)}:"
    coordination = f"{REDIS}?prefix={prefix}&lease={args.lease:g}s"
    try:
        print(
            f"{args.turns} streamed turns of {TOKENS} tokens, {CONTEXTS} conversations, "
            f"{args.rounds} rounds"
        )
        rounds = []
        for number in range(1, args.rounds + 1):
            rows = {}
            for name, coord, replicas, history in (
                ("baseline", None, 1, 0),
                ("redis-1", coordination, 1, 0),
                ("redis-3", coordination, 3, 0),
                ("baseline-3", None, 3, 0),
                ("baseline-long", None, 1, args.history),
                ("redis-3-long", coordination, 3, args.history),
            ):
                print(f"round {number} ", end="")
                rows[name] = run_scenario(
                    name, storage, coord, replicas, args.turns, forwarder, rclient, history,
                    pinned=name == "baseline-3",
                )  # fmt: skip
            rounds.append(rows)
        print_ratios(rounds, args.history)
        times = sorted(takeovers(storage, coordination, args.kills))
        if times:  # --kills 0 measures the turns only
            p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
            median = statistics.median(times)
            print(
                f"takeover after SIGKILL over {len(times)} kills (lease {args.lease:g} s): min "
                f"{times[0]:.2f} s, median {median:.2f} s, p95 {p95:.2f} s, "
                f"max {times[-1]:.2f} s; median / lease = {median / args.lease:.2f}"
            )
    finally:
        for name in rclient.scan_iter(match=f"{prefix}*", count=500):
            rclient.delete(name)
        rclient.close()
        forwarder.close()
        with psycopg.connect(POSTGRES, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )


if __name__ == "__main__":
    main()
