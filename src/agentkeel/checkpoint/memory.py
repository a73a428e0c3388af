"""InMemoryCheckpointer: the reference Checkpointer, for tests and single-process servers.

Checkpoints are kept as encoded JSON, so a caller can never change a stored payload
through an object it still holds, and a payload that is not JSON fails here as it
would on disk.
"""

from __future__ import annotations

import json

from agentkeel.checkpoint.base import Checkpoint
from agentkeel.errors import StorageError
from agentkeel.storage.base import SessionKey

__all__ = ["InMemoryCheckpointer"]


class InMemoryCheckpointer:
    """A Checkpointer that lives in this process: suspended runs do not survive it."""

    def __init__(self) -> None:
        self._threads: dict[SessionKey, dict[str, str]] = {}

    async def put(self, key: SessionKey, checkpoint: Checkpoint) -> None:
        """Store `checkpoint`, replacing one with the same id."""
        try:
            document = json.dumps(checkpoint.to_json(), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise StorageError(f"checkpoint is not JSON-serializable: {exc}") from exc
        self._threads.setdefault(key, {})[checkpoint.id] = document

    async def latest(self, key: SessionKey) -> Checkpoint | None:
        """The newest checkpoint by creation time (ties broken by id), or None."""
        thread = self._threads.get(key)
        if not thread:
            return None
        checkpoints = [Checkpoint.from_json(json.loads(doc)) for doc in thread.values()]
        return max(checkpoints, key=lambda checkpoint: (checkpoint.created_at, checkpoint.id))

    async def delete(self, key: SessionKey, checkpoint_id: str) -> None:
        """Forget one checkpoint; unknown ids are ignored."""
        thread = self._threads.get(key)
        if thread is not None:
            thread.pop(checkpoint_id, None)
            if not thread:
                del self._threads[key]

    async def delete_thread(self, key: SessionKey) -> None:
        """Forget every checkpoint of the thread."""
        self._threads.pop(key, None)
