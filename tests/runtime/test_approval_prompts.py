"""An approval's prompt shows what the call will do, and never an input marked secret."""

from __future__ import annotations

import logging

import pytest

from agentkeel import (
    Agent,
    AgentResult,
    Approve,
    ConfigurationError,
    InterruptEvent,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    tool,
)
from agentkeel.events import RunEvent
from agentkeel.interrupts import approval_prompt

PASSWORD = "hunter2-very-secret"


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool(
    requires_approval=True,
    describe=lambda args: f"Transfer {args['amount']} EUR to {args['to']}",
)
def transfer(to: str, amount: int) -> str:
    """Send money."""
    return f"sent {amount} to {to}"


@tool(describe=lambda args: f"Log in to {args['host']} as {args['user']} ({args['password']})")
def login(host: str, user: str, password: str) -> str:
    """Log in somewhere (approved through Agent(approve=...))."""
    return f"logged in to {host}"


login_secret = tool(
    secret=["password"],
    describe=lambda args: f"Log in to {args['host']} as {args['user']} ({args['password']})",
    name="login_secret",
)(login.function)


@tool(requires_approval=True, secret=["token"])
def call_api(url: str, token: str) -> str:
    """Call an API with a token."""
    return f"called {url}"


@tool(requires_approval=True, describe=lambda args: str(args["missing"]))
def broken(path: str) -> str:
    """A describe that fails."""
    return path


@tool(requires_approval=True)
def ping() -> str:
    """No input at all."""
    return "pong"


async def suspend(agent: Agent, *calls: ScriptedToolCall) -> tuple[AgentResult, list[RunEvent]]:
    agent.model = ScriptedModel([ScriptedTurn(tool_calls=list(calls)), "done"])
    items = [item async for item in agent.stream("go")]
    result = items[-1]
    assert isinstance(result, AgentResult) and result.status == "suspended"
    return result, [item for item in items if not isinstance(item, AgentResult)]


@pytest.mark.anyio
async def test_the_prompt_shows_the_input_as_json() -> None:
    agent = Agent(ScriptedModel([]), tools=[delete_file])
    result, events = await suspend(agent, ScriptedToolCall("delete_file", {"path": "/tmp/a.txt"}))
    assert result.interrupt is not None
    assert result.interrupt.prompt == 'Run delete_file with {"path": "/tmp/a.txt"}'
    frames = [event for event in events if isinstance(event, InterruptEvent)]
    assert [frame.prompt for frame in frames] == [result.interrupt.prompt]


@pytest.mark.anyio
async def test_a_describe_text_says_what_the_call_does() -> None:
    agent = Agent(ScriptedModel([]), tools=[transfer])
    result, _ = await suspend(agent, ScriptedToolCall("transfer", {"to": "Bob", "amount": 40}))
    assert result.interrupt is not None
    assert result.interrupt.prompt == "Run transfer: Transfer 40 EUR to Bob"


@pytest.mark.anyio
async def test_describe_is_used_for_tools_approved_by_the_agent() -> None:
    agent = Agent(ScriptedModel([]), tools=[login], approve=["login"])
    call = ScriptedToolCall("login", {"host": "db", "user": "ann", "password": "pw"})
    result, _ = await suspend(agent, call)
    assert result.interrupt is not None
    assert result.interrupt.prompt == "Run login: Log in to db as ann (pw)"


@pytest.mark.anyio
async def test_secret_inputs_never_reach_the_prompt_the_frames_or_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    agent = Agent(ScriptedModel([]), tools=[login_secret, call_api], approve=["login_secret"])
    calls = (
        ScriptedToolCall("login_secret", {"host": "db", "user": "ann", "password": PASSWORD}),
        ScriptedToolCall("call_api", {"url": "https://x.test/v1", "token": PASSWORD}),
    )
    result, events = await suspend(agent, *calls)
    prompts = [item.prompt for item in result.interrupts]
    assert prompts == [
        "Run login_secret: Log in to db as ann ([secret])",
        'Run call_api with {"url": "https://x.test/v1", "token": "[secret]"}',
    ]
    assert PASSWORD not in repr(events) and PASSWORD not in caplog.text
    # the call itself still gets the real input once approved
    for item in result.interrupts:
        assert PASSWORD in item.tool_input.values()
    first = await agent.resume_async(result.interrupts[0].id, Approve())
    assert first.status == "suspended"
    done = await agent.resume_async(result.interrupts[1].id, Approve())
    assert done.status == "completed"
    assert [record.output for record in done.tool_calls] == [
        "logged in to db",
        "called https://x.test/v1",
    ]


@pytest.mark.anyio
async def test_each_interrupt_shows_and_releases_its_own_call() -> None:
    agent = Agent(ScriptedModel([]), tools=[delete_file])
    result, _ = await suspend(
        agent,
        ScriptedToolCall("delete_file", {"path": "a.txt"}),
        ScriptedToolCall("delete_file", {"path": "b.txt"}),
    )
    by_prompt = {item.prompt: item for item in result.interrupts}
    second = by_prompt['Run delete_file with {"path": "b.txt"}']
    assert second.tool_input == {"path": "b.txt"}
    partly = await agent.resume_async(second.id, Approve())
    assert [(r.input, r.status) for r in partly.tool_calls] == [({"path": "b.txt"}, "success")]
    assert [item.prompt for item in agent.pending_interrupts] == [
        'Run delete_file with {"path": "a.txt"}'
    ]


def test_long_inputs_are_cut_and_describe_failures_fall_back() -> None:
    long = approval_prompt("delete_file", {"path": "x" * 1000}, delete_file)
    assert long.startswith('Run delete_file with {"path": "xxx') and long.endswith("…")
    assert len(long) < 330
    assert approval_prompt("broken", {"path": "p"}, broken) == 'Run broken with {"path": "p"}'
    assert approval_prompt("ping", {}, ping) == "Run ping (no input)"
    assert approval_prompt("mcp_tool", {"q": 1}) == 'Run mcp_tool with {"q": 1}'


def test_secret_must_name_inputs_of_the_tool() -> None:
    with pytest.raises(ConfigurationError, match="tokn"):

        @tool(secret=["tokn"])
        def api(token: str) -> str:
            """A misspelled secret."""
            return token

    with pytest.raises(ConfigurationError, match="list of input names"):
        tool(secret="token")
