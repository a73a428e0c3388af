"""The run events: one frozen dataclass per SPEC section 4 event type.

These are what `Agent.stream` yields and what the server turns into SSE frames (only
`runtime/channels.py` encodes them). `agent` is set on the events of a swarm member.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from agentkeel.messages import JSONObject, JSONValue

__all__ = [
    "ErrorEvent",
    "InterruptEvent",
    "RunEvent",
    "StatusEvent",
    "StepEvent",
    "ThinkingEvent",
    "TokenEvent",
    "ToolCallEvent",
    "ToolResultEvent",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusEvent:
    """The run started (or resumed)."""

    status: Literal["running"] = "running"
    agent: str | None = None
    type: Literal["status"] = "status"


@dataclass(frozen=True, slots=True, kw_only=True)
class StepEvent:
    """A new cycle of the run loop: one model call. `step` is 1-based."""

    step: int
    agent: str | None = None
    type: Literal["step"] = "step"


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEvent:
    """A delta of the completion text."""

    text: str
    agent: str | None = None
    type: Literal["token"] = "token"


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingEvent:
    """A delta of the model's reasoning."""

    text: str
    agent: str | None = None
    type: Literal["thinking"] = "thinking"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent:
    """A tool execution starts; the input stays on the server unless the tool is exposed."""

    id: str
    name: str
    input: JSONObject | None = None
    """The call's input (secret inputs masked), only for a tool declared ``expose``."""
    agent: str | None = None
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultEvent:
    """A tool execution ended; the output stays on the server unless the tool is exposed."""

    id: str
    name: str
    status: Literal["success", "error"]
    exposed: bool = False
    """Whether `output` crosses the wire (the tool is declared ``expose``)."""
    output: JSONValue = None
    agent: str | None = None
    type: Literal["tool_result"] = "tool_result"


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptEvent:
    """The run suspends for a human decision."""

    id: str
    kind: Literal["approval", "input"]
    tool: str | None = None
    prompt: str | None = None
    agent: str | None = None
    type: Literal["interrupt"] = "interrupt"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent:
    """The run failed. `message` is safe to show: no stack trace, no secret."""

    code: str
    message: str
    agent: str | None = None
    type: Literal["error"] = "error"


RunEvent: TypeAlias = (
    StatusEvent
    | StepEvent
    | TokenEvent
    | ThinkingEvent
    | ToolCallEvent
    | ToolResultEvent
    | InterruptEvent
    | ErrorEvent
)
