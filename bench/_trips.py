"""PostgreSQL round trips per turn, by kind of turn: the trips row of bench/serve.py.

A server of its own runs `trips_app` (one agent whose scripted model answers by the
prompt: ``go`` in text, ``tool`` through a tool call, ``approve`` through a tool that
needs an approval) on PostgresStorage reached through a `CountingForwarder`, and the
turns of one warm context are counted one at a time:

- plain: a text answer (one model call);
- tool: a tool call, its result, then the answer (two model calls);
- approval: the turn that suspends for the approval, then the turn that resumes it.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from agentkeel.messages import JSONObject
from agentkeel.sse import aiter_sse

__all__ = ["TripCounts", "count_turns", "trips_app"]

TOKENS = 50
TOKEN_TEXT = "tok "


def trips_app(postgres: str) -> object:
    """agentkeel serving the trips agent on the storage `postgres` names."""
    from agentkeel import Agent, ScriptedModel, tool
    from agentkeel.framework import AgentDefinition, Catalog, Framework
    from agentkeel.models.base import ModelRequest
    from agentkeel.models.scripted import ScriptedToolCall, ScriptedTurn
    from agentkeel.server import create_app
    from agentkeel.storage.postgres import from_url

    @tool
    def lookup(word: str) -> str:
        """Look a word up."""
        return word.upper()

    @tool(requires_approval=True)
    def publish(word: str) -> str:
        """Publish a word (after an approval)."""
        return f"published {word}"

    def answer(request: ModelRequest) -> ScriptedTurn | str:
        last = request.messages[-1]
        if last.tool_results:
            return "done"
        prompt = last.text
        if prompt in ("tool", "approve"):
            name = "lookup" if prompt == "tool" else "publish"
            return ScriptedTurn(tool_calls=[ScriptedToolCall(name, {"word": "bench"})])
        return TOKEN_TEXT * TOKENS

    def factory(context_id: str) -> Agent:
        del context_id
        model = ScriptedModel([answer], chunk_size=len(TOKEN_TEXT), repeat=True)
        return Agent(model, name="bench", tools=[lookup, publish])

    definition = AgentDefinition(
        name="bench", factory=factory, catalog=Catalog(description="bench")
    )
    storage = from_url(postgres, None)  # its checkpointer too, as framework.json does
    framework = Framework(
        definitions={"bench": definition}, storage=storage, checkpointer=storage.checkpointer()
    )
    return create_app(framework)


@dataclass(frozen=True, slots=True)
class TripCounts:
    """Median round trips of each kind of turn on a warm context, and a new context's."""

    plain: float
    tool: float
    suspend: float
    resume: float
    first: int


async def _turn(client: httpx.AsyncClient, body: JSONObject) -> JSONObject:
    """One streamed turn; its done frame."""
    async with client.stream("POST", "/agents/bench/stream", json=body) as response:
        async for frame in aiter_sse(response.aiter_bytes()):
            data = json.loads(frame.data)
            if isinstance(data, dict) and data.get("done") is True:
                return data
    raise RuntimeError("a turn ended without its done frame")


async def count_turns(url: str, sends: Callable[[], int], rounds: int = 10) -> TripCounts:
    """Count the trips of each kind of turn through the server at `url`."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        async def counted(body: JSONObject) -> tuple[int, JSONObject]:
            before = sends()
            done = await _turn(client, body)
            await anyio.sleep(0.05)  # the forwarder's threads count after the bytes pass
            return sends() - before, done

        def send(prompt: str, context: str = "ctx-trips") -> JSONObject:
            return {"message": prompt, "contextId": context}

        for prompt in ("go", "tool", "go"):
            await _turn(client, send(prompt))
        await anyio.sleep(0.2)
        counts: dict[str, list[int]] = {"plain": [], "tool": [], "suspend": [], "resume": []}
        for _ in range(rounds):
            counts["plain"].append((await counted(send("go")))[0])
            counts["tool"].append((await counted(send("tool")))[0])
            trips, done = await counted(send("approve"))
            counts["suspend"].append(trips)
            interrupt = _interrupt_id(done)
            resume: JSONObject = {
                "contextId": "ctx-trips",
                "resume": {"interruptId": interrupt, "decision": {"approved": True}},
            }
            counts["resume"].append((await counted(resume))[0])
        first, _ = await counted(send("go", "ctx-trips-new"))
    median = {name: statistics.median(values) for name, values in counts.items()}
    return TripCounts(first=first, **median)


def _interrupt_id(done: JSONObject) -> str:
    found: Any = done.get("interrupts") or [done.get("interrupt")]
    item = found[0] if isinstance(found, list) and found else None
    if not isinstance(item, dict) or not isinstance(item.get("id"), str):
        raise RuntimeError(f"the approval turn did not suspend: {done}")
    return str(item["id"])


def report_trips(counts: TripCounts) -> None:
    """Print the trips row."""
    print(
        "PostgreSQL round trips per turn (median of 10, warm context; target <= 2 for a"
        f" plain turn): plain {counts.plain:.0f}, tool {counts.tool:.0f}, approval"
        f" {counts.suspend:.0f} to suspend + {counts.resume:.0f} to resume;"
        f" the first turn of a new context: {counts.first}"
    )
