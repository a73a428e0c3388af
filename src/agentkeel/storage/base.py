"""The SessionStorage interface and the records it stores.

A backend stores, per session key, the conversation history, the AgentState, metadata
and one record per run. The interface is deliberately transactional rather than
file-shaped: `append` adds a turn's messages *and* the new state as one unit (a file
backend does it with fsynced appends, a database with one transaction), and `rewrite`
replaces the history atomically when a conversation manager trimmed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agentkeel.errors import StorageError
from agentkeel.ids import validate_context_id, validate_definition_name
from agentkeel.interrupts import Interrupt
from agentkeel.messages import SCHEMA_VERSION, JSONObject, JSONValue, Message
from agentkeel.result import RUN_STATUSES, ErrorInfo, RunStatus, ToolCallRecord, Usage

__all__ = [
    "RunEventStorage",
    "RunRecord",
    "SessionKey",
    "SessionMetadata",
    "SessionSnapshot",
    "SessionStorage",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionKey:
    """Which session: an agent definition, a context id and (with auth on) a principal.

    The same context id under two definitions or two principals is two sessions.
    """

    definition: str
    context_id: str
    principal: str | None = None

    def __post_init__(self) -> None:
        validate_definition_name(self.definition)
        validate_context_id(self.context_id)
        if self.principal is not None and not self.principal:
            raise StorageError("a principal must be a non-empty string or None")

    @property
    def session_id(self) -> str:
        """``"<def-name>:<contextId>"``, the seed's session id."""
        return f"{self.definition}:{self.context_id}"

    @classmethod
    def parse(cls, session_id: str, *, principal: str | None = None) -> SessionKey:
        """Split a ``"<def-name>:<contextId>"`` session id."""
        definition, sep, context_id = session_id.partition(":")
        if not sep:
            raise StorageError(f"session id {session_id!r} must look like '<def-name>:<contextId>'")
        return cls(definition=definition, context_id=context_id, principal=principal)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMetadata:
    """What `session.json` holds besides the history and state."""

    definition: str
    context_id: str
    owner: str | None
    created_at: float
    updated_at: float
    message_count: int = 0
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSnapshot:
    """A session as loaded: the history, the AgentState and the metadata."""

    messages: list[Message]
    state: JSONObject
    metadata: SessionMetadata


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """One run, server-side only: input, status, tool calls with inputs and outputs."""

    run_id: str
    status: RunStatus
    input: JSONValue
    started_at: float
    ended_at: float | None = None
    text: str = ""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    usage: Usage = field(default_factory=Usage)
    error: ErrorInfo | None = None
    interrupts: tuple[Interrupt, ...] = ()
    stop_reason: str | None = None
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> JSONObject:
        """Encode as the `runs/<runId>.json` document."""
        return {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "status": self.status,
            "input": self.input,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration_ms": None
            if self.ended_at is None
            else round((self.ended_at - self.started_at) * 1000, 3),
            "text": self.text,
            "stop_reason": self.stop_reason,
            "tool_calls": [record.to_json() for record in self.tool_calls],
            "usage": self.usage.to_json(),
            "error": None if self.error is None else self.error.to_json(),
            "interrupts": [item.to_json() for item in self.interrupts],
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> RunRecord:
        """Decode a run record; raises ValueError (or KeyError/TypeError) when malformed."""
        status = RUN_STATUSES.get(str(data["status"]))
        if status is None:
            raise ValueError(f"unknown run status {data['status']!r}")
        usage = data.get("usage") or {}
        error = data.get("error")
        tool_calls = data.get("tool_calls") or []
        interrupts = data.get("interrupts") or []
        started = data["started_at"]
        ended = data.get("ended_at")
        if (
            not isinstance(usage, dict)
            or not isinstance(tool_calls, list)
            or not isinstance(interrupts, list)
            or not isinstance(started, int | float)
        ):
            raise ValueError("malformed run record")
        return cls(
            run_id=str(data["run_id"]),
            status=status,
            input=data.get("input"),
            started_at=float(started),
            ended_at=float(ended) if isinstance(ended, int | float) else None,
            text=str(data.get("text") or ""),
            tool_calls=tuple(
                ToolCallRecord.from_json(item) for item in tool_calls if isinstance(item, dict)
            ),
            usage=Usage.from_json(usage),
            error=ErrorInfo(code=str(error["code"]), message=str(error["message"]))
            if isinstance(error, dict)
            else None,
            interrupts=tuple(
                Interrupt.from_json(item) for item in interrupts if isinstance(item, dict)
            ),
            stop_reason=None if data.get("stop_reason") is None else str(data["stop_reason"]),
            schema_version=int(data.get("schema_version") or SCHEMA_VERSION),  # type: ignore[arg-type]
        )


@runtime_checkable
class SessionStorage(Protocol):
    """Where sessions live. Every method is async; backends do blocking I/O off the loop.

    Raises CorruptSessionError (naming the file or row) for stored data it cannot decode,
    and never overwrites such data.
    """

    async def load(self, key: SessionKey) -> SessionSnapshot | None:
        """The session, or None if it was never saved."""
        ...

    async def append(
        self, key: SessionKey, messages: Sequence[Message], state: JSONObject | None
    ) -> None:
        """Append one turn's messages and, when `state` is not None, replace the state.

        All of it lands or none of it does. Creates the session on first use.
        """
        ...

    async def rewrite(
        self, key: SessionKey, messages: Sequence[Message], state: JSONObject
    ) -> None:
        """Replace the whole history and state atomically (a conversation manager trimmed)."""
        ...

    async def delete(self, key: SessionKey) -> bool:
        """Forget the session and its runs; True if there was one."""
        ...

    async def put_run(self, key: SessionKey, record: RunRecord) -> None:
        """Create or replace the record of one run (atomically)."""
        ...

    async def get_run(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """One run's record, or None."""
        ...

    async def list_runs(self, key: SessionKey) -> list[RunRecord]:
        """Every run record of the session, oldest first."""
        ...


@runtime_checkable
class RunEventStorage(Protocol):
    """Optional capability: keep a run's stream frames so a client can reconnect later.

    A backend that has it keeps them beside the run record; the server checks it with
    `isinstance` and, without it, retains events in memory only. Each frame is the JSON
    object the server sends as one SSE ``data:`` line, plus its ``id``.
    """

    async def put_events(self, key: SessionKey, run_id: str, frames: Sequence[JSONObject]) -> None:
        """Replace the retained frames of one run (atomically)."""
        ...

    async def get_events(self, key: SessionKey, run_id: str) -> list[JSONObject] | None:
        """The retained frames of one run, or None when none are kept."""
        ...
