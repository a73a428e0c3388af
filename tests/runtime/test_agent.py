"""The run loop through a real Agent and ScriptedModel: results, events, failures."""

from __future__ import annotations

import anyio
import pytest

from agentkeel import (
    Agent,
    AgentResult,
    ErrorEvent,
    InvocationState,
    RunContext,
    RunInProgressError,
    RunLimits,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    StateValueError,
    StatusEvent,
    StepEvent,
    StreamItem,
    ThinkingEvent,
    TokenEvent,
    ToolCallEvent,
    ToolResultEvent,
    tool,
)
from agentkeel.errors import ModelUnavailableError
from agentkeel.messages import Message, ToolCallPart, ToolResultPart
from agentkeel.tools import current_time, write_state


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("boom")


def call(name: str, **args: object) -> ScriptedToolCall:
    return ScriptedToolCall(name, dict(args))  # type: ignore[arg-type]


def results_in(message: Message) -> list[ToolResultPart]:
    return list(message.tool_results)


def assert_history_valid(messages: list[Message]) -> None:
    """Every tool call has exactly one result, right after it."""
    for index, message in enumerate(messages):
        if message.tool_calls:
            following = messages[index + 1]
            assert [r.call_id for r in following.tool_results] == [c.id for c in message.tool_calls]


async def collect(agent: Agent, prompt: str) -> tuple[list[StreamItem], AgentResult]:
    items = [item async for item in agent.stream(prompt)]
    result = items[-1]
    assert isinstance(result, AgentResult)
    return items[:-1], result


def test_sync_call_returns_result_with_usage_and_messages() -> None:
    model = ScriptedModel(["Hello there."])
    agent = Agent(model, system_prompt="Be brief.")
    result = agent("Hi")
    assert result.status == "completed"
    assert result.text == "Hello there."
    assert result.stop_reason == "end_turn"
    assert result.usage.input_tokens == 10 and result.usage.output_tokens == 5
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert agent.messages == list(result.messages)
    assert model.requests[0].system_prompt == "Be brief."
    assert result.run_id.startswith("run-")


@pytest.mark.anyio
async def test_stream_yields_typed_events_in_order_then_result() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(thinking="Let me add.", tool_calls=[call("add", a=2, b=3)]),
            ScriptedTurn(text="The sum is 5."),
        ]
    )
    agent = Agent(model, tools=[add])
    events, result = await collect(agent, "2+3?")
    kinds = [type(e).__name__ for e in events]
    assert kinds[0:2] == ["StatusEvent", "StepEvent"]
    assert isinstance(events[0], StatusEvent)
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingEvent))
    assert thinking == "Let me add."
    tool_call = next(e for e in events if isinstance(e, ToolCallEvent))
    tool_result = next(e for e in events if isinstance(e, ToolResultEvent))
    assert (tool_call.name, tool_result.name, tool_result.status) == ("add", "add", "success")
    assert tool_call.id == tool_result.id
    assert [e.step for e in events if isinstance(e, StepEvent)] == [1, 2]
    tokens = [e.text for e in events if isinstance(e, TokenEvent)]
    assert len(tokens) > 1 and "".join(tokens) == "The sum is 5."
    assert kinds.index("ToolResultEvent") < kinds.index("TokenEvent")
    assert result.text == "The sum is 5."
    assert result.tool_names == ["add"]
    assert result.tool_calls[0].input == {"a": 2, "b": 3}
    assert result.tool_calls[0].output == 5
    # the model saw the tool's result in its second request
    second = model.requests[1].messages
    assert results_in(second[-1])[0].content == 5
    assert model.requests[0].tools[0].name == "add"
    assert model.requests[0].tools[0].input_schema["required"] == ["a", "b"]
    assert_history_valid(agent.messages)


@pytest.mark.anyio
async def test_tool_exception_becomes_error_result_the_model_sees() -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("explode")]), "It failed, sorry."])
    agent = Agent(model, tools=[explode])
    events, result = await collect(agent, "go")
    assert result.status == "completed"
    assert next(e for e in events if isinstance(e, ToolResultEvent)).status == "error"
    seen = results_in(model.requests[1].messages[-1])[0]
    assert seen.status == "error" and "RuntimeError: boom" in str(seen.content)
    assert result.tool_calls[0].status == "error"


@pytest.mark.anyio
async def test_invalid_input_bad_json_and_unknown_tool_become_error_results() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    call("add", a="not a number", b=1),
                    ScriptedToolCall("add", raw_arguments='{"a": 1, "b"'),
                    call("no_such_tool", x=1),
                    call("add", a=1, b=2, c=3),
                ]
            ),
            "Done.",
        ]
    )
    agent = Agent(model, tools=[add])
    result = await agent.invoke_async("go")
    assert result.status == "completed"
    contents = [str(r.content) for r in results_in(model.requests[1].messages[-1])]
    assert "invalid input for tool 'add'" in contents[0] and "a:" in contents[0]
    assert "not valid JSON" in contents[1]
    assert "unknown tool 'no_such_tool'" in contents[2] and "add" in contents[2]
    assert "c:" in contents[3]
    assert [r.status for r in result.tool_calls] == ["error"] * 4
    assert_history_valid(agent.messages)


def test_state_refuses_non_json_values_naming_the_key() -> None:
    agent = Agent(ScriptedModel([]))
    with pytest.raises(StateValueError) as info:
        agent.state.set("when", object())  # type: ignore[arg-type]
    assert info.value.key == "when" and "'when'" in str(info.value)
    assert "when" not in agent.state
    with pytest.raises(StateValueError):
        agent.state.set("nan", float("nan"))


@pytest.mark.anyio
async def test_a_tool_storing_a_non_json_value_gets_an_error_result() -> None:
    @tool
    def store_bad(state: RunContext) -> str:
        """Store something that is not JSON."""
        state.state.set("bad", {1, 2})  # type: ignore[arg-type]
        return "ok"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("store_bad")]), "ok"])
    agent = Agent(model, tools=[store_bad])
    result = await agent.invoke_async("go")
    assert result.tool_calls[0].status == "error"
    assert "StateValueError" in str(result.tool_calls[0].output)
    assert "bad" not in agent.state


@pytest.mark.anyio
async def test_provider_error_mid_stream_fails_the_run_and_keeps_history() -> None:
    model = ScriptedModel(
        [
            "First answer.",
            ScriptedTurn(
                text="partial text that never finishes",
                error=ModelUnavailableError("upstream closed the stream"),
                error_after=2,
            ),
        ]
    )
    agent = Agent(model)
    await agent.invoke_async("one")
    before = list(agent.messages)
    events, result = await collect(agent, "two")
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "model_unavailable"
    error = next(e for e in events if isinstance(e, ErrorEvent))
    assert error.code == "model_unavailable"
    assert agent.messages == before


@pytest.mark.anyio
async def test_a_provider_raising_an_unexpected_exception_fails_cleanly() -> None:
    def broken(request: object) -> str:
        raise KeyError("secret internals")

    agent = Agent(ScriptedModel([broken]))
    result = await agent.invoke_async("hi")
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "model_error"
    assert "secret" not in result.error.message


@pytest.mark.anyio
async def test_cancel_mid_tool_leaves_valid_history_and_next_turn_works() -> None:
    started = anyio.Event()

    quick_done = anyio.Event()

    @tool
    async def slow() -> str:
        """Takes forever."""
        started.set()
        await anyio.sleep(60)
        return "never"

    @tool
    async def quick() -> str:
        """Finishes at once."""
        quick_done.set()
        return "quick"

    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[call("slow"), call("quick")]), "Next turn works."]
    )
    agent = Agent(model, tools=[slow, quick])
    results: list[AgentResult] = []

    async def run() -> None:
        results.append(await agent.invoke_async("go"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await started.wait()
        await quick_done.wait()
        await anyio.sleep(0.01)
        assert agent.busy
        assert agent.cancel()
    result = results[0]
    assert result.status == "cancelled" and result.stop_reason == "cancelled"
    statuses = {r.name: r.status for r in result.tool_calls}
    assert statuses == {"slow": "cancelled", "quick": "success"}
    assert_history_valid(agent.messages)
    follow = await agent.invoke_async("again")
    assert follow.text == "Next turn works."
    assert not agent.cancel()


@pytest.mark.anyio
async def test_cancelling_the_caller_still_leaves_valid_history() -> None:
    started = anyio.Event()

    @tool
    async def slow() -> str:
        """Takes forever."""
        started.set()
        await anyio.sleep(60)
        return "never"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("slow")]), "after"])
    agent = Agent(model, tools=[slow])
    async with anyio.create_task_group() as group:
        group.start_soon(agent.invoke_async, "go")
        await started.wait()
        group.cancel_scope.cancel()
    assert_history_valid(agent.messages)
    assert agent.messages[-1].tool_results[0].status == "error"
    assert (await agent.invoke_async("next")).text == "after"


@pytest.mark.anyio
async def test_tool_calls_of_one_step_run_concurrently() -> None:
    flag = anyio.Event()

    @tool
    async def waiter() -> str:
        """Waits for the setter."""
        with anyio.fail_after(5):
            await flag.wait()
        return "released"

    @tool
    async def setter() -> str:
        """Releases the waiter."""
        flag.set()
        return "set"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("waiter"), call("setter")]), "ok"])
    result = await Agent(model, tools=[waiter, setter]).invoke_async("go")
    assert [(r.name, r.output) for r in result.tool_calls] == [
        ("waiter", "released"),
        ("setter", "set"),
    ]


@pytest.mark.anyio
async def test_tool_timeout_becomes_an_error_result() -> None:
    @tool(timeout=0.05)
    async def sleepy() -> str:
        """Sleeps too long."""
        await anyio.sleep(10)
        return "late"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("sleepy")]), "ok"])
    result = await Agent(model, tools=[sleepy]).invoke_async("go")
    assert result.tool_calls[0].status == "error"
    assert "timed out after 0.05 seconds" in str(result.tool_calls[0].output)


@pytest.mark.anyio
async def test_max_steps_fails_with_a_clear_code() -> None:
    model = ScriptedModel([ScriptedTurn(tool_calls=[call("add", a=1, b=1)])], repeat=True)
    agent = Agent(model, tools=[add], limits=RunLimits(max_steps=3))
    result = await agent.invoke_async("loop forever")
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "max_steps_exceeded"
    assert len(model.requests) == 3
    assert_history_valid(agent.messages)


@pytest.mark.anyio
async def test_sync_call_inside_an_event_loop_is_refused() -> None:
    agent = Agent(ScriptedModel(["x"]))
    with pytest.raises(RunInProgressError, match="invoke_async"):
        agent("hi")


@pytest.mark.anyio
async def test_run_context_and_invocation_state_are_injected_and_shared_by_reference() -> None:
    seen: dict[str, object] = {}

    @tool
    def inspect_run(context: RunContext, scratch: InvocationState) -> str:
        """Look at the run."""
        seen["context_id"] = context.context_id
        seen["run_id"] = context.run_id
        seen["step"] = context.step
        scratch["secret"] = object()  # not JSON: must never be serialized
        return "looked"

    model = ScriptedModel([ScriptedTurn(tool_calls=[call("inspect_run")]), "ok"])
    agent = Agent(model, tools=[inspect_run])
    shared = InvocationState(budget=3)
    result = await agent.invoke_async("go", invocation_state=shared)
    assert seen["run_id"] == result.run_id and seen["step"] == 1
    assert "secret" in shared and shared["budget"] == 3
    assert "context" not in str(model.requests[0].tools[0].input_schema)
    for request in model.requests:
        assert "secret" not in repr(request) and "budget" not in repr(request)


@pytest.mark.anyio
async def test_concurrent_turns_on_one_agent_run_one_after_another() -> None:
    model = ScriptedModel([ScriptedTurn(text="first", delay=0.01), "second"])
    agent = Agent(model)
    texts: list[str] = []

    async def send(prompt: str) -> None:
        texts.append((await agent.invoke_async(prompt)).text)

    async with anyio.create_task_group() as group:
        group.start_soon(send, "a")
        await anyio.sleep(0)
        group.start_soon(send, "b")
    assert texts == ["first", "second"]
    assert [m.text for m in agent.messages] == ["a", "first", "b", "second"]


@pytest.mark.anyio
async def test_builtin_tools_write_and_read_state() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[call("write_state", key="colour", value="blue")]),
            "Stored.",
            ScriptedTurn(tool_calls=[call("current_time", timezone="Mars/Base")]),
            "Unknown zone.",
        ]
    )
    agent = Agent(model, tools=[write_state, current_time])
    await agent.invoke_async("remember blue")
    assert agent.state.get("colour") == "blue"
    result = await agent.invoke_async("time on mars")
    assert result.tool_calls[0].status == "error"
    assert "unknown time zone" in str(result.tool_calls[0].output)
    assert all(
        "colour" not in str(m.parts) or isinstance(m.parts[0], ToolCallPart | ToolResultPart)
        for m in model.requests[-1].messages
    )
