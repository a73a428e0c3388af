"""Pydantic models of what the native wire answers (SPEC 3 and 4), for the OpenAPI document.

The request models (`agentkeel.runtime.wire.SendRequest`) validate every request body
and describe it in the document. Responses are built as plain dicts on the hot path (a
token frame per delta), so these models are their schema: the OpenAPI test and the
fuzzing run validate every response the server really sends against them, which is
what keeps the dicts and this module from drifting apart.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agentkeel.messages import MESSAGE_ID_PATTERN

__all__ = [
    "AgentList",
    "CancelAccepted",
    "ContextPage",
    "ContextSummary",
    "DeletedCount",
    "DoneFrame",
    "ErrorBody",
    "EventFrame",
    "ForkCreated",
    "Health",
    "MemoryPage",
    "SendResult",
    "TranscriptMessage",
    "TranscriptPage",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class _Open(BaseModel):
    """A shape that may grow fields (usage counts, binding metadata): extra keys allowed."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ErrorInfo(_Out):
    """``{"code", "message"}``: the code is stable (see ``x-error-codes``), the message prose."""

    code: str = Field(min_length=1)
    message: str
    interrupt_id: str | None = Field(default=None, alias="interruptId")
    """On ``409 interrupt_pending``: the interrupt that waits for a decision."""


class ErrorBody(_Out):
    """Every error answer of the native wire: ``{"error": {"code", "message"}}``."""

    error: ErrorInfo


class Usage(_Open):
    """Tokens of a run, all model calls summed; ``cost`` only when the model has a price."""

    input_tokens: int = Field(alias="inputTokens", ge=0)
    output_tokens: int = Field(alias="outputTokens", ge=0)
    cached_tokens: int | None = Field(default=None, alias="cachedTokens", ge=0)
    reasoning_tokens: int | None = Field(default=None, alias="reasoningTokens", ge=0)
    cost: float | None = None


class Interrupt(_Out):
    """A pending human decision; the tool's input stays on the server."""

    id: str
    kind: Literal["approval", "input"]
    tool: str | None = None
    prompt: str | None = None


RunStatus = Literal["completed", "suspended", "failed", "cancelled"]


class SendResult(_Out):
    """The end of one turn: the body of ``send``, and the fields of the ``done`` frame."""

    context_id: str = Field(alias="contextId")
    run_id: str = Field(alias="runId")
    status: RunStatus
    text: str
    tool_calls: list[str] = Field(alias="toolCalls")
    usage: Usage
    output: JsonValue = None
    interrupt: Interrupt | None = None
    error: ErrorInfo | None = None
    agent: str | None = None
    """A swarm's: the member that answered (or stopped) last."""


class DoneFrame(SendResult):
    """The last frame of a stream: ``done: true`` and the SendResult fields."""

    done: Literal[True]


class StatusEventBody(_Out):
    type: Literal["status"]
    status: Literal["running"]


class StepEventBody(_Out):
    type: Literal["step"]
    step: int = Field(ge=1)


class TokenEventBody(_Out):
    type: Literal["token"]
    text: str


class ThinkingEventBody(_Out):
    type: Literal["thinking"]
    text: str


class ToolCallEventBody(_Out):
    type: Literal["tool_call"]
    id: str
    name: str


class ToolResultEventBody(_Out):
    type: Literal["tool_result"]
    id: str
    name: str
    status: Literal["success", "error"]


class InterruptEventBody(_Out):
    type: Literal["interrupt"]
    id: str
    kind: Literal["approval", "input"]
    tool: str | None = None
    prompt: str | None = None


class ErrorEventBody(_Out):
    type: Literal["error"]
    code: str
    message: str


RunEventBody = Annotated[
    StatusEventBody
    | StepEventBody
    | TokenEventBody
    | ThinkingEventBody
    | ToolCallEventBody
    | ToolResultEventBody
    | InterruptEventBody
    | ErrorEventBody,
    Field(discriminator="type"),
]


class EventFrame(_Out):
    """One event frame of a stream (every frame but the last)."""

    context_id: str = Field(alias="contextId")
    run_id: str = Field(alias="runId")
    event: RunEventBody
    agent: str | None = None


class AgentInfo(_Out):
    """One served agent as ``GET /agents`` lists it; never a secret."""

    name: str
    description: str
    skills: list[str]
    a2a: str
    """The URL of its A2A agent card."""


class AgentList(_Out):
    """``GET /agents``."""

    agents: list[AgentInfo]


class Health(_Open):
    """``/healthz`` and ``/readyz``: ``ok``, or why the server is not ready."""

    status: Literal["ok", "draining", "unavailable"]


class MemorySource(_Out):
    context_id: str | None = Field(alias="contextId")
    agent: str | None


class MemoryItem(_Out):
    """One remembered item as its owner sees it (never its vector)."""

    key: str
    namespace: str
    text: str
    value: JsonValue = None
    created_at: str = Field(alias="createdAt")
    updated_at: str = Field(alias="updatedAt")
    source: MemorySource
    score: float | None = None
    """Only in search results (``?q=``)."""


class MemoryPage(_Out):
    """``GET /agents/{name}/memory``: a page of items, or the matches of ``?q=``."""

    items: list[MemoryItem]
    next_cursor: str | None = Field(alias="nextCursor")


class DeletedCount(_Out):
    """``DELETE /agents/{name}/memory``: how many items were forgotten."""

    deleted: int = Field(ge=0)


class CancelAccepted(_Out):
    """``202`` of ``POST .../cancel``: the run that is being stopped."""

    run_id: str = Field(alias="runId")
    status: Literal["cancelling"]


class ContextUsage(_Out):
    """Tokens of every run of a context, summed (when the storage counts them)."""

    input_tokens: int = Field(alias="inputTokens", ge=0)
    output_tokens: int = Field(alias="outputTokens", ge=0)


class ContextSummary(_Out):
    """One conversation as ``GET /agents/{name}/contexts[/{contextId}]`` shows it."""

    context_id: str = Field(alias="contextId")
    title: str = Field(max_length=80)
    """The first user message, cut to 80 characters (empty with ``server.transcript: false``)."""
    created_at: str = Field(alias="createdAt")
    updated_at: str = Field(alias="updatedAt")
    message_count: int = Field(alias="messageCount", ge=0)
    status: Literal["idle", "running", "suspended"]
    interrupt: Interrupt | None = None
    """Only while suspended: the interrupt that waits for a decision."""
    usage: ContextUsage | None = None


class ContextPage(_Out):
    """``GET /agents/{name}/contexts``: the caller's conversations, newest first."""

    contexts: list[ContextSummary]
    next_cursor: str | None = Field(alias="nextCursor")


class TranscriptMessage(_Out):
    """One user or assistant message of the transcript; never tool inputs or outputs."""

    id: str = Field(pattern=MESSAGE_ID_PATTERN.pattern)
    role: Literal["user", "assistant"]
    text: str
    tool_calls: list[str] = Field(alias="toolCalls")
    run_id: str | None = Field(default=None, alias="runId")
    created_at: str | None = Field(default=None, alias="createdAt")
    agent: str | None = None
    """A swarm's: the member that wrote it."""


class TranscriptPage(_Out):
    """``GET .../messages``: a page of the transcript, oldest first."""

    messages: list[TranscriptMessage]
    next_cursor: str | None = Field(alias="nextCursor")


class ForkCreated(_Out):
    """``201`` of ``POST .../fork``: the new context."""

    context_id: str = Field(alias="contextId")
