"""Conversation managers, the @tool decorator, the message codec and ids."""

from __future__ import annotations

import json

import pytest

from agentkeel import (
    Agent,
    ConfigurationError,
    InvalidContextIdError,
    ScriptedModel,
    ScriptedToolCall,
    ScriptedTurn,
    SlidingWindowConversationManager,
    tool,
)
from agentkeel.ids import encode_path_segment, new_context_id, validate_context_id
from agentkeel.messages import (
    Message,
    MessageDecodeError,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    dumps_message,
    loads_message,
    messages_from_json,
    messages_to_json,
)
from agentkeel.tools import ToolInputError


@tool
def ping(n: int = 1) -> str:
    """Ping."""
    return "pong" * n


def turn_with_tool(index: int) -> list[Message]:
    call = ToolCallPart(id=f"c{index}", name="ping", input={})
    return [
        Message.user(f"q{index}"),
        Message(role="assistant", parts=(call,)),
        Message(
            role="user", parts=(ToolResultPart(call_id=f"c{index}", name="ping", content="p"),)
        ),
        Message.assistant(f"a{index}"),
    ]


@pytest.mark.parametrize("window", [1, 2, 3, 4, 5, 6, 7])
def test_sliding_window_never_starts_with_an_orphan_tool_result(window: int) -> None:
    history = [m for i in range(5) for m in turn_with_tool(i)]
    manager = SlidingWindowConversationManager(window_size=window)
    selected = list(manager.select(history[:-3], history[-3:]))
    assert selected == list(manager.select(history, []))
    assert selected and selected[0].role == "user" and not selected[0].tool_results
    assert selected == history[-len(selected) :]
    call_ids = {c.id for m in selected for c in m.tool_calls}
    result_ids = {r.call_id for m in selected for r in m.tool_results}
    assert result_ids <= call_ids


@pytest.mark.anyio
async def test_sliding_window_limits_what_the_model_sees_and_trims_memory() -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(tool_calls=[ScriptedToolCall("ping")]),
            "one",
            "two",
            "three",
        ]
    )
    agent = Agent(model, tools=[ping], conversation_manager=SlidingWindowConversationManager(3))
    await agent.invoke_async("first")
    await agent.invoke_async("second")
    await agent.invoke_async("third")
    assert [m.text for m in agent.messages] == ["third", "three"]
    last_request = model.requests[-1].messages
    assert [m.text for m in last_request] == ["second", "two", "third"]


def test_sliding_window_rejects_a_zero_window() -> None:
    with pytest.raises(ConfigurationError):
        SlidingWindowConversationManager(0)


def test_tool_schema_from_signature_and_docstring() -> None:
    @tool
    async def search(query: str, limit: int = 5, tags: list[str] | None = None) -> list[str]:
        """Search the notes.

        Longer explanation that the model also reads.

        Args:
            query: What to look for.
            limit: How many results at most.
            tags: Only notes with these tags.
        """
        return [query] * limit

    assert search.name == "search"
    assert search.description.startswith("Search the notes.")
    assert "Longer explanation" in search.description
    schema = search.input_schema
    assert schema["required"] == ["query"]
    props = schema["properties"]
    assert isinstance(props, dict)
    assert props["query"] == {"description": "What to look for.", "type": "string"}
    limit = props["limit"]
    assert isinstance(limit, dict) and limit["default"] == 5
    assert schema["additionalProperties"] is False
    with pytest.raises(ToolInputError, match="limit"):
        search.validate({"query": "x", "limit": "many"})


def test_tool_options_and_bad_names() -> None:
    @tool(name="custom_name", description="Custom.", requires_approval=True, timeout=3)
    def fn() -> None:
        """Ignored."""

    assert (fn.name, fn.description, fn.requires_approval, fn.timeout) == (
        "custom_name",
        "Custom.",
        True,
        3,
    )
    with pytest.raises(ConfigurationError):
        tool(name="bad name!")(lambda: None)

    def star(*args: int) -> None:
        """Variadic."""

    with pytest.raises(ConfigurationError):
        tool(star)


def test_agent_refuses_plain_functions_and_duplicate_tools() -> None:
    def plain() -> None:
        """Not decorated."""

    with pytest.raises(ConfigurationError, match="@tool"):
        Agent(ScriptedModel([]), tools=[plain])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="two tools"):
        Agent(ScriptedModel([]), tools=[ping, ping])


def test_message_codec_round_trips_every_part_kind() -> None:
    history = [
        Message.user("héllo"),
        Message(
            role="assistant",
            parts=(
                ThinkingPart(text="hmm", signature="sig"),
                TextPart(text="calling"),
                ToolCallPart(id="c1", name="ping", input={"n": 2, "nested": {"a": [1, None]}}),
            ),
        ),
        Message(
            role="user",
            parts=(ToolResultPart(call_id="c1", name="ping", content={"x": 1}, status="error"),),
        ),
    ]
    assert messages_from_json(json.loads(json.dumps(messages_to_json(history)))) == history
    for message in history:
        line = dumps_message(message)
        assert "\n" not in line
        assert loads_message(line) == message


@pytest.mark.parametrize(
    "bad",
    [
        "not json",
        '{"role": "system", "parts": []}',
        '{"role": "user", "parts": [{"kind": "image"}]}',
        '{"role": "user", "parts": [{"kind": "text"}]}',
        '{"role": "user", "parts": "x"}',
        '{"role": "user", "parts": [{"kind": "tool_result", "call_id": "c", "name": "n",'
        ' "status": "odd"}]}',
    ],
)
def test_message_codec_rejects_malformed_input(bad: str) -> None:
    with pytest.raises(MessageDecodeError):
        loads_message(bad)


def test_context_ids_are_minted_and_validated() -> None:
    minted = new_context_id()
    assert minted.startswith("ctx-") and len(minted) == 40
    assert validate_context_id(minted) == minted
    assert validate_context_id("ctx-user@example.com:1") == "ctx-user@example.com:1"
    for bad in ["", "../x", "a/b", "/etc/passwd", "a..b", ".hidden", "x" * 129, "ä", 5]:
        with pytest.raises(InvalidContextIdError):
            validate_context_id(bad)


@pytest.mark.parametrize("raw", ["..", ".", "../x", "/abs", "a/b", "a\\b", "%2e%2e", "a\x00b"])
def test_encoded_segments_never_escape_a_folder(raw: str) -> None:
    encoded = encode_path_segment(raw)
    assert "/" not in encoded and "\\" not in encoded and "\x00" not in encoded
    assert encoded not in (".", "..") and not encoded.startswith(".")
