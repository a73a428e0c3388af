"""What InMemoryStorage keeps per session, and its retention sweeps (RetentionStorage).

Apart from `memory` so that the storage itself stays one screenful of operations: the
sweeps only walk the sessions this record describes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from agentkeel.keys import SessionKey
from agentkeel.result import Usage
from agentkeel.storage.retention import PROTECTED_STATUSES

__all__ = ["MemoryRetention", "Session"]


@dataclass(slots=True)
class Session:
    """One session's stored JSON and bookkeeping."""

    created_at: float
    updated_at: float
    lines: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    """The message id of each line, so a transcript page decodes only its own lines."""
    state: str = "{}"
    exists: bool = False
    """False while only run records were put: `load` still answers None."""
    version: int = 0
    fence: int = 0
    rewritten_at: int = 0
    """The version of the last turn that changed the history other than by appending
    (a rewrite or a cut): `load_since` reads only new lines of a later version."""
    runs: dict[str, str] = field(default_factory=dict)
    """Run records by id, in the order they were last written."""
    frames: tuple[str, bytes] | None = None
    frames_at: float = 0.0
    documents: dict[str, str] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)


class MemoryRetention:
    """The retention sweeps over `InMemoryStorage`'s sessions."""

    _sessions: dict[SessionKey, Session]

    # -- retention (RetentionStorage): what keeps this storage bounded -------------------

    async def sweep_runs(self, ended_before: float, limit: int) -> int:
        """Drop up to `limit` run records that ended before `ended_before`."""
        doomed: list[tuple[Session, str]] = []
        for session in self._sessions.values():
            for run_id, document in session.runs.items():
                data = json.loads(document)
                ended = data.get("ended_at")
                if data.get("status") in PROTECTED_STATUSES or not isinstance(ended, float | int):
                    continue
                if ended < ended_before:
                    doomed.append((session, run_id))
                    if len(doomed) == limit:
                        break
            if len(doomed) == limit:
                break
        for session, run_id in doomed:
            del session.runs[run_id]
        return len(doomed)

    async def sweep_frames(self, written_before: float, limit: int) -> int:
        """Drop up to `limit` sessions' frames written before `written_before`."""
        doomed = [
            session
            for session in self._sessions.values()
            if session.frames is not None and session.frames_at < written_before
        ][:limit]
        for session in doomed:
            session.frames = None
        return len(doomed)

    async def idle_sessions(self, updated_before: float, limit: int) -> list[SessionKey]:
        """Sessions not updated since `updated_before` whose latest run is not protected."""
        found = []
        for key, session in self._sessions.items():
            if session.updated_at >= updated_before:
                continue
            latest = next(reversed(session.runs.values()), None)
            if latest is not None and json.loads(latest).get("status") in PROTECTED_STATUSES:
                continue
            found.append(key)
            if len(found) == limit:
                break
        return found
