"""Conversation history as typed messages, and the one JSON codec every store uses.

A message is a role plus a tuple of parts. Parts are frozen dataclasses discriminated by
`kind`, so a history can be matched exhaustively and round-trips through JSON without
loss. Tool results travel in a ``user`` message (as the Anthropic API has it); provider
modules map that onto their own wire shapes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, cast

import pydantic

__all__ = [
    "SCHEMA_VERSION",
    "JSONObject",
    "JSONValue",
    "Message",
    "MessageDecodeError",
    "Part",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultPart",
    "dumps_message",
    "loads_message",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "open_tool_calls",
]

JSONValue: TypeAlias = pydantic.JsonValue
"""Any JSON value. pydantic's alias, so that tool signatures using it validate too."""
JSONObject: TypeAlias = dict[str, JSONValue]

SCHEMA_VERSION = 1
"""Version of the stored message shape; every stored document records it."""

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    """Plain text written by the user or the model."""

    text: str
    kind: Literal["text"] = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingPart:
    """The model's reasoning; `signature` is the provider's opaque proof, kept for replay."""

    text: str
    signature: str | None = None
    kind: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallPart:
    """A tool call the model asked for; `input` is the parsed JSON arguments."""

    id: str
    name: str
    input: JSONObject = field(default_factory=dict)
    kind: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultPart:
    """The outcome of one tool call, matched to it by `call_id`."""

    call_id: str
    name: str
    content: JSONValue
    status: Literal["success", "error"] = "success"
    kind: Literal["tool_result"] = "tool_result"


Part: TypeAlias = TextPart | ThinkingPart | ToolCallPart | ToolResultPart


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One message of a conversation."""

    role: Role
    parts: tuple[Part, ...]

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message holding one text part."""
        return cls(role="user", parts=(TextPart(text=text),))

    @classmethod
    def assistant(cls, text: str) -> Message:
        """An assistant message holding one text part."""
        return cls(role="assistant", parts=(TextPart(text=text),))

    @property
    def text(self) -> str:
        """The concatenated text parts (thinking and tool parts excluded)."""
        return "".join(part.text for part in self.parts if isinstance(part, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool call parts, in order."""
        return tuple(part for part in self.parts if isinstance(part, ToolCallPart))

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        """The tool result parts, in order."""
        return tuple(part for part in self.parts if isinstance(part, ToolResultPart))


class MessageDecodeError(ValueError):
    """A stored or received message does not have the codec's shape."""


def _part_to_json(part: Part) -> JSONObject:
    if isinstance(part, TextPart):
        return {"kind": "text", "text": part.text}
    if isinstance(part, ThinkingPart):
        out: JSONObject = {"kind": "thinking", "text": part.text}
        if part.signature is not None:
            out["signature"] = part.signature
        return out
    if isinstance(part, ToolCallPart):
        return {"kind": "tool_call", "id": part.id, "name": part.name, "input": part.input}
    return {
        "kind": "tool_result",
        "call_id": part.call_id,
        "name": part.name,
        "content": part.content,
        "status": part.status,
    }


def _str(data: Mapping[str, object], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise MessageDecodeError(f"field {key!r} must be a string")
    return value


def _part_from_json(data: object) -> Part:
    if not isinstance(data, dict):
        raise MessageDecodeError("a part must be an object")
    kind = data.get("kind")
    if kind == "text":
        return TextPart(text=_str(data, "text"))
    if kind == "thinking":
        signature = data.get("signature")
        if signature is not None and not isinstance(signature, str):
            raise MessageDecodeError("field 'signature' must be a string")
        return ThinkingPart(text=_str(data, "text"), signature=signature)
    if kind == "tool_call":
        tool_input = data.get("input", {})
        if not isinstance(tool_input, dict):
            raise MessageDecodeError("field 'input' must be an object")
        return ToolCallPart(
            id=_str(data, "id"), name=_str(data, "name"), input=cast(JSONObject, tool_input)
        )
    if kind == "tool_result":
        status = data.get("status", "success")
        if status not in ("success", "error"):
            raise MessageDecodeError("field 'status' must be 'success' or 'error'")
        return ToolResultPart(
            call_id=_str(data, "call_id"),
            name=_str(data, "name"),
            content=cast(JSONValue, data.get("content")),
            status=status,
        )
    raise MessageDecodeError(f"unknown part kind {kind!r}")


def message_to_json(message: Message) -> JSONObject:
    """Encode one message as a JSON object."""
    return {"role": message.role, "parts": [_part_to_json(part) for part in message.parts]}


def message_from_json(data: object) -> Message:
    """Decode one message; raises MessageDecodeError on any shape error."""
    if not isinstance(data, dict):
        raise MessageDecodeError("a message must be an object")
    role = data.get("role")
    if role not in ("user", "assistant"):
        raise MessageDecodeError(f"unknown role {role!r}")
    parts = data.get("parts")
    if not isinstance(parts, list):
        raise MessageDecodeError("field 'parts' must be a list")
    return Message(role=role, parts=tuple(_part_from_json(part) for part in parts))


def messages_to_json(messages: Iterable[Message]) -> list[JSONValue]:
    """Encode a history."""
    return [message_to_json(message) for message in messages]


def messages_from_json(data: object) -> list[Message]:
    """Decode a history."""
    if not isinstance(data, list):
        raise MessageDecodeError("a history must be a list")
    return [message_from_json(item) for item in data]


def dumps_message(message: Message) -> str:
    """One message as compact one-line JSON (a JSONL line without its newline)."""
    return json.dumps(message_to_json(message), ensure_ascii=False, separators=(",", ":"))


def loads_message(line: str | bytes) -> Message:
    """Decode one JSONL line."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise MessageDecodeError(f"not JSON: {exc}") from exc
    return message_from_json(data)


def open_tool_calls(messages: Sequence[Message]) -> list[ToolCallPart]:
    """Tool calls in `messages` that have no result yet, in call order."""
    answered = {result.call_id for message in messages for result in message.tool_results}
    return [call for message in messages for call in message.tool_calls if call.id not in answered]
