"""InMemoryStorage: the reference SessionStorage, for tests and servers without a disk.

It keeps every message, state and run record as encoded JSON, exactly as a persistent
backend would, so that callers can never mutate what is stored through an object they
still hold, and so that anything that does not survive the codec fails here too. It has
every optional capability, so it is also the reference for those.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from agentkeel.errors import MessageNotFoundError, StorageError
from agentkeel.keys import SessionKey, require_key
from agentkeel.messages import JSONObject, Message, dumps_message, loads_message
from agentkeel.result import Usage
from agentkeel.storage._memory_session import MemoryRetention, Session
from agentkeel.storage.base import RunRecord, SessionMetadata, SessionSnapshot, StorageHealth
from agentkeel.storage.guard import check_commit
from agentkeel.storage.transcript import (
    ContextListing,
    HistoryPage,
    in_transcript,
    sort_listings,
    title_of,
)

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


class InMemoryStorage(MemoryRetention):
    """A SessionStorage that lives in this process and dies with it.

    Every operation completes without awaiting, so each is atomic with respect to other
    tasks; no lock is needed.
    """

    def __init__(self) -> None:
        self._sessions: dict[SessionKey, Session] = {}
        self._tasks: dict[SessionKey, dict[str, tuple[str, str]]] = {}
        self._principal_usage: dict[tuple[str | None, str], Usage] = {}

    def _session(self, key: SessionKey) -> Session:
        session = self._sessions.get(key)
        if session is None:
            now = time.time()
            session = self._sessions[key] = Session(created_at=now, updated_at=now)
        return session

    async def open(self) -> None:
        """Nothing to open."""

    async def close(self) -> None:
        """Nothing to release (the data stays until the object goes)."""

    async def health(self) -> StorageHealth:
        """Always able to save."""
        return StorageHealth(ok=True)

    async def load(self, key: SessionKey) -> SessionSnapshot | None:
        """The session decoded from its stored JSON, or None if it was never saved."""
        return self._snapshot(require_key(key, "load"), 0)

    async def load_since(
        self, key: SessionKey, *, version: int, count: int, last_id: str | None
    ) -> SessionSnapshot | None:
        """Only the lines after the caller's `count` when the history since `version` grew."""
        session = self._sessions.get(require_key(key, "load_since"))
        kept = 0
        if (
            session is not None
            and 0 < count <= len(session.lines)
            and session.rewritten_at <= version <= session.version
            and session.ids[count - 1] == last_id
        ):
            kept = count
        return self._snapshot(key, kept)

    def _snapshot(self, key: SessionKey, kept: int) -> SessionSnapshot | None:
        session = self._sessions.get(key)
        if session is None or not session.exists:
            return None
        state = json.loads(session.state)
        lines = session.lines[kept:]
        return SessionSnapshot(
            messages=[loads_message(line, position=kept + i) for i, line in enumerate(lines)],
            kept=kept,
            state=state,
            metadata=SessionMetadata(
                definition=key.definition,
                context_id=key.context_id,
                owner=key.principal,
                created_at=session.created_at,
                updated_at=session.updated_at,
                message_count=len(session.lines),
            ),
            version=session.version,
        )

    async def version(self, key: SessionKey) -> int:
        """The number of the last committed turn (0 for none)."""
        session = self._sessions.get(require_key(key, "version"))
        return 0 if session is None else session.version

    async def exists(self, key: SessionKey) -> bool:
        """Whether the session was saved or holds anything: run records, frames, documents."""
        session = self._sessions.get(require_key(key, "exists"))
        if session is None:
            return False
        return session.exists or bool(session.runs or session.documents or session.frames)

    def _commit(self, key: SessionKey, expected_version: int | None, fence: int | None) -> Session:
        session = self._sessions.get(key)
        version, highest = (0, 0) if session is None else (session.version, session.fence)
        highest = check_commit(
            key, version=version, highest_fence=highest,
            expected_version=expected_version, fence=fence,
        )  # fmt: skip
        session = self._session(key)
        session.fence = highest
        if not session.exists:
            session.exists = True
            session.created_at = time.time()
        return session

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
        """Append one turn; everything is encoded and checked before anything is stored."""
        require_key(key, "append")
        lines = _encode_messages(messages)
        encoded_state = None if state is None else _encode(state)
        record = None if run is None else _encode(run.to_json(), "run record")
        stored = self._sessions.get(key)
        if cut is not None and not 0 <= cut <= (0 if stored is None else len(stored.lines)):
            raise StorageError(f"cannot cut {key.session_id} at {cut}: beyond its history")
        session = self._commit(key, expected_version, fence)
        if run is not None and record is not None:
            self._keep_run(session, run.run_id, record)
        if encoded_state == session.state:
            encoded_state = None
        cuts = cut is not None and cut < len(session.lines)
        if cuts:
            del session.lines[cut:], session.ids[cut:]
            session.version += 0 if lines or encoded_state is not None else 1
        if lines or encoded_state is not None:
            session.lines.extend(lines)
            session.ids.extend(message.id for message in messages)
            if encoded_state is not None:
                session.state = encoded_state
            session.version += 1
        if cuts:
            session.rewritten_at = session.version
        session.updated_at = time.time()
        return session.version

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
        """Replace the history (and the state, unless it is None) in one step."""
        require_key(key, "rewrite")
        lines = _encode_messages(messages)
        encoded_state = None if state is None else _encode(state)
        record = None if run is None else _encode(run.to_json(), "run record")
        session = self._commit(key, expected_version, fence)
        if run is not None and record is not None:
            self._keep_run(session, run.run_id, record)
        session.lines = lines
        session.ids = [message.id for message in messages]
        if encoded_state is not None:
            session.state = encoded_state
        session.version += 1
        session.rewritten_at = session.version
        session.updated_at = time.time()
        return session.version

    async def read_messages(
        self, key: SessionKey, *, after: str | None, limit: int
    ) -> HistoryPage | None:
        """A page of the history; only its own lines are decoded."""
        session = self._sessions.get(require_key(key, "read_messages"))
        if session is None or not session.exists:
            return None
        start = 0
        if after is not None:
            try:
                start = session.ids.index(after) + 1
            except ValueError:
                raise MessageNotFoundError(f"the conversation holds no message {after!r}") from None
        lines = session.lines[start : start + limit]
        return HistoryPage(
            messages=[loads_message(line, position=start + i) for i, line in enumerate(lines)],
            more=start + limit < len(session.lines),
            start=start,
        )

    async def list_sessions(
        self, principal: str | None, definition: str, *, limit: int, cursor: str | None
    ) -> tuple[list[ContextListing], str | None]:
        """The principal's saved sessions of `definition`, newest first."""
        listings: list[ContextListing] = []
        for key, session in self._sessions.items():
            if key.principal != principal or key.definition != definition or not session.exists:
                continue
            messages = [loads_message(line) for line in session.lines]
            listings.append(
                ContextListing(
                    metadata=SessionMetadata(
                        definition=key.definition,
                        context_id=key.context_id,
                        owner=key.principal,
                        created_at=session.created_at,
                        updated_at=session.updated_at,
                        message_count=len(session.lines),
                    ),
                    title=title_of(messages),
                    transcript_count=sum(1 for m in messages if in_transcript(m)),
                )
            )
        return sort_listings(listings, limit=limit, cursor=cursor)

    async def delete(self, key: SessionKey) -> bool:
        """Forget the session, its runs, frames and documents; True if any existed."""
        return self._sessions.pop(require_key(key, "delete"), None) is not None

    async def put_run(self, key: SessionKey, record: RunRecord) -> None:
        """Store the run record as its JSON document (it becomes the latest)."""
        document = _encode(record.to_json(), "run record")
        self._keep_run(self._session(require_key(key, "put_run")), record.run_id, document)

    @staticmethod
    def _keep_run(session: Session, run_id: str, document: str) -> None:
        session.runs.pop(run_id, None)
        session.runs[run_id] = document

    async def get_run(self, key: SessionKey, run_id: str) -> RunRecord | None:
        """Decode one stored run record, or None."""
        session = self._sessions.get(require_key(key, "get_run"))
        document = None if session is None else session.runs.get(run_id)
        return None if document is None else RunRecord.from_json(json.loads(document))

    async def latest_run(self, key: SessionKey) -> RunRecord | None:
        """The run record written last, or None."""
        session = self._sessions.get(require_key(key, "latest_run"))
        if session is None or not session.runs:
            return None
        return RunRecord.from_json(json.loads(next(reversed(session.runs.values()))))

    async def list_runs(self, key: SessionKey) -> list[RunRecord]:
        """Every run record, oldest first (by start time, then id)."""
        session = self._sessions.get(require_key(key, "list_runs"))
        if session is None:
            return []
        records = [RunRecord.from_json(json.loads(doc)) for doc in session.runs.values()]
        return sorted(records, key=lambda record: (record.started_at, record.run_id))

    async def put_frames(self, key: SessionKey, run_id: str, body: bytes) -> None:
        """Keep `run_id`'s frames, replacing the previous run's (RunEventStorage)."""
        session = self._session(require_key(key, "put_frames"))
        session.frames = (run_id, bytes(body))
        session.frames_at = time.time()

    async def get_frames(self, key: SessionKey, run_id: str) -> bytes | None:
        """The kept frames when they are `run_id`'s (RunEventStorage)."""
        session = self._sessions.get(require_key(key, "get_frames"))
        kept = None if session is None else session.frames
        return kept[1] if kept is not None and kept[0] == run_id else None

    async def put_document(self, key: SessionKey, name: str, document: JSONObject) -> None:
        """Replace the session's document `name` (SessionDocumentStorage)."""
        encoded = _encode(document, "document")
        self._session(require_key(key, "put_document")).documents[name] = encoded

    async def get_document(self, key: SessionKey, name: str) -> JSONObject | None:
        """The session's document `name`, or None (SessionDocumentStorage)."""
        session = self._sessions.get(require_key(key, "get_document"))
        encoded = None if session is None else session.documents.get(name)
        return None if encoded is None else json.loads(encoded)

    async def put_task(
        self, index: SessionKey, task_id: str, context_id: str, document: JSONObject
    ) -> None:
        """Create or replace one task's document (TaskIndexStorage)."""
        encoded = _encode(document, "task record")
        self._tasks.setdefault(require_key(index, "put_task"), {})[task_id] = (context_id, encoded)

    async def get_task(self, index: SessionKey, task_id: str) -> JSONObject | None:
        """One task's document, or None (TaskIndexStorage)."""
        found = self._tasks.get(require_key(index, "get_task"), {}).get(task_id)
        return None if found is None else json.loads(found[1])

    async def list_tasks(self, index: SessionKey) -> list[tuple[str, JSONObject]]:
        """Every task of the index, in the order they were first put (TaskIndexStorage)."""
        tasks = self._tasks.get(require_key(index, "list_tasks"), {})
        return [(task_id, json.loads(doc)) for task_id, (_, doc) in tasks.items()]

    async def delete_tasks(self, index: SessionKey, context_id: str) -> int:
        """Forget every task of `context_id` (TaskIndexStorage)."""
        tasks = self._tasks.get(require_key(index, "delete_tasks"), {})
        doomed = [task_id for task_id, (context, _) in tasks.items() if context == context_id]
        for task_id in doomed:
            del tasks[task_id]
        return len(doomed)

    async def add_usage(self, key: SessionKey, usage: Usage, *, day: str) -> None:
        """Add to the context's and the principal's daily totals (UsageStorage)."""
        session = self._session(require_key(key, "add_usage"))
        session.usage = session.usage + usage
        bucket = (key.principal, day)
        self._principal_usage[bucket] = self._principal_usage.get(bucket, Usage()) + usage

    async def context_usage(self, key: SessionKey) -> Usage:
        """The context's total (UsageStorage); it goes with the session on delete."""
        session = self._sessions.get(require_key(key, "context_usage"))
        return Usage() if session is None else session.usage

    async def principal_usage(self, principal: str | None, day: str) -> Usage:
        """The principal's total of `day` (UsageStorage)."""
        return self._principal_usage.get((principal, day), Usage())
