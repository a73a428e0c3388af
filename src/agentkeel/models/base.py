"""The Model interface and the chunk types every provider streams.

A provider module maps a ModelRequest onto its wire format and parses the streamed
answer into these chunks; the core never sees a vendor's shapes. Tool-call arguments
arrive as JSON text fragments keyed by `index` and are assembled by the run loop, so a
provider only has to pass on what its wire streams.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, runtime_checkable

from agentkeel.messages import JSONObject, Message
from agentkeel.result import Usage

__all__ = [
    "FINAL_ANSWER_TOOL",
    "Finish",
    "Model",
    "ModelChunk",
    "ModelRequest",
    "ModelSettings",
    "OutputSchema",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolSpec",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What the model is told about one tool."""

    name: str
    description: str
    input_schema: JSONObject


FINAL_ANSWER_TOOL = "final_answer"
"""The tool a provider without a native structured-output mode offers for the answer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSchema:
    """The shape the model's final answer must have (an agent's `output_type`).

    A provider asks for it its own way: a native JSON-schema response format where it
    has one, else a `FINAL_ANSWER_TOOL` tool whose input is the answer. `schema` is
    always a JSON object schema; `strict_schema` is the same schema in the form a strict
    mode accepts (every property required, no extra properties), or None when the type
    cannot be expressed that way (optional fields, free-form mappings).
    """

    name: str
    schema: JSONObject
    strict_schema: JSONObject | None = None
    description: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Generation settings a provider passes on when it supports them."""

    max_tokens: int | None = None
    temperature: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """One model call: the messages the conversation manager chose, tools, system prompt."""

    messages: tuple[Message, ...]
    system_prompt: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    output: OutputSchema | None = None
    """The structured answer expected, if the agent has an output type."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A fragment of completion text."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingDelta:
    """A fragment of reasoning; a signature (Anthropic) may arrive in its own delta."""

    text: str = ""
    signature: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A fragment of a tool call: `index` groups fragments; id and name come once."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    """The end of the model's answer: why it stopped and what it cost.

    `stop_reason` is normalized: ``end_turn``, ``tool_use``, ``max_tokens``,
    ``content_filter`` or ``stop_sequence``.
    """

    stop_reason: str = "end_turn"
    usage: Usage = field(default_factory=Usage)


ModelChunk: TypeAlias = TextDelta | ThinkingDelta | ToolCallDelta | Finish


@runtime_checkable
class Model(Protocol):
    """A model provider. `stream` yields chunks and raises a ModelError subclass on failure."""

    @property
    def name(self) -> str:
        """A short name for logs and metrics, e.g. ``openai:gpt-4o-mini``."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Stream the answer to `request`."""
        ...
