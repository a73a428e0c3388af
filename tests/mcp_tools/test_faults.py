"""Precise faults, against a Python MCP server built on the SDK's own server class."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from agentkeel import (
    Agent,
    ConfigurationError,
    InputAnswer,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
)
from agentkeel.context import RunContext
from agentkeel.mcp import EnvValue, MCPServer, StdioTransport
from agentkeel.messages import JSONObject
from agentkeel.models.scripted import TurnSource
from agentkeel.state import AgentState, InvocationState
from mcp_tools import EVERYTHING, PYTHON, faulty_args, faulty_over_http, node_server

pytestmark = pytest.mark.anyio


def call(name: str, arguments: JSONObject | None = None) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ScriptedToolCall(name, dict(arguments or {}))])


def faulty(**options: object) -> MCPServer:
    return MCPServer.stdio(PYTHON, faulty_args(), name="faulty", **options)  # type: ignore[arg-type]


def pid_of(output: object) -> int:
    assert isinstance(output, dict)
    text = output["text"]
    assert isinstance(text, str)
    pid = json.loads(text)["pid"]
    assert isinstance(pid, int)
    return pid


def run_context(context_id: str, principal: str | None = None) -> RunContext:
    """The context a call runs in, as a turn of agent ``a`` would give it."""
    return RunContext(
        context_id=context_id,
        run_id="run-1",
        state=AgentState(),
        invocation_state=InvocationState(),
        agent_name="a",
        principal=principal,
    )


async def test_a_server_killed_mid_call_gives_an_error_result_then_a_working_call() -> None:
    model = ScriptedModel([call("whoami"), "a", call("crash"), "b", call("whoami"), "c"])
    async with faulty() as server:
        agent = Agent(model, tools=[server])
        first = await agent.invoke_async("who")
        crashed = await agent.invoke_async("crash")
        after = await agent.invoke_async("who again")
    assert crashed.status == "completed"  # the run went on: the model saw the error
    (record,) = crashed.tool_calls
    assert record.status == "error"
    assert "stopped during the call" in str(record.output)
    results = [p for m in model.requests[3].messages for p in m.parts if p.kind == "tool_result"]
    assert results[-1].status == "error"
    assert after.tool_calls[0].status == "success"
    assert pid_of(after.tool_calls[0].output) != pid_of(first.tool_calls[0].output)


async def test_restarts_back_off_while_the_server_keeps_failing() -> None:
    crash: list[TurnSource] = [call("crash", {"delay": 0}), "a"]
    who: list[TurnSource] = [call("whoami"), "b"]
    model = ScriptedModel([*crash, *who, *crash, *who, *who])
    async with faulty() as server:
        agent = Agent(model, tools=[server])
        await agent.invoke_async("crash")  # death 1: the next use restarts it at once
        restarted = await agent.invoke_async("who")
        await agent.invoke_async("crash")
        working = server.transport
        server.transport = StdioTransport(command=PYTHON, args=tuple(faulty_args("exit")))
        # the run's tool listing tries the restart, which fails; the call then meets the pause
        paused = await agent.invoke_async("who")
        server.transport = working
        await anyio.sleep(0.6)
        recovered = await agent.invoke_async("who")
    assert restarted.tool_calls[0].status == "success"
    assert paused.status == "completed"
    assert paused.tool_calls[0].status == "error"
    assert "is down; the next restart is tried in 1 s" in str(paused.tool_calls[0].output)
    assert recovered.tool_calls[0].status == "success", recovered.tool_calls[0].output
    assert {spec.name for spec in model.requests[-1].tools} >= {"whoami", "crash"}


async def test_a_call_over_its_timeout_is_cancelled_with_an_error_result() -> None:
    model = ScriptedModel([call("slow", {"seconds": 30}), "a", call("whoami"), "b"])
    async with faulty(timeout=0.5) as server:
        agent = Agent(model, tools=[server])
        started = time.monotonic()
        slow = await agent.invoke_async("slow")
        elapsed = time.monotonic() - started
        after = await agent.invoke_async("who")
    assert slow.tool_calls[0].status == "error"
    assert "timed out after 0.5 seconds" in str(slow.tool_calls[0].output)
    assert elapsed < 5
    assert after.tool_calls[0].status == "success"


async def test_a_server_that_never_answers_initialize_fails_to_start_in_bounded_time() -> None:
    server = MCPServer.stdio(PYTHON, faulty_args("silent"), name="silent", start_timeout=1)
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as caught:
        await server.start()
    assert time.monotonic() - started < 5
    assert "'silent'" in caught.value.message
    assert "did not answer the handshake" in caught.value.message


async def test_a_server_that_cannot_start_is_named() -> None:
    server = MCPServer.stdio(PYTHON, faulty_args("exit"), name="broken", start_timeout=5)
    with pytest.raises(ConfigurationError, match="MCP server 'broken' could not start"):
        await server.start()
    missing = MCPServer.stdio("/nonexistent/agentkeel-mcp", name="missing")
    with pytest.raises(ConfigurationError, match="MCP server 'missing' could not start"):
        await missing.start()


async def test_an_unopened_server_gives_error_results_not_a_crash() -> None:
    model = ScriptedModel([call("whoami"), "ok"])
    result = await Agent(model, tools=[faulty()]).invoke_async("who")
    assert result.status == "completed"
    assert model.requests[0].tools == ()  # nothing listed yet: nothing offered


async def test_identity_in_meta_prefix_and_allow_list() -> None:
    server = faulty(identity="meta", prefix="f_", tools=["whoami", "slow"])
    context = run_context("ctx-meta", "alice")
    async with server:
        names = [tool.name for tool in await server.list_tools(context)]
        output = await server.call("whoami", {}, context)
    assert names == ["f_whoami", "f_slow"]
    assert isinstance(output, dict) and isinstance(output["text"], str)
    meta = json.loads(output["text"])["meta"]
    assert meta["agentkeel/contextId"] == "ctx-meta"
    assert meta["agentkeel/principal"] == "alice"


async def test_without_identity_nothing_about_the_caller_is_sent() -> None:
    context = run_context("ctx-private", "alice")
    async with faulty() as server:
        output = await server.call("whoami", {}, context)
    assert "ctx-private" not in json.dumps(output) and "alice" not in json.dumps(output)


async def test_a_tool_added_later_is_offered_after_list_changed() -> None:
    model = ScriptedModel([call("grow"), "grown", call("extra"), "done"])
    async with faulty() as server:
        agent = Agent(model, tools=[server])
        await agent.invoke_async("grow")
        with anyio.fail_after(5):
            while not any(c.stale for c in server._connections.values()):
                await anyio.sleep(0.02)
        result = await agent.invoke_async("extra")
    assert "extra" not in {spec.name for spec in model.requests[0].tools}
    assert "extra" in {spec.name for spec in model.requests[2].tools}
    assert result.tool_calls[0].status == "success"


async def test_a_change_caused_by_the_first_call_after_start_is_heard() -> None:
    """The list-change subscription is acknowledged before the toolset is ready.

    Nothing runs between the start and the call here, so a subscription still being
    set up would hear nothing of the change the call announces.
    """
    context = run_context("ctx-grow")
    async with faulty() as server:
        await server.call("grow", {}, context)
        with anyio.fail_after(5):
            while not any(c.stale for c in server._connections.values()):
                await anyio.sleep(0.02)
        names = {tool.spec.name for tool in await server.list_tools(context)}
    assert "extra" in names


async def test_an_error_result_of_the_server_is_an_error_tool_result() -> None:
    model = ScriptedModel([call("fail"), "ok"])
    async with faulty() as server:
        result = await Agent(model, tools=[server]).invoke_async("fail")
    assert result.tool_calls[0].status == "error"
    assert "fail" in str(result.tool_calls[0].output)


async def test_per_context_connections_are_separate_and_released() -> None:
    async with faulty(per_context=True) as server:
        assert server._connections == {}  # the start-up probe closed again
        one = pid_of(await server.call("whoami", {}, run_context("ctx-1")))
        two = pid_of(await server.call("whoami", {}, run_context("ctx-2")))
        again = pid_of(await server.call("whoami", {}, run_context("ctx-1")))
        await server.release(None, "ctx-1")
        assert set(server._connections) == {(None, "ctx-2")}
        fresh = pid_of(await server.call("whoami", {}, run_context("ctx-1")))
    assert one == again != two
    assert fresh != one


async def test_an_answer_after_the_connection_closed_is_a_clear_error_result() -> None:
    # a restart loses the server's question: the same suspended run, resumed on a new
    # connection (here: a new server object, as after a process restart), fails the call
    model = ScriptedModel([call("trigger-elicitation-request"), "after"])
    first = MCPServer.stdio("node", [node_server(EVERYTHING), "stdio"], name="everything")
    async with first:
        agent = Agent(model, tools=[first])
        suspended = await agent.invoke_async("ask")
    second = MCPServer.stdio("node", [node_server(EVERYTHING), "stdio"], name="everything")
    async with second:
        agent.toolsets[0] = second
        resumed = await agent.resume_async(suspended.interrupts[0].id, InputAnswer({"name": "A"}))
    assert resumed.status == "completed"
    (record,) = resumed.tool_calls
    assert record.status == "error"
    assert "was lost" in str(record.output) and "call the tool again" in str(record.output)


async def test_http_headers_come_from_the_environment_and_identity_from_the_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAULTY_TOKEN", "Bearer from-the-environment")
    context = run_context("ctx-headers", "bob")
    with faulty_over_http() as url:
        server = MCPServer.http(
            url,
            name="faulty",
            headers={"Authorization": EnvValue("FAULTY_TOKEN")},
            per_context=True,
            identity="headers",
        )
        async with server:
            output = await server.call("whoami", {}, context)
    assert isinstance(output, dict) and isinstance(output["text"], str)
    headers = json.loads(output["text"])["headers"]
    assert headers["authorization"] == "Bearer from-the-environment"
    assert headers["x-agentkeel-context-id"] == "ctx-headers"
    assert headers["x-agentkeel-principal"] == "bob"
    assert "from-the-environment" not in repr(server)


async def test_a_missing_header_variable_stops_the_start_naming_it() -> None:
    server = MCPServer.http(
        "http://127.0.0.1:9/mcp", name="search", headers={"Authorization": EnvValue("NOPE_X")}
    )
    with pytest.raises(ConfigurationError, match="needs the environment variable NOPE_X"):
        await server.start()
