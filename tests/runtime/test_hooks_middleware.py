"""Hooks (typed events, writable fields, order) and agent middleware (composition order)."""

from __future__ import annotations

import pytest

from agentkeel import (
    Agent,
    AgentMiddleware,
    InvocationState,
    RunContext,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    TokenEvent,
    tool,
)
from agentkeel.hooks import (
    AfterModelCallEvent,
    AfterRunEvent,
    AfterToolCallEvent,
    BeforeModelCallEvent,
    BeforeRunEvent,
    BeforeToolCallEvent,
    HookRegistry,
    MessageAddedEvent,
)
from agentkeel.messages import Message, TextPart, ToolCallPart
from agentkeel.middleware import ModelResponse, ToolHandler, ToolOutcome
from agentkeel.models.base import ModelRequest


@tool
def echo(text: str) -> str:
    """Echo the text."""
    return text


class Recorder:
    """A hook provider that records every event it sees, by name."""

    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log

    def register_hooks(self, registry: HookRegistry) -> None:
        for event_type in (
            BeforeRunEvent,
            AfterRunEvent,
            BeforeModelCallEvent,
            AfterModelCallEvent,
            BeforeToolCallEvent,
            AfterToolCallEvent,
            MessageAddedEvent,
        ):
            registry.add_callback(event_type, self._record)

    def _record(self, event: object) -> None:
        self.log.append(f"{self.label}:{type(event).__name__}")


@pytest.mark.anyio
async def test_hooks_fire_in_order_and_after_events_run_in_reverse() -> None:
    log: list[str] = []
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("echo", {"text": "x"})]), "ok"]
    )
    agent = Agent(model, tools=[echo], hooks=[Recorder("a", log), Recorder("b", log)])
    await agent.invoke_async("go")
    names = [entry.split(":")[1] for entry in log[::2]]
    assert names == [
        "BeforeRunEvent",
        "BeforeModelCallEvent",
        "AfterModelCallEvent",
        "MessageAddedEvent",
        "BeforeToolCallEvent",
        "AfterToolCallEvent",
        "BeforeModelCallEvent",
        "AfterModelCallEvent",
        "MessageAddedEvent",
        "AfterRunEvent",
    ]
    assert log[0:2] == ["a:BeforeRunEvent", "b:BeforeRunEvent"]
    assert log[-2:] == ["b:AfterRunEvent", "a:AfterRunEvent"]
    assert log[4:6] == ["b:AfterModelCallEvent", "a:AfterModelCallEvent"]


@pytest.mark.anyio
async def test_before_tool_hook_can_replace_input_and_cancel_and_after_can_replace_output() -> None:
    def rewrite(event: BeforeToolCallEvent) -> None:
        if event.tool_input.get("text") == "secret":
            event.cancel = "refused by policy"
        else:
            event.tool_input = {"text": "rewritten"}

    def redact(event: AfterToolCallEvent) -> None:
        event.output = f"[{event.output}]"

    model = ScriptedModel(
        [
            ScriptedTurn(
                tool_calls=[
                    ScriptedToolCall("echo", {"text": "hello"}),
                    ScriptedToolCall("echo", {"text": "secret"}),
                ]
            ),
            "ok",
        ]
    )
    agent = Agent(model, tools=[echo])
    agent.hooks.add_callback(BeforeToolCallEvent, rewrite)
    agent.hooks.add_callback(AfterToolCallEvent, redact)
    result = await agent.invoke_async("go")
    outputs = [(r.content, r.status) for r in model.requests[1].messages[-1].tool_results]
    # a cancelled call never ran, so no after-tool hook saw it
    assert outputs == [("[rewritten]", "success"), ("refused by policy", "error")]
    assert result.tool_calls[0].status == "success"


@pytest.mark.anyio
async def test_read_only_hook_fields_cannot_be_changed() -> None:
    def tamper(event: BeforeToolCallEvent) -> None:
        event.tool_name = "other"

    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("echo", {"text": "x"})]), "ok"]
    )
    agent = Agent(model, tools=[echo])
    agent.hooks.add_callback(BeforeToolCallEvent, tamper)
    result = await agent.invoke_async("go")
    # a hook bug fails the run cleanly (no stack trace in the result) and keeps history valid
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "internal_error"
    assert "read-only" not in result.error.message
    assert agent.messages[-1].tool_results[0].status == "error"


@pytest.mark.anyio
async def test_invocation_state_written_by_a_tool_is_seen_by_a_later_hook() -> None:
    @tool
    def count(scratch: InvocationState) -> str:
        """Count something into the invocation state."""
        scratch["counted"] = int(str(scratch.get("counted", 0))) + 1
        return "counted"

    seen: list[object] = []

    async def after_run(event: AfterRunEvent) -> None:
        seen.append(event.context.invocation_state.get("counted"))

    model = ScriptedModel([ScriptedTurn(tool_calls=[ScriptedToolCall("count")]), "ok"])
    agent = Agent(model, tools=[count])
    agent.hooks.add_callback(AfterRunEvent, after_run)
    await agent.invoke_async("go")
    assert seen == [1]


class Tagger(AgentMiddleware):
    """Records the order it is called in and changes what passes through."""

    def __init__(self, label: str, log: list[str]) -> None:
        self.label = label
        self.log = log

    async def before_model(self, context: RunContext, request: ModelRequest) -> ModelRequest:
        self.log.append(f"before:{self.label}")
        prompt = (request.system_prompt or "") + f"[{self.label}]"
        return ModelRequest(messages=request.messages, system_prompt=prompt, tools=request.tools)

    async def after_model(self, context: RunContext, response: ModelResponse) -> ModelResponse:
        self.log.append(f"after:{self.label}")
        if response.message.tool_calls:
            return response
        message = Message(
            role="assistant", parts=(TextPart(text=response.message.text + f" <{self.label}>"),)
        )
        return ModelResponse(message=message, stop_reason=response.stop_reason)

    async def wrap_tool(
        self, context: RunContext, call: ToolCallPart, call_next: ToolHandler
    ) -> ToolOutcome:
        self.log.append(f"tool-in:{self.label}")
        changed = ToolCallPart(
            id=call.id, name=call.name, input={"text": f"{call.input['text']}+{self.label}"}
        )
        outcome = await call_next(changed)
        self.log.append(f"tool-out:{self.label}")
        return outcome


@pytest.mark.anyio
async def test_middleware_composition_order_and_appended_text_arrives_as_tokens() -> None:
    log: list[str] = []
    model = ScriptedModel(
        [ScriptedTurn(tool_calls=[ScriptedToolCall("echo", {"text": "x"})]), "Hi"]
    )
    agent = Agent(model, tools=[echo], middleware=[Tagger("outer", log), Tagger("inner", log)])
    items = [item async for item in agent.stream("go")]
    result = items[-1]
    assert model.requests[0].system_prompt == "[outer][inner]"
    assert log[:2] == ["before:outer", "before:inner"]
    assert log[2:4] == ["after:inner", "after:outer"]
    assert log[4:8] == ["tool-in:outer", "tool-in:inner", "tool-out:inner", "tool-out:outer"]
    assert result.tool_calls[0].output == "x+outer+inner"  # type: ignore[union-attr]
    assert result.text == "Hi <inner> <outer>"  # type: ignore[union-attr]
    tokens = "".join(i.text for i in items if isinstance(i, TokenEvent))
    assert tokens == "Hi <inner> <outer>"
