"""The soak's three parts, each returning its figures (see the package docstring).

- `kill_rounds`: clients run turns (plain, with a tool, with an approval) on a few
  contexts of a server that is SIGKILLed at a random instant; after each kill the
  server restarts, every turn whose ``done`` frame reached its client must be in the
  stored history, the history must keep a strict provider's rules (every tool call
  answered by the next message), and the next turn of each context must work.
- `load`: concurrent turns on one context, and many contexts through a small context
  cache; every reply is its own request's, and every transcript is exactly what its
  client sent.
- `memory`: a steady load while the server's RSS and open fds are sampled.
"""

from __future__ import annotations

import json
import random
import secrets
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import anyio
import httpx

from agentkeel.framework import load_framework
from agentkeel.messages import JSONObject, Message
from agentkeel.storage.base import SessionKey
from e2e import ServerProcess, frames_of, write_framework

__all__ = [
    "KillFigures",
    "LoadFigures",
    "MemoryFigures",
    "assert_provider_valid",
    "kill_rounds",
    "load",
    "memory",
    "percentile",
    "render_table",
    "server_document",
]

SEND = "/agents/scripted/send"
STREAM = "/agents/scripted/stream"
AGENT = {"scripted": {"factory": "e2e:scripted_agent"}}
APPROVE = {"approved": True}


def server_document(storage: str | None, *, max_contexts: int = 1000) -> dict[str, object]:
    """A framework.json serving the scripted agent on `storage` (None: a session folder)."""
    document: dict[str, object] = {
        "agents": AGENT,
        "maxContexts": max_contexts,
        "server": {"heartbeatSeconds": 1, "shutdownTimeoutSeconds": 5},
    }
    if storage is None:
        document["sessionDir"] = "./sessions"
        document["checkpointer"] = {"dir": "./checkpoints"}
    else:
        document["storage"] = storage
    return document


def assert_provider_valid(messages: Sequence[Message]) -> None:
    """The strict provider's rules: every tool call answered by the next message, one each."""
    for index, message in enumerate(messages):
        if message.tool_calls:
            assert index + 1 < len(messages), "a tool call without its result"
            answered = [r.call_id for r in messages[index + 1].tool_results]
            assert answered == [c.id for c in message.tool_calls], "tool results out of order"
        if message.tool_results:
            assert index > 0 and messages[index - 1].tool_calls, "a result without its call"


def percentile(values: Sequence[float], fraction: float) -> float:
    """The `fraction` quantile of `values` (nearest rank), 0.0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# -- kills --------------------------------------------------------------------------------


@dataclass(slots=True)
class KillFigures:
    """What the kill rounds saw."""

    backend: str
    kills: int = 0
    survived: int = 0
    acknowledged: int = 0
    found: int = 0
    latencies: list[float] = field(default_factory=list)


async def _turn(client: httpx.AsyncClient, body: Mapping[str, object]) -> JSONObject | None:
    """Stream one turn; its done frame's data, or None when the server went away first."""
    try:
        async with client.stream("POST", STREAM, json=body) as response:
            if response.status_code != 200:
                raise AssertionError(f"a turn was refused: {(await response.aread())!r}")
            async for frame in frames_of(response):
                if frame.done:
                    return frame.data
    except httpx.HTTPError:
        return None
    return None


async def _client(
    url: str, context_id: str, rng: random.Random, acked: list[str], latencies: list[float]
) -> None:
    """Run turns on `context_id` until the server dies; record each acknowledged message."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        number = 0
        while True:
            number += 1
            kind = rng.choice(("plain", "tool", "approval"))
            text = {
                "plain": f"m{number}",
                "tool": "pause 0.05",
                "approval": f"delete f{number}.txt",
            }[kind]
            started = time.monotonic()
            done = await _turn(client, {"message": text, "contextId": context_id})
            if done is None:
                return
            interrupt = done.get("interrupt")
            if done.get("status") == "suspended" and isinstance(interrupt, dict):
                resume = {"interruptId": interrupt["id"], "decision": APPROVE}
                done = await _turn(client, {"contextId": context_id, "resume": resume})
                if done is None:
                    return
            if done.get("status") != "completed":
                raise AssertionError(f"a turn ended {done.get('status')}: {done}")
            latencies.append(time.monotonic() - started)
            acked.append(text)


async def _next_turn_works(url: str, context_id: str) -> None:
    """Decide what a kill left pending, then a plain turn must complete."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        for _ in range(3):
            answer = await client.post(
                SEND, json={"message": "still there?", "contextId": context_id}
            )
            if answer.status_code == 200:
                assert answer.json()["status"] == "completed", answer.text
                assert answer.json()["text"] == "echo: still there?"
                return
            error = answer.json()["error"]
            assert error["code"] == "interrupt_pending", answer.text
            resume = {"interruptId": error["interruptId"], "decision": APPROVE}
            decided = await client.post(SEND, json={"contextId": context_id, "resume": resume})
            assert decided.status_code == 200, decided.text
        raise AssertionError(f"context {context_id} kept refusing new turns")


def _user_texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages if m.role == "user" and not m.tool_results]


def _is_subsequence(wanted: Sequence[str], found: Sequence[str]) -> bool:
    remaining = iter(found)
    return all(item in remaining for item in wanted)


async def kill_rounds(
    folder: Path, kills: int, *, storage: str | None = None, contexts: int = 3, seed: int = 18
) -> KillFigures:
    """SIGKILL a served scripted agent `kills` times during turns, checking after each."""
    rng = random.Random(seed)
    document = server_document(storage)
    framework_path = write_framework(folder, document)
    figures = KillFigures(backend="file" if storage is None else "postgresql")
    context_ids = [f"soak-{index}" for index in range(contexts)]
    acked: dict[str, list[str]] = {context_id: [] for context_id in context_ids}
    server = ServerProcess(framework_path)
    reader = load_framework(framework_path).storage
    await reader.open()
    try:
        url = server.start()
        for _ in range(kills):
            async with anyio.create_task_group() as group:
                for context_id in context_ids:
                    group.start_soon(
                        _client,
                        url,
                        context_id,
                        random.Random(rng.random()),
                        acked[context_id],
                        figures.latencies,
                    )
                await anyio.sleep(rng.uniform(0.2, 1.2))
                server.kill()
            figures.kills += 1
            url = server.start()
            for context_id in context_ids:
                await _next_turn_works(url, context_id)
                snapshot = await reader.load(
                    SessionKey(definition="scripted", context_id=context_id)
                )
                assert snapshot is not None, f"{context_id} lost its session"
                assert_provider_valid(snapshot.messages)
                texts = _user_texts(snapshot.messages)
                assert _is_subsequence(acked[context_id], texts), (
                    f"an acknowledged turn of {context_id} is not stored"
                )
            figures.survived += 1
        figures.acknowledged = sum(len(texts) for texts in acked.values())
        for context_id in context_ids:
            snapshot = await reader.load(SessionKey(definition="scripted", context_id=context_id))
            assert snapshot is not None
            stored = _user_texts(snapshot.messages)
            remaining = iter(stored)
            figures.found += sum(1 for text in acked[context_id] if text in remaining)
    finally:
        server.stop()
        await reader.close()
    return figures


# -- load ---------------------------------------------------------------------------------


async def _send(client: httpx.AsyncClient, body: Mapping[str, object]) -> httpx.Response:
    """POST a turn with an Idempotency-Key, retried when the connection broke.

    A keep-alive connection the server closed as the client reused it is a transport
    error, not a lost turn: the retry with the same key finds the first attempt's run.
    """
    headers = {"Idempotency-Key": secrets.token_hex(8)}
    for attempt in range(3):
        try:
            return await client.post(SEND, json=body, headers=headers)
        except httpx.TransportError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@dataclass(slots=True)
class LoadFigures:
    """What the load part checked."""

    one_context_turns: int = 0
    contexts: int = 0
    context_turns: int = 0
    latencies: list[float] = field(default_factory=list)


async def load(
    url: str, *, concurrent: int = 50, contexts: int = 500, parallel: int = 50
) -> LoadFigures:
    """`concurrent` turns at once on one context, then `contexts` contexts at once."""
    figures = LoadFigures()
    limits = httpx.Limits(
        max_connections=parallel + 10,
        max_keepalive_connections=parallel + 10,
        keepalive_expiry=1.0,  # well before the server's 5 s, so it rarely closes one in use
    )
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        replies: dict[int, str] = {}

        async def one(index: int) -> None:
            started = time.monotonic()
            body = {"message": f"one-{index}", "contextId": "crowded"}
            answer = await _send(client, body)
            assert answer.status_code == 200, answer.text
            replies[index] = str(answer.json()["text"])
            figures.latencies.append(time.monotonic() - started)

        async with anyio.create_task_group() as group:
            for index in range(concurrent):
                group.start_soon(one, index)
        assert replies == {index: f"echo: one-{index}" for index in range(concurrent)}, (
            "a reply is not its own request's"
        )
        history = await _send(client, {"message": "history", "contextId": "crowded"})
        stored = str(history.json()["text"]).split("|")
        assert stored[-1] == "history"
        assert sorted(stored[:-1]) == sorted(f"one-{index}" for index in range(concurrent)), (
            "a turn on the crowded context was lost or doubled"
        )
        figures.one_context_turns = concurrent

        slots = anyio.Semaphore(parallel)

        async def converse(index: int) -> None:
            context_id = f"many-{index}"
            async with slots:
                for turn in range(2):
                    started = time.monotonic()
                    body = {"message": f"c{index}-t{turn}", "contextId": context_id}
                    answer = await _send(client, body)
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["text"] == f"echo: c{index}-t{turn}"
                    figures.latencies.append(time.monotonic() - started)
            async with slots:
                seen = await _send(client, {"message": "history", "contextId": context_id})
            assert seen.json()["text"] == f"c{index}-t0|c{index}-t1|history", (
                f"the transcript of {context_id} is not what its client sent"
            )

        async with anyio.create_task_group() as group:
            for index in range(contexts):
                group.start_soon(converse, index)
        figures.contexts = contexts
        figures.context_turns = contexts * 3
    return figures


# -- memory -------------------------------------------------------------------------------


@dataclass(slots=True)
class MemoryFigures:
    """RSS (KiB) and open fds of the server, after warm-up and at the end."""

    seconds: float = 0.0
    turns: int = 0
    rss_start: int = 0
    rss_end: int = 0
    fds_start: int = 0
    fds_end: int = 0
    latencies: list[float] = field(default_factory=list)

    @property
    def rss_drift(self) -> float:
        """The end RSS relative to the RSS after warm-up (0.05 is 5% more)."""
        return self.rss_end / self.rss_start - 1.0 if self.rss_start else 0.0


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc")


def _fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


async def memory(
    url: str, pid: int, *, seconds: float, warmup: float, clients: int = 8
) -> MemoryFigures:
    """A steady load of `clients` conversations for `seconds`; samples after `warmup`."""
    figures = MemoryFigures(seconds=seconds)
    stop_at = time.monotonic() + seconds
    sampled_start = anyio.Event()
    samples: list[tuple[int, int]] = []

    async def converse(worker: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            turn = 0
            while time.monotonic() < stop_at:
                turn += 1
                # a bounded set of contexts, revisited: steady state, not growth
                context_id = f"steady-{worker}-{turn % 20}"
                text = "pause 0.01" if turn % 3 == 0 else f"t{turn}"
                started = time.monotonic()
                body = {"message": text, "contextId": context_id}
                answer = await client.post(SEND, json=body)
                assert answer.status_code == 200, answer.text
                if (turn // 20) % 10 == 9:  # each history at most 10 turns: a steady load
                    await client.delete(f"/agents/scripted/contexts/{context_id}")
                figures.latencies.append(time.monotonic() - started)
                figures.turns += 1

    async def sample() -> None:
        await anyio.sleep(warmup)
        samples.append((_rss_kib(pid), _fds(pid)))
        sampled_start.set()
        while time.monotonic() < stop_at:
            await anyio.sleep(1.0)
            samples.append((_rss_kib(pid), _fds(pid)))

    async with anyio.create_task_group() as group:
        for worker in range(clients):
            group.start_soon(converse, worker)
        group.start_soon(sample)
    figures.rss_start, figures.fds_start = samples[0]
    # the end: the median of the last samples, so one GC pause does not decide it
    tail = samples[-5:]
    figures.rss_end = int(statistics.median(rss for rss, _ in tail))
    figures.fds_end = int(statistics.median(fds for _, fds in tail))
    return figures


# -- output -------------------------------------------------------------------------------


def render_table(rows: Sequence[tuple[str, str]]) -> str:
    """A two-column text table."""
    width = max(len(name) for name, _ in rows)
    lines = [f"{'figure'.ljust(width)}  value", f"{'-' * width}  -----"]
    lines.extend(f"{name.ljust(width)}  {value}" for name, value in rows)
    return "\n".join(lines)


def figures_json(*parts: object) -> str:
    """The figures as JSON (latency lists summarised), for bench/results/."""
    out: dict[str, object] = {}
    for part in parts:
        data = asdict(part)  # type: ignore[call-overload]
        latencies = data.pop("latencies", [])
        data["p50_seconds"] = percentile(latencies, 0.5)
        data["p99_seconds"] = percentile(latencies, 0.99)
        out[type(part).__name__ + ("" if not hasattr(part, "backend") else f"-{part.backend}")] = (
            data
        )
    return json.dumps(out, indent=2)
