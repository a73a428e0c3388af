"""InMemoryStorage: the reference SessionStorage, for tests and servers without a disk.

It keeps every message, state and run record as encoded JSON, exactly as a persistent
backend would, so that callers can never mutate what is stored through an object they
still hold, and so that anything that does not survive the codec fails here too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentkeel.errors import StorageError
from agentkeel.messages import JSONObject, Message, dumps_message, loads_message
from agentkeel.result import Usage
from agentkeel.storage.base import RunRecord, SessionKey, SessionMetadata, SessionSnapshot

__all__ = ["InMemoryStorage"]


def _encode(value: JSONObject, what: str = "state") -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise StorageError(f"{what} is not JSON-serializable: {exc}") from exc


def _encode_messages(messages: Sequence[Message]) -> list[str]:
    try:
        return [dumps_message(message) for message in messages]
    except (TypeError, ValueError) as exc:
        raise StorageError(f"a message is not JSON-serializable: {exc}") from exc


@dataclass(slots=True)
class _Session:
    created_at: float
    updated_at: float
    lines: list[str] = field(default_factory=list)
    state: str = "{}"
    exists: bool = False
    """False while only run records were put: `load` still answers None."""
    runs: dict[str, str] = field(default_factory=dict)
    events: dict[str, list[str]] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)


class InMemoryStorage:
    """A SessionStorage that lives in this process and dies with it.

    Every operation completes without awaiting, so each is atomic with respect to other
    tasks; no lock is needed.
    """

    def __init__(self) -> None:
        self._sessions: dict[SessionKey, _Session] = {}
        self._principal_usage: dict[tuple[str | None, str], Usage] = {}

    def _session(self, key: SessionKey) -> _Session:
        session = self._sessions.get(key)
        if session is None:
            now = time.time()
            session = self._sessions[key] = _Session(created_at=now, updated_at=now)
        return session

    async def load(self, key: SessionKey) -> SessionSnapshot | None:
        """The session decoded from its stored JSON, or None if it was never saved."""
        session = self._sessions.get(key)
        if session is None or not session.exists:
            return None
        state = json.loads(session.state)
        return SessionSnapshot(
            messages=[loads_message(line) for line in session.lines],
            state=state,
            metadata=SessionMetadata(
                definition=key.definition,
                context_id=key.context_id,
                owner=key.principal,
                created_at=session.created_at,
                updated_at=session.updated_at,
                message_count=len(session.lines),
            ),
        )

    async def append(
        self, key: SessionKey, messages: Sequence[Message], state: JSONObject | None
    ) -> None:
        """Append one turn; everything is encoded before anything is stored."""
        lines = _encode_messages(messages)
        encoded_state = None if state is None else _encode(state)
        session = self._session(key)
        if not session.exists:
            session.exists = True
            session.created_at = time.time()
        session.lines.extend(lines)
        if encoded_state is not None:
            session.state = encoded_state
        session.updated_at = time.time()

    async def rewrite(
        self, key: SessionKey, messages: Sequence[Message], state: JSONObject
    ) -> None:
        """Replace the history and the state in one step."""
        lines = _encode_messages(messages)
        encoded_state = _encode(state)
        session = self._session(key)
        if not session.exists:
            session.exists = True
            session.created_at = time.time()
        session.lines = lines
        session.state = encoded_state
        session.updated_at = time.time()

    async def delete(self, key: SessionKey) -> bool:
        """Forget the session and its runs; True if either existed."""
        return self._sessions.pop(key, None) is not None

    async def put_run(self, key: SessionKey, record: RunRecord) -> None:
        """Store the run record as its JSON document."""
        document = _encode(record.to_json(), "run record")
        self._session(key).runs[record.run_id] = document

    async def get_run(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """Decode one stored run record, or None."""
        session = self._sessions.get(key)
        document = None if session is None else session.runs.get(run_id)
        return None if document is None else RunRecord.from_json(json.loads(document))

    async def put_events(self, key: SessionKey, run_id: str, frames: Sequence[JSONObject]) -> None:
        """Keep a copy of one run's stream frames (RunEventStorage); only the latest run's."""
        encoded = [_encode(frame, "stream frame") for frame in frames]
        self._session(key).events = {run_id: encoded}

    async def get_events(self, key: SessionKey, run_id: str) -> list[JSONObject] | None:
        """The retained frames of one run, or None (RunEventStorage)."""
        session = self._sessions.get(key)
        stored = None if session is None else session.events.get(run_id)
        return None if stored is None else [json.loads(frame) for frame in stored]

    async def list_runs(self, key: SessionKey) -> list[RunRecord]:
        """Every run record, oldest first (by start time, then id)."""
        session = self._sessions.get(key)
        if session is None:
            return []
        records = [RunRecord.from_json(json.loads(doc)) for doc in session.runs.values()]
        return sorted(records, key=lambda record: (record.started_at, record.run_id))

    async def add_usage(self, key: SessionKey, usage: Usage, *, day: str) -> None:
        """Add to the context's and the principal's daily totals (UsageStorage)."""
        session = self._session(key)
        session.usage = session.usage + usage
        bucket = (key.principal, day)
        self._principal_usage[bucket] = self._principal_usage.get(bucket, Usage()) + usage

    async def context_usage(self, key: SessionKey) -> Usage:
        """The context's total (UsageStorage); it goes with the session on delete."""
        session = self._sessions.get(key)
        return Usage() if session is None else session.usage

    async def principal_usage(self, principal: str | None, day: str) -> Usage:
        """The principal's total of `day` (UsageStorage)."""
        return self._principal_usage.get((principal, day), Usage())
