"""What a run started over A2A can see of its request, and what it can add to its task.

The A2A binding sets the current `A2ATurn` in a context variable just before it hands
the turn to the server runtime; the run's task is created right then, so it (and every
tool, hook and model call of the run) inherits it, while runs started on the native
wire see None. That gives code inside a run three small, optional powers, none of which
the runtime itself knows about:

- `current_message()`: the A2A message being answered (its ``messageId``, metadata,
  extensions, parts), e.g. for a tool that honours a client's metadata;
- `publish_artifact()`: attach a file, URL or data artifact to the task (the completion
  text is the task's ``response`` artifact already); it is stored with the task before
  the call returns and streamed with the run's next event;
- `reply_as_message()`: ask that a blocking ``SendMessage`` be answered with a plain
  Message instead of a Task (an A2A agent's "direct reply"); streams always carry a task.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

import anyio
from a2a.types import Artifact, Message
from google.protobuf.json_format import MessageToDict

from agentkeel.messages import JSONObject

__all__ = [
    "A2ATurn",
    "TaskRecord",
    "current_message",
    "publish_artifact",
    "reply_as_message",
]

logger = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class TaskRecord:
    """What the A2A binding keeps of a task beyond its run record.

    The run record (status, text, interrupts, timings) stays the source of truth for
    the task's state; this adds what only A2A has: the messages exchanged, in order, as
    A2A wrote them, and the artifacts a run published.
    """

    task_id: str
    context_id: str
    created_at: float = field(default_factory=time.time)
    history: list[JSONObject] = field(default_factory=list)
    """A2A Messages (ProtoJSON), user and agent, oldest first."""
    artifacts: list[JSONObject] = field(default_factory=list)
    """Published A2A Artifacts (ProtoJSON), in order."""
    message_reply: bool = False
    """The run answered with a Message; the task was never shown to the client."""

    def to_json(self) -> JSONObject:
        """Encode for storage."""
        return {
            "contextId": self.context_id,
            "createdAt": self.created_at,
            "history": list(self.history),
            "artifacts": list(self.artifacts),
            "messageReply": self.message_reply,
        }

    @classmethod
    def from_json(cls, task_id: str, data: JSONObject) -> TaskRecord:
        """Decode from storage; ValueError when malformed."""
        context_id, created = data.get("contextId"), data.get("createdAt")
        history, artifacts = data.get("history") or [], data.get("artifacts") or []
        if (
            not isinstance(context_id, str)
            or not isinstance(created, int | float)
            or not isinstance(history, list)
            or not isinstance(artifacts, list)
        ):
            raise ValueError(f"malformed A2A task record {task_id!r}")
        return cls(
            task_id=task_id,
            context_id=context_id,
            created_at=float(created),
            history=[item for item in history if isinstance(item, dict)],
            artifacts=[item for item in artifacts if isinstance(item, dict)],
            message_reply=data.get("messageReply") is True,
        )


Saver = Callable[[TaskRecord], Awaitable[None]]


@dataclass(eq=False, slots=True, kw_only=True)
class A2ATurn:
    """One A2A request that started or resumed a run: its message and its task's record."""

    message: Message
    record: TaskRecord | None = None
    """Set once the run started (the task id is the run id)."""
    save: Saver | None = None
    published: list[Artifact] = field(default_factory=list)
    """Every artifact the run published during this turn, in order."""
    streamed: int = 0
    """How many of `published` a stream has sent."""
    message_reply: bool = False
    _lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))

    def attach(self, record: TaskRecord, save: Saver) -> None:
        """The run started: give the turn its task record (with what was published so far)."""
        record.artifacts.extend(MessageToDict(item) for item in self.published)
        self.record, self.save = record, save

    async def persist(self) -> None:
        """Store the task record as it is now (serialized, so writes land in order)."""
        async with self._lock:
            if self.record is not None and self.save is not None:
                await self.save(self.record)

    async def add_artifact(self, artifact: Artifact) -> None:
        """Keep `artifact` for the stream and in the task record, then store the record."""
        if not artifact.artifact_id:
            artifact.artifact_id = f"artifact-{secrets.token_hex(8)}"
        self.published.append(artifact)
        if self.record is not None:
            self.record.artifacts.append(MessageToDict(artifact))
            await self.persist()

    def take_unstreamed(self) -> list[Artifact]:
        """The published artifacts a stream has not sent yet (now marked sent)."""
        fresh = self.published[self.streamed :]
        self.streamed = len(self.published)
        return fresh


_CURRENT: ContextVar[A2ATurn | None] = ContextVar("agentkeel_a2a_turn", default=None)


def current_turn() -> A2ATurn | None:
    """The A2A turn of the current run (None for runs not started over A2A)."""
    return _CURRENT.get()


def enter_turn(turn: A2ATurn) -> object:
    """Make `turn` current for the runs started from here; returns a reset token."""
    return _CURRENT.set(turn)


def exit_turn(token: object) -> None:
    """Undo `enter_turn`."""
    _CURRENT.reset(token)  # type: ignore[arg-type]


def current_message() -> Message | None:
    """The A2A message the current run answers, or None outside an A2A-started run.

    On a resumed task it is the message that resumed it. Read it from a model, a tool
    or a hook of the run, e.g. to honour the message's ``metadata`` or ``extensions``.
    """
    turn = _CURRENT.get()
    return None if turn is None else turn.message


async def publish_artifact(artifact: Artifact) -> bool:
    """Attach `artifact` to the current A2A task; False when the run is not an A2A one.

    Use it for what is not completion text: a file (``raw`` or ``url`` parts), or
    structured ``data``. The artifact is stored with the task before this returns, so
    ``GetTask`` lists it also after a restart; a missing ``artifactId`` is assigned.
    """
    turn = _CURRENT.get()
    if turn is None:
        logger.debug("publish_artifact | the run was not started over A2A; nothing to attach")
        return False
    await turn.add_artifact(artifact)
    return True


def reply_as_message() -> bool:
    """Answer the current blocking ``SendMessage`` with a Message instead of a Task.

    For a run that is a quick, self-contained answer. Only a new task answered by a
    blocking ``SendMessage`` can become a Message (a stream has already sent its Task);
    returns False when it cannot apply.
    """
    turn = _CURRENT.get()
    if turn is None or turn.message.task_id:
        return False
    turn.message_reply = True
    return True
