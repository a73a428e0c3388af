"""What an MCP tool call over stdio costs, beside an `@tool` doing the same work, in one run.

Both tools add two numbers. The MCP one lives in a child process (this script, started
with ``--serve``: the SDK's own server class on stdio), so its figure is the MCP round
trip: JSON-RPC over a pipe, the server's validation, our result conversion. Two levels:

- call: the tool alone (``Tool.invoke`` in the agent's process), N calls in a row;
- turn: a whole agent turn that makes one tool call and answers (ScriptedModel), so the
  overhead is seen against the rest of a run.

Run ``.venv/bin/python -P bench/mcp.py [--calls N]``. Prints microseconds per call and the
MCP/@tool ratio; never asserts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import anyio

from agentkeel import Agent, ScriptedModel, ScriptedToolCall, ScriptedTurn, tool
from agentkeel.context import RunContext
from agentkeel.mcp import MCPServer
from agentkeel.state import AgentState, InvocationState
from agentkeel.tools.decorator import Tool

WARMUP = 20


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def serve() -> None:
    from mcp.server.mcpserver import MCPServer as SDKServer

    server = SDKServer("bench")

    @server.tool(name="add")
    def add_remote(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    server.run("stdio")


async def timed(label: str, count: int, step: Callable[[int], Awaitable[object]]) -> float:
    for index in range(WARMUP):
        await step(index)
    samples = []
    for index in range(count):
        started = time.perf_counter()
        await step(index)
        samples.append(time.perf_counter() - started)
    median = statistics.median(samples) * 1e6
    p90 = sorted(samples)[int(count * 0.9)] * 1e6
    print(f"  {label:<14} median {median:9.1f} us   p90 {p90:9.1f} us")
    return median


def ratio(mcp: float, local: float, unit: str) -> None:
    print(f"  ratio MCP/@tool: {mcp / local:.1f}x, overhead {mcp - local:.1f} us/{unit}")


def turn_agent(item: Tool | MCPServer) -> Agent:
    turn = ScriptedTurn(tool_calls=[ScriptedToolCall("add", {"a": 2, "b": 3})])
    return Agent(ScriptedModel([turn, "five"], repeat=True), tools=[item])


async def main(calls: int) -> None:
    context = RunContext(
        context_id="ctx-bench",
        run_id="run-bench",
        state=AgentState(),
        invocation_state=InvocationState(),
        agent_name="bench",
    )
    server = MCPServer.stdio(sys.executable, ["-P", __file__, "--serve"], name="bench")
    async with server:
        (remote,) = await server.list_tools(context)
        print(f"tool call ({calls} calls, after {WARMUP} warm-up calls)")
        local_call = await timed("@tool", calls, lambda i: add.invoke({"a": i, "b": 1}, context))
        mcp_call = await timed(
            "MCP stdio", calls, lambda i: remote.invoke({"a": i, "b": 1}, context)
        )
        ratio(mcp_call, local_call, "call")
        local_agent, mcp_agent = turn_agent(add), turn_agent(server)
        print(f"agent turn with one tool call ({calls} turns)")
        local_turn = await timed("@tool", calls, lambda i: local_agent.invoke_async("add"))
        mcp_turn = await timed("MCP stdio", calls, lambda i: mcp_agent.invoke_async("add"))
        ratio(mcp_turn, local_turn, "turn")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        serve()
    else:
        anyio.run(main, options.calls)
