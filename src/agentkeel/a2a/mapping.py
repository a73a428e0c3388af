"""agentkeel's runs in A2A's words: native frames to task events, run records to Tasks.

Pure functions and one stateful mapper, no I/O. The vocabulary (docs/a2a.md has the
table):

- ``token`` deltas are chunks of one text artifact, ``response``: the first chunk of a
  model step starts it afresh (``append`` unset), the next ones append, and the last
  one before the end carries ``lastChunk``; the artifact thus always ends equal to the
  run's completion text, which the done frame confirms (a mismatch is repaired by one
  replacing chunk);
- ``status``, ``step``, ``thinking``, ``tool_call`` and ``tool_result`` are
  ``TASK_STATE_WORKING`` status updates whose metadata carries the native event under
  ``agentkeel`` (inputs and outputs of tools stay on the server, as on the native wire,
  unless the tool is exposed: then they are in that event too);
- the done frame is the final status update: ``completed``, ``failed`` (its message
  says why), ``cancelled``, or ``suspended``, which is ``TASK_STATE_INPUT_REQUIRED``
  with a status message carrying the interrupt (a text part asking the question and a
  data part ``{"interrupt": {"id", "kind", "tool", "prompt"}}``).

A swarm's events also carry the member's name as ``agentkeel.agent``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.timestamp_pb2 import Timestamp

from agentkeel.a2a.turn import TaskRecord
from agentkeel.messages import JSONObject, JSONValue
from agentkeel.runtime.channels import Frame
from agentkeel.runtime.wire import interrupt_json
from agentkeel.storage.base import RunRecord

__all__ = [
    "OUTPUT_ARTIFACT",
    "RESPONSE_ARTIFACT",
    "STATES",
    "TERMINAL",
    "TextChunk",
    "Event",
    "Mapped",
    "StreamMapper",
    "build_task",
    "decision_of",
    "interrupt_message",
    "message_json",
    "output_artifact",
    "prompt_of",
    "status_time",
    "step_text",
]

Event = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
"""What a stream yields, as the SDK's dispatcher takes it."""


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of the ``response`` artifact: the one event a stream carries by the dozen.

    It stays a plain object until it is written (`agentkeel.a2a.stream` encodes it
    directly); `to_event` is the SDK's equivalent, for consumers of the SDK types.
    """

    task_id: str
    context_id: str
    text: str
    append: bool
    last: bool

    def to_event(self) -> TaskArtifactUpdateEvent:
        """The chunk as the SDK's TaskArtifactUpdateEvent."""
        return TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=_text_artifact(self.text),
            append=self.append,
            last_chunk=self.last,
        )


Mapped = Event | TextChunk
"""What `StreamMapper` produces."""
RESPONSE_ARTIFACT = "response"
"""The id of the artifact holding a run's completion text."""
STATES: dict[str, TaskState] = {
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "cancelled": TaskState.TASK_STATE_CANCELED,
    "suspended": TaskState.TASK_STATE_INPUT_REQUIRED,
}
"""Run status to task state."""
TERMINAL = frozenset(
    {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED}
)
_WORKING_EVENTS = frozenset({"status", "thinking", "tool_call", "tool_result"})
_APPROVE_WORDS = frozenset({"approve", "approved", "yes", "y", "ok"})
_REJECT_WORDS = frozenset({"reject", "rejected", "deny", "denied", "no", "n"})


def status_time(seconds: float | None = None) -> Timestamp:
    """A status timestamp (now when `seconds` is None)."""
    stamp = Timestamp()
    stamp.FromNanoseconds(time.time_ns() if seconds is None else int(seconds * 1e9))
    return stamp


def message_json(message: Message) -> JSONObject:
    """A Message as ProtoJSON (how task records keep them)."""
    data: JSONObject = MessageToDict(message)
    return data


def prompt_of(message: Message) -> str:
    """The text an Agent gets for an A2A message: text parts, and data parts as JSON.

    Raises:
        ContentTypeNotSupportedError: A file part (``raw`` or ``url``): agents take text.
        InvalidParamsError: Nothing to say.
    """
    pieces: list[str] = []
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            pieces.append(json.dumps(MessageToDict(part.data), ensure_ascii=False))
        elif kind is not None:
            raise ContentTypeNotSupportedError(
                message="this agent takes text and data parts, not files"
            )
    prompt = "\n".join(piece for piece in pieces if piece)
    if not prompt.strip():
        raise InvalidParamsError(message="the message has no text or data to answer")
    return prompt


def decision_of(message: Message, kind: str) -> JSONValue:
    """The decision a message gives to a pending interrupt of `kind` (native JSON shape).

    A data part is taken as it is (``{"approved": true}``, ``{"approved": false,
    "reason": "..."}``, ``{"cancel": true}``, or for an input interrupt any value). An
    input interrupt otherwise takes the text; an approval takes a plain yes or no.
    """
    for part in message.parts:
        if part.WhichOneof("content") == "data":
            value: JSONValue = MessageToDict(part.data)
            return value
    text = "\n".join(part.text for part in message.parts if part.WhichOneof("content") == "text")
    if kind == "input":
        return text
    word = text.strip().lower().rstrip(".!")
    if word in _APPROVE_WORDS:
        return {"approved": True}
    if word in _REJECT_WORDS:
        return {"approved": False}
    raise InvalidParamsError(
        message='an approval needs a data part {"approved": true} or '
        '{"approved": false, "reason": "..."} (or the text "yes" or "no")'
    )


def interrupt_message(task_id: str, context_id: str, interrupt: JSONObject) -> Message:
    """The status message of a task waiting for a person: the question and its interrupt."""
    prompt = interrupt.get("prompt")
    tool = interrupt.get("tool")
    approval = interrupt.get("kind") == "approval"
    if isinstance(prompt, str) and prompt:
        # An approval's prompt says what the call will do; the person answers yes or no.
        question = f"{prompt}\nApprove? Answer yes or no." if approval else prompt
    elif approval:
        question = f"Approve the call of the tool {tool}? Answer yes or no."
    else:
        question = "Input is needed to continue."
    return Message(
        message_id=f"{task_id}-{interrupt.get('id')}",
        context_id=context_id,
        task_id=task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=question), ParseDict({"data": {"interrupt": interrupt}}, Part())],
    )


def _agent_message(task_id: str, context_id: str, suffix: str, text: str) -> Message:
    return Message(
        message_id=f"{task_id}-{suffix}",
        context_id=context_id,
        task_id=task_id,
        role=Role.ROLE_AGENT,
        parts=[Part(text=text)],
    )


def _final_status(
    task_id: str,
    context_id: str,
    status: str,
    interrupt: JSONValue,
    error: JSONValue,
    at: float | None,
) -> TaskStatus:
    state = STATES.get(status, TaskState.TASK_STATE_FAILED)
    message: Message | None = None
    if state == TaskState.TASK_STATE_INPUT_REQUIRED and isinstance(interrupt, dict):
        message = interrupt_message(task_id, context_id, interrupt)
    elif state == TaskState.TASK_STATE_FAILED:
        reason = error.get("message") if isinstance(error, dict) else None
        text = reason if isinstance(reason, str) and reason else "the run failed"
        message = _agent_message(task_id, context_id, "error", text)
    return TaskStatus(state=state, message=message, timestamp=status_time(at))


def build_task(record: TaskRecord, run: RunRecord | None, *, live_text: str | None = None) -> Task:
    """The Task of a record: live (`live_text` is the text so far) or from its run record.

    A task with neither a live run nor a run record was cut off by a stop of the
    server before its run could be saved; it is reported failed.
    """
    task_id, context_id = record.task_id, record.context_id
    artifacts = [ParseDict(item, Artifact()) for item in record.artifacts]
    if live_text is not None:
        status = TaskStatus(state=TaskState.TASK_STATE_WORKING, timestamp=status_time())
        text = live_text
    elif run is None:
        status = _final_status(
            task_id,
            context_id,
            "failed",
            None,
            {"message": "the run did not finish (the server stopped)"},
            record.created_at,
        )
        text = ""
    else:
        interrupt = interrupt_json(run.interrupts[0]) if run.interrupts else None
        error = run.error.to_json() if run.error is not None else None
        at = run.ended_at or run.started_at
        status = _final_status(task_id, context_id, run.status, interrupt, error, at)
        text = run.text
    if text:
        artifacts.append(_text_artifact(text))
    return Task(
        id=task_id,
        context_id=context_id,
        status=status,
        artifacts=artifacts,
        history=[ParseDict(item, Message()) for item in record.history],
    )


def step_text(frames: Sequence[Frame]) -> str:
    """The text the current model step of a live run has streamed so far."""
    pieces: list[str] = []
    for frame in reversed(frames):
        event = frame.data.get("event")
        if frame.done or not isinstance(event, dict) or event.get("type") == "step":
            break
        if event.get("type") == "token":
            pieces.append(str(event.get("text", "")))
    return "".join(reversed(pieces))


OUTPUT_ARTIFACT = "output"
"""The artifact holding an output-typed agent's structured answer, as a data part."""


def output_artifact(output: JSONValue) -> Artifact:
    """A run's validated structured answer as A2A's own structured part (a DataPart)."""
    return ParseDict(
        {
            "artifactId": OUTPUT_ARTIFACT,
            "name": OUTPUT_ARTIFACT,
            "parts": [{"data": output, "mediaType": "application/json"}],
        },
        Artifact(),
    )


def _text_artifact(text: str) -> Artifact:
    return Artifact(artifact_id=RESPONSE_ARTIFACT, name=RESPONSE_ARTIFACT, parts=[Part(text=text)])


class StreamMapper:
    """Native frames of one run segment to A2A task events, batch by batch.

    Args:
        task_id: The task (run) id.
        context_id: Its context.
        streamed_text: Text of the current model step already sent (a subscriber that
            joins midway got it in its Task snapshot).
    """

    def __init__(self, task_id: str, context_id: str, *, streamed_text: str = "") -> None:
        self.task_id = task_id
        self.context_id = context_id
        self.streamed = streamed_text
        self.fresh_step = False
        """The next text starts a new model step (it replaces the artifact's text)."""
        self.closed = False
        """The artifact got its ``lastChunk``."""

    def artifact(self, artifact: Artifact) -> TaskArtifactUpdateEvent:
        """A published artifact as an update event."""
        return TaskArtifactUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, artifact=artifact
        )

    def batch(self, frames: Sequence[JSONObject]) -> list[Mapped]:
        """The events of frames that arrived together (consecutive tokens become one chunk)."""
        events: list[Mapped] = []
        text: list[str] = []
        for data in frames:
            event = data.get("event")
            if isinstance(event, dict) and event.get("type") == "token":
                text.append(str(event.get("text", "")))
                continue
            if data.get("done") is True:
                events.extend(self._done(data, "".join(text)))
                return events
            if text:
                events.append(self._chunk("".join(text), last=False))
                text = []
            if isinstance(event, dict):
                events.extend(self._event(event, data.get("agent")))
        if text:
            events.append(self._chunk("".join(text), last=False))
        return events

    def _chunk(self, text: str, *, last: bool) -> TextChunk:
        restart = self.fresh_step or not self.streamed
        self.fresh_step = False
        self.streamed = text if restart else self.streamed + text
        self.closed = last
        return TextChunk(self.task_id, self.context_id, text, not restart, last)

    def _event(self, event: JSONObject, agent: JSONValue) -> list[Mapped]:
        kind = event.get("type")
        if kind == "step":  # a new model call: its text replaces the previous call's
            self.fresh_step = self.fresh_step or bool(self.streamed)
            return []
        if kind not in _WORKING_EVENTS:
            return []  # interrupt and error: the done frame says it
        details: JSONObject | None = None if kind == "status" else dict(event)
        if isinstance(agent, str):
            details = {**(details or event), "agent": agent}
        working = TaskStatusUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_WORKING, timestamp=status_time()),
        )
        if details is not None:
            working.metadata.update({"agentkeel": details})
        return [working]

    def _done(self, data: JSONObject, pending: str) -> list[Mapped]:
        events: list[Mapped] = []
        final = data.get("text")
        final_text = final if isinstance(final, str) else ""
        restart = self.fresh_step or not self.streamed
        ending = pending if restart else self.streamed + pending
        if ending != final_text:  # a middleware changed the text: replace it whole
            self.fresh_step = True
            events.append(self._chunk(final_text, last=True))
        elif pending or (self.streamed and not self.closed):
            events.append(self._chunk(pending, last=True))
        status = _final_status(
            self.task_id,
            self.context_id,
            str(data.get("status")),
            data.get("interrupt"),
            data.get("error"),
            None,
        )
        events.append(
            TaskStatusUpdateEvent(task_id=self.task_id, context_id=self.context_id, status=status)
        )
        return events
