"""The SessionStorage interface and the records it stores.

A backend stores, per session key, the conversation history, the AgentState, metadata
and one record per run. The interface is deliberately transactional rather than
file-shaped: `append` adds a turn's messages *and* the new state as one unit (a file
backend does it with fsynced appends, a database with one transaction), and `rewrite`
replaces the history atomically when a conversation manager trimmed it.

Every committed turn moves the session's *version* (its turn number) on by one. A writer
passes the version it loaded (`expected_version`) and, when it holds a lease, the lease's
fencing token (`fence`); a backend refuses a write whose version is stale or whose fence
is lower than one it already accepted, with `ConcurrentWriteError`, and stores nothing of
it. That is what lets several processes share one backend (SPEC guarantees 9 and 10).

Besides the interface every backend has, optional capabilities are small Protocols of
their own (`IncrementalLoadStorage`, `RunEventStorage`, `TaskIndexStorage`,
`SessionDocumentStorage`), checked with `isinstance` by the code that needs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agentkeel.errors import StorageError
from agentkeel.interrupts import Interrupt
from agentkeel.keys import SessionKey
from agentkeel.messages import SCHEMA_VERSION, JSONObject, JSONValue, Message
from agentkeel.result import RUN_STATUSES, ErrorInfo, RunStatus, ToolCallRecord, Usage

__all__ = [
    "IncrementalLoadStorage",
    "RunEventStorage",
    "RunRecord",
    "SessionDocumentStorage",
    "SessionKey",
    "SessionMetadata",
    "SessionSnapshot",
    "SessionStorage",
    "StorageHealth",
    "TaskIndexStorage",
]


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
    version: int = 0
    """The number of the last committed turn: what a writer passes as `expected_version`."""
    kept: int = 0
    """How many messages of the history come before `messages`: 0 for a whole history
    (what `load` answers); `IncrementalLoadStorage.load_since` answers the caller's count
    when only the messages after the ones the caller holds were read."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageHealth:
    """What `SessionStorage.health` found: whether turns can be saved, and why not."""

    ok: bool
    detail: str = ""


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

    def __post_init__(self) -> None:
        # a status no reader knows would make the whole runs file unreadable later
        if self.status not in RUN_STATUSES:
            raise StorageError(
                f"a run's status is one of {', '.join(RUN_STATUSES)}, not {self.status!r}"
            )

    def to_json(self) -> JSONObject:
        """Encode as one stored run record (a line of a file backend's ``runs.jsonl``)."""
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

    Every method that takes a key raises TypeError unless it is a `SessionKey`. Raises
    CorruptSessionError (naming the file or row) for stored data it cannot decode, and
    never overwrites such data.
    """

    async def open(self) -> None:
        """Get ready to serve (connect, migrate); the server calls it once at start-up."""
        ...

    async def close(self) -> None:
        """Release what `open` took (pools, handles); the server calls it at shutdown."""
        ...

    async def health(self) -> StorageHealth:
        """Whether turns can be saved now (what ``/readyz`` reports); never raises."""
        ...

    async def load(self, key: SessionKey) -> SessionSnapshot | None:
        """The session, or None if it was never saved."""
        ...

    async def version(self, key: SessionKey) -> int:
        """The session's version (0 when it does not exist), without loading its history.

        Cheap on purpose: a server asks it before every turn, to see whether another
        process moved the conversation on since its cached Agent loaded it.
        """
        ...

    async def exists(self, key: SessionKey) -> bool:
        """Whether the session was saved (or has run records), without loading it."""
        ...

    async def append(
        self,
        key: SessionKey,
        messages: Sequence[Message],
        state: JSONObject | None,
        *,
        expected_version: int | None = None,
        fence: int | None = None,
        cut: int | None = None,
        run: RunRecord | None = None,
    ) -> int:
        """Append one turn's messages and, when `state` is not None, replace the state.

        All of it lands or none of it does. Creates the session on first use. Returns the
        new version. With `expected_version`, refuses (ConcurrentWriteError) unless the
        stored version is that one; with `fence`, refuses unless no higher fence was
        accepted for this session before. With `cut`, only the first `cut` stored
        messages are kept before the turn's messages (an edit or a regenerate), in the
        same commit, at the cost of the cut rather than of the history; a `cut` beyond the
        stored history is a StorageError. `run`, the turn's run record, is saved with
        the turn as `put_run` would, in the same transaction (a database) or, for files,
        after the checks and before the commit: a refused write stores none of it.
        """
        ...

    async def rewrite(
        self,
        key: SessionKey,
        messages: Sequence[Message],
        state: JSONObject | None,
        *,
        expected_version: int | None = None,
        fence: int | None = None,
        run: RunRecord | None = None,
    ) -> int:
        """Replace the whole history atomically (a conversation manager trimmed).

        `state` replaces the AgentState too; None keeps the stored one (SPEC guarantee
        12: a trim never loses the state). Checks and returns versions, and saves
        `run`, as `append` does.
        """
        ...

    async def delete(self, key: SessionKey) -> bool:
        """Forget the session, its runs and its retained frames; True if there was one."""
        ...

    async def put_run(self, key: SessionKey, record: RunRecord) -> None:
        """Create or replace the record of one run (atomically)."""
        ...

    async def get_run(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """One run's record, or None."""
        ...

    async def latest_run(self, key: SessionKey) -> RunRecord | None:
        """The record written last (a context runs one turn at a time: its latest run)."""
        ...

    async def list_runs(self, key: SessionKey) -> list[RunRecord]:
        """Every run record of the session, oldest first."""
        ...


@runtime_checkable
class RunEventStorage(Protocol):
    """Optional capability: keep the latest run's stream frames for a reconnect.

    The frames are the bytes the server already encoded for SSE; the storage keeps them
    as they are, one body per session (a new run's replaces the previous run's), and is
    deleted with the session. Without it, frames are retained in memory only.
    """

    async def put_frames(self, key: SessionKey, run_id: str, body: bytes) -> None:
        """Replace the session's retained frames with `run_id`'s `body`."""
        ...

    async def get_frames(self, key: SessionKey, run_id: str) -> bytes | None:
        """The retained body of `run_id`, or None when it is not the one kept."""
        ...


@runtime_checkable
class TaskIndexStorage(Protocol):
    """Optional capability: find a protocol binding's tasks by id (the A2A task index).

    A task id names no context, so a binding keeps one small document per task in an
    index scoped by (principal, definition), the `SessionKey` of which has the binding's
    reserved definition name. A put may be lost by a power cut (not by a killed
    process): it is an index of runs whose records are stored durably anyway, and it
    must not put an fsync in front of a stream's first frame.
    """

    async def put_task(
        self, index: SessionKey, task_id: str, context_id: str, document: JSONObject
    ) -> None:
        """Create or replace the document of `task_id` (a task of `context_id`)."""
        ...

    async def get_task(self, index: SessionKey, task_id: str) -> JSONObject | None:
        """The document of `task_id`, or None."""
        ...

    async def list_tasks(self, index: SessionKey) -> list[tuple[str, JSONObject]]:
        """Every (task id, document) of the index, oldest first."""
        ...

    async def delete_tasks(self, index: SessionKey, context_id: str) -> int:
        """Forget every task of `context_id`; how many there were."""
        ...


@runtime_checkable
class SessionDocumentStorage(Protocol):
    """Optional capability: one named JSON document beside a session (a swarm's record).

    Replaced whole and atomically, deleted with the session, and separate from the
    AgentState, so that writing it never rewrites the history or the state.
    """

    async def put_document(self, key: SessionKey, name: str, document: JSONObject) -> None:
        """Create or replace the session's document `name`."""
        ...

    async def get_document(self, key: SessionKey, name: str) -> JSONObject | None:
        """The session's document `name`, or None."""
        ...


@runtime_checkable
class IncrementalLoadStorage(Protocol):
    """Optional capability: catch a cached history up without reading all of it.

    A server that runs on several replicas finds its cached Agent stale on most turns
    (another replica answered the previous one). Reloading the whole session each time
    makes a turn's cost grow with its history; this reads only what came after the
    version the caller holds, when storage can tell that the history since then only
    grew. A rewrite (a trim), a cut (an edit or a regenerate), a deleted and recreated
    session, or a caller whose idea of that version is not the stored one, all get the
    whole history instead: the answer is never a history that forked.
    """

    async def load_since(
        self, key: SessionKey, *, version: int, count: int, last_id: str | None
    ) -> SessionSnapshot | None:
        """The session as `load` has it, or only what follows the caller's messages.

        The caller holds the `count` messages the session had at `version`, the last of
        which has the id `last_id`. When the stored history still starts with exactly
        those (nothing since `version` rewrote or cut it, and the stored message at
        `count` still has that id), the snapshot's `kept` is `count` and its `messages`
        are the ones after them; otherwise `kept` is 0 and `messages` the whole history.
        The state, metadata and version are always the stored ones. None when the
        session was never saved.
        """
        ...
