"""Conversation history as typed messages, and the one JSON codec every store uses.

A message is a role plus a tuple of parts. Parts are frozen dataclasses discriminated by
`kind`, so a history can be matched exhaustively and round-trips through JSON without
loss. Tool results travel in a ``user`` message (as the Anthropic API has it); provider
modules map that onto their own wire shapes.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias, cast

import pydantic

__all__ = [
    "SCHEMA_VERSION",
    "JSONObject",
    "JSONValue",
    "MESSAGE_ID_PATTERN",
    "Message",
    "MessageDecodeError",
    "Part",
    "Role",
    "TextPart",
    "ThinkingPart",
    "ToolCallPart",
    "ToolResultPart",
    "committed",
    "dumps_message",
    "loads_message",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "new_message_id",
    "open_tool_calls",
    "position_message_id",
]

JSONValue: TypeAlias = pydantic.JsonValue
"""Any JSON value. pydantic's alias, so that tool signatures using it validate too."""
JSONObject: TypeAlias = dict[str, JSONValue]

SCHEMA_VERSION = 1
"""Version of the stored message shape; every stored document records it."""

Role = Literal["user", "assistant"]

MESSAGE_ID_PATTERN = re.compile(r"^msg-[0-9a-f]{24}$")
"""A message id (SPEC section 3): ``msg-`` and 24 lowercase hex characters."""


def new_message_id() -> str:
    """A fresh message id (96 random bits), minted when a message is created."""
    return "msg-" + secrets.token_hex(12)


def position_message_id(position: int) -> str:
    """The id of a message stored before ids existed: its position in the history, in hex.

    Stable because a history only grows at its end or is cut off after a position, and
    because the first rewrite of such a history stores the ids it was loaded with.
    """
    return f"msg-{position:024x}"


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
    id: str = field(default_factory=new_message_id, compare=False)
    """Stable across restarts and replicas, what a transcript names the message by.

    Left out of equality (two messages saying the same thing are equal) and never sent
    to a model provider (provider modules map parts, not messages).
    """
    run_id: str | None = field(default=None, compare=False)
    """The run that committed the message (set when its turn commits), for transcripts."""
    created_at: float | None = field(default=None, compare=False)
    """Unix time at which its turn committed (None in histories written before 0.3)."""
    agent: str | None = field(default=None, compare=False)
    """The swarm member that wrote it, in a swarm's own transcript history (else None)."""

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
    """Encode one message as a JSON object (with its id, for storage; not for providers)."""
    data: JSONObject = {
        "id": message.id,
        "role": message.role,
        "parts": [_part_to_json(part) for part in message.parts],
    }
    if message.run_id is not None:
        data["run_id"] = message.run_id
    if message.created_at is not None:
        data["created_at"] = round(message.created_at, 3)
    if message.agent is not None:
        data["agent"] = message.agent
    return data


def _message_id(data: Mapping[str, object], position: int | None) -> str:
    value = data.get("id")
    if value is None:
        return new_message_id() if position is None else position_message_id(position)
    if not isinstance(value, str) or not MESSAGE_ID_PATTERN.fullmatch(value):
        raise MessageDecodeError("field 'id' must match ^msg-[0-9a-f]{24}$")
    return value


def message_from_json(data: object, *, position: int | None = None) -> Message:
    """Decode one message; raises MessageDecodeError on any shape error.

    A message stored before ids existed gets `position_message_id(position)` when its
    position in the history is given, and a fresh id otherwise.
    """
    if not isinstance(data, dict):
        raise MessageDecodeError("a message must be an object")
    role = data.get("role")
    if role not in ("user", "assistant"):
        raise MessageDecodeError(f"unknown role {role!r}")
    parts = data.get("parts")
    if not isinstance(parts, list):
        raise MessageDecodeError("field 'parts' must be a list")
    run_id = data.get("run_id")
    if run_id is not None and not isinstance(run_id, str):
        raise MessageDecodeError("field 'run_id' must be a string")
    created_at = data.get("created_at")
    if created_at is not None and (
        not isinstance(created_at, int | float) or isinstance(created_at, bool)
    ):
        raise MessageDecodeError("field 'created_at' must be a number")
    agent = data.get("agent")
    if agent is not None and not isinstance(agent, str):
        raise MessageDecodeError("field 'agent' must be a string")
    return Message(
        role=role,
        parts=tuple(_part_from_json(part) for part in parts),
        id=_message_id(data, position),
        run_id=run_id,
        created_at=None if created_at is None else float(created_at),
        agent=agent,
    )


def messages_to_json(messages: Iterable[Message]) -> list[JSONValue]:
    """Encode a history."""
    return [message_to_json(message) for message in messages]


def messages_from_json(data: object, *, start: int = 0) -> list[Message]:
    """Decode a history (or the part of one from position `start` on)."""
    if not isinstance(data, list):
        raise MessageDecodeError("a history must be a list")
    return [message_from_json(item, position=start + i) for i, item in enumerate(data)]


def dumps_message(message: Message) -> str:
    """One message as compact one-line JSON (a JSONL line without its newline)."""
    return json.dumps(message_to_json(message), ensure_ascii=False, separators=(",", ":"))


def loads_message(line: str | bytes, *, position: int | None = None) -> Message:
    """Decode one JSONL line (`position` as for `message_from_json`)."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise MessageDecodeError(f"not JSON: {exc}") from exc
    return message_from_json(data, position=position)


def committed(messages: Iterable[Message], run_id: str) -> list[Message]:
    """`messages` as a turn commits them: with the run's id and the commit's time."""
    now = time.time()
    return [replace(message, run_id=run_id, created_at=now) for message in messages]


def open_tool_calls(messages: Sequence[Message]) -> list[ToolCallPart]:
    """Tool calls in `messages` that have no result yet, in call order."""
    answered = {result.call_id for message in messages for result in message.tool_results}
    return [call for message in messages for call in message.tool_calls if call.id not in answered]
