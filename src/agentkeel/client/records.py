"""The typed records of the native wire as the Python client returns them.

Each is a frozen dataclass with snake_case fields; `agentkeel.client.wire` is the only
place that knows their camelCase names. `SendResult` lives in `agentkeel.send_result`
(shared with the memory client) and is re-exported here. `ClientOptions` and the
decision helpers live here too, since both clients take and return the same things.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeAlias, TypedDict

import httpx

from agentkeel.events import InterruptEvent, RunEvent
from agentkeel.messages import JSONValue
from agentkeel.send_result import SendResult

__all__ = [
    "DEFAULT_TIMEOUT",
    "AgentInfo",
    "CancelResult",
    "ClientOptions",
    "ClientStreamItem",
    "ContextPage",
    "ContextStatus",
    "ContextSummary",
    "MessagePage",
    "MultitaskPolicy",
    "SendResult",
    "TranscriptMessage",
    "approve",
    "cancel",
    "reject",
]

DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=300.0)
"""A read may wait 5 minutes (``send`` answers when the run ends); a read timeout is a
dropped connection, so the POST is retried with its key and re-attaches to the run."""

MultitaskPolicy: TypeAlias = Literal["queue", "reject", "interrupt", "rollback"]
"""What a turn meets when its context already runs one (SPEC section 5)."""

ContextStatus: TypeAlias = Literal["idle", "running", "suspended"]
"""Whether a conversation has a run going, or waiting for a decision."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentInfo:
    """One entry of ``GET /agents``: an agent a client may talk to."""

    name: str
    description: str = ""
    skills: tuple[str, ...] = ()  # its tool names
    a2a: str | None = None  # the URL of its A2A agent card


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextSummary:
    """One conversation of the caller with an agent, as the context list shows it."""

    context_id: str
    """The conversation's id, to continue it (``AsyncAgentClient(context_id=...)``)."""
    title: str
    """Its first user message, cut to 80 characters; empty with ``server.transcript: false``."""
    created_at: datetime
    updated_at: datetime
    message_count: int
    """How many user and assistant messages the transcript holds."""
    status: ContextStatus
    interrupt: InterruptEvent | None = None
    """What a suspended run waits for (only while `status` is ``suspended``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptMessage:
    """One user or assistant message of a conversation's transcript (a read-only view).

    `id` is stable across restarts, and is what `replace`, `regenerate` and `fork` take.
    The transcript never shows tool inputs or outputs, thinking, or any state.
    """

    id: str
    role: Literal["user", "assistant"]
    text: str
    """The message's text parts, joined."""
    tool_calls: tuple[str, ...] = ()
    """The names of the tools an assistant message called."""
    run_id: str | None = None
    """The run that wrote the message."""
    created_at: datetime | None = None
    agent: str | None = None
    """The swarm member that wrote an assistant message (swarms only)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextPage:
    """A page of the context list, most recently updated first."""

    contexts: tuple[ContextSummary, ...]
    next_cursor: str | None = None
    """Pass it as ``cursor`` for the next page; None on the last one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagePage:
    """A page of a transcript, oldest first."""

    messages: tuple[TranscriptMessage, ...]
    next_cursor: str | None = None
    """Set when more messages follow (ask for those ``after`` the last one)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelResult:
    """The server's answer to a cancel: the run it is stopping."""

    run_id: str
    status: Literal["cancelling"] = "cancelling"


ClientStreamItem: TypeAlias = RunEvent | SendResult
"""What `AsyncAgentClient.stream` yields: the run's events, then one SendResult."""


class ClientOptions(TypedDict, total=False):
    """The options both clients take, each optional."""

    api_key: str | None
    """A static API key, sent as ``Authorization: Bearer <key>``."""
    token: str | None
    """A bearer JWT, sent as ``Authorization: Bearer <token>`` (not with `api_key`)."""
    context_id: str | None
    """A conversation to continue (or a new id of your own); None: the server mints one."""
    on_context: Callable[[str], None] | None
    """Called with the context id when it becomes known or changes; persist it there."""
    timeout: httpx.Timeout | float | None
    """HTTP timeouts; `DEFAULT_TIMEOUT` by default."""
    max_retries: int
    """Retries of a dropped connection (default 6); on a stream, each frame resets it."""


def approve() -> JSONValue:
    """The decision that lets a tool waiting for approval run."""
    return {"approved": True}


def reject(reason: str = "rejected by the user") -> JSONValue:
    """The decision that refuses a tool call; the model gets `reason` as the tool's error."""
    return {"approved": False, "reason": reason}


def cancel() -> JSONValue:
    """The decision that abandons the suspended run, whatever it waits for."""
    return {"cancel": True}
