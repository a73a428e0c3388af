"""The Checkpointer interface: where suspended human-in-the-loop runs wait.

The thread id is the context id; checkpoints are stored under the same SessionKey as
the session (definition, principal, contextId), so two agents or two principals never
share one. A checkpoint's `payload` is the run loop's own JSON encoding of a suspended
run; a checkpointer stores it without interpreting it.

A checkpointer numbers the checkpoints of a thread itself (`Checkpoint.sequence`), and
"latest" means the highest number: clocks of two processes (or one clock stepped back)
never decide which suspended run is current.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentkeel.keys import SessionKey
from agentkeel.messages import SCHEMA_VERSION, JSONObject

__all__ = ["Checkpoint", "Checkpointer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """One suspended run, as saved when it suspended."""

    id: str
    run_id: str
    created_at: float
    payload: JSONObject
    sequence: int = 0
    """Assigned by the checkpointer when stored (1, 2, ... per thread); 0 before."""
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> JSONObject:
        """Encode as the `<checkpointId>.json` document."""
        return {
            "schema_version": self.schema_version,
            "id": self.id,
            "run_id": self.run_id,
            "created_at": self.created_at,
            "sequence": self.sequence,
            "payload": self.payload,
        }

    @classmethod
    def from_json(cls, data: JSONObject) -> Checkpoint:
        """Decode; raises ValueError/KeyError/TypeError when malformed."""
        payload = data["payload"]
        created = data["created_at"]
        if not isinstance(payload, dict) or not isinstance(created, int | float):
            raise ValueError("malformed checkpoint")
        version = data.get("schema_version", SCHEMA_VERSION)
        sequence = data.get("sequence", 0)  # 0.1.0 wrote none: older than any numbered one
        return cls(
            id=str(data["id"]),
            run_id=str(data["run_id"]),
            created_at=float(created),
            payload=payload,
            sequence=sequence if isinstance(sequence, int) else 0,
            schema_version=int(version) if isinstance(version, int) else SCHEMA_VERSION,
        )


@runtime_checkable
class Checkpointer(Protocol):
    """Stores suspended runs per thread (= per session key)."""

    async def put(self, key: SessionKey, checkpoint: Checkpoint) -> int:
        """Save `checkpoint` atomically; it becomes the thread's latest. Returns its sequence.

        The sequence is one more than any the thread holds (a checkpoint put again with
        the same id is renumbered: it is the latest now).
        """
        ...

    async def latest(self, key: SessionKey) -> Checkpoint | None:
        """The thread's checkpoint with the highest sequence, or None."""
        ...

    async def delete(self, key: SessionKey, checkpoint_id: str) -> None:
        """Remove one checkpoint (its run resumed to an end); unknown ids are ignored.

        The thread's last checkpoint going takes the thread's folder (or row) with it.
        """
        ...

    async def delete_thread(self, key: SessionKey) -> None:
        """Remove every checkpoint of the thread (the context was deleted)."""
        ...
