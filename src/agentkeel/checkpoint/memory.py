"""InMemoryCheckpointer: the reference Checkpointer, for tests and single-process servers.

Checkpoints are kept as encoded JSON, so a caller can never change a stored payload
through an object it still holds, and a payload that is not JSON fails here as it
would on disk.
"""

from __future__ import annotations

import json
from dataclasses import replace

from agentkeel.checkpoint.base import Checkpoint
from agentkeel.errors import StorageError
from agentkeel.keys import SessionKey, require_key

__all__ = ["InMemoryCheckpointer"]


class InMemoryCheckpointer:
    """A Checkpointer that lives in this process: suspended runs do not survive it."""

    def __init__(self) -> None:
        self._threads: dict[SessionKey, dict[str, str]] = {}
        self._sequences: dict[SessionKey, int] = {}

    async def put(self, key: SessionKey, checkpoint: Checkpoint) -> int:
        """Store `checkpoint` with the thread's next sequence, replacing one with its id."""
        require_key(key, "put")
        sequence = self._sequences.get(key, 0) + 1
        try:
            document = json.dumps(replace(checkpoint, sequence=sequence).to_json())
        except (TypeError, ValueError) as exc:
            raise StorageError(f"checkpoint is not JSON-serializable: {exc}") from exc
        self._threads.setdefault(key, {})[checkpoint.id] = document
        self._sequences[key] = sequence
        return sequence

    async def latest(self, key: SessionKey) -> Checkpoint | None:
        """The checkpoint with the highest sequence, or None."""
        thread = self._threads.get(require_key(key, "latest"))
        if not thread:
            return None
        checkpoints = [Checkpoint.from_json(json.loads(doc)) for doc in thread.values()]
        return max(checkpoints, key=lambda checkpoint: checkpoint.sequence)

    async def delete(self, key: SessionKey, checkpoint_id: str) -> None:
        """Forget one checkpoint; unknown ids are ignored."""
        thread = self._threads.get(require_key(key, "delete"))
        if thread is not None:
            thread.pop(checkpoint_id, None)
            if not thread:
                del self._threads[key]

    async def delete_thread(self, key: SessionKey) -> None:
        """Forget every checkpoint of the thread."""
        self._threads.pop(require_key(key, "delete_thread"), None)
        self._sequences.pop(key, None)
